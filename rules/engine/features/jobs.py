"""Which job each rank's files belong to, when one upload holds several jobs.

Cross-rank reasoning pairs files by rank: rank 0's timeout with rank 1's log, rank 0's dump
with rank 1's dump at the same sequence id. Two incidents uploaded together (two folders, each
with its rank0.log and rank1.log) would be paired across jobs: one job's rank 0 waiting for the
other job's rank 1. One job has one rank 0, so when two folders each hold a file of the same
kind claiming the same rank, every folder is its own job; files outside any such folder (a
host's NVML samples beside them) belong to all.
"""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import PurePosixPath

import numpy as np
import pandas as pd

from ingest.engine.trace_frame import parse_attrs, text_values

MAX_RANK_ROWS = 20_000                         # rank-naming rows read per source
_GLOBAL_RANK = re.compile(r"\bglobal rank: (\d+)")  # c10d's "ProcessGroupNCCL initialization options"
_RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)
RANKED_SOURCES = ("log", "flight_recorder")


def artifact_ranks(ev: pd.DataFrame, source: str) -> dict[str, set[int]]:
    """artifact -> the ranks its rows name (torch's `[rankN]:` prefix, a watchdog line, a dump's
    rank), else its process group's init line ("global rank: N"), else its file name
    (`rank1.log`, `nccl_trace_rank_1`)."""
    rows = ev[ev["source"] == source]
    if rows.empty:
        return {}
    attrs = rows["attrs"]
    said = rows[(attrs.str.contains('"rank":', regex=False) | attrs.str.contains("global rank: ", regex=False))
                .fillna(False).to_numpy(bool)]
    ranks: dict[str, set[int]] = defaultdict(set)
    for artifact, text in zip(text_values(said["artifact"])[:MAX_RANK_ROWS], said["attrs"][:MAX_RANK_ROWS]):
        a = parse_attrs(text)
        rank = a.get("rank")
        if not isinstance(rank, int) and (m := _GLOBAL_RANK.search(str(a.get("text", "")))):
            rank = int(m.group(1))
        if isinstance(rank, int) and not isinstance(rank, bool):
            ranks[artifact].add(rank)
    for artifact in set(text_values(rows["artifact"])) - set(ranks):
        if (m := _RANK_IN_NAME.search(PurePosixPath(artifact).name)):
            ranks[artifact].add(int(m.group(1)))
    return dict(ranks)


def job_folders(ev: pd.DataFrame) -> list[str] | None:
    """The folders that are jobs of their own, or None when the upload is one job."""
    folder_of_rank: dict[tuple[str, int], set[str]] = defaultdict(set)
    for source in RANKED_SOURCES:
        for artifact, ranks in artifact_ranks(ev, source).items():
            if len(ranks) == 1:
                folder_of_rank[(source, next(iter(ranks)))].add(str(PurePosixPath(artifact).parent))
    if not any(len(folders) > 1 for folders in folder_of_rank.values()):
        return None
    return sorted({f for folders in folder_of_rank.values() for f in folders if f != "."})


def per_job(ev: pd.DataFrame) -> list[pd.DataFrame]:
    """The events once per job (each job's folder plus the files outside every job folder), or
    the whole frame when the upload is one job."""
    folders = job_folders(ev)
    if not folders:
        return [ev]
    names = pd.unique(text_values(ev["artifact"]))  # per artifact, not per row

    def within(name: str, folder: str) -> bool:
        return str(PurePosixPath(name).parent) == folder or name.startswith(folder + "/")
    shared = [n for n in names if not any(within(n, f) for f in folders)]
    artifact = text_values(ev["artifact"])
    return [ev[pd.Series(artifact).isin([n for n in names if within(n, f)] + shared).to_numpy()] for f in folders]


def rows_by_job(artifacts: pd.Series, rows: np.ndarray, jobs: list[str]) -> list[np.ndarray]:
    """`rows` (positions in the table whose artifact column is `artifacts`) split by job, keeping
    their order; rows of files outside every job folder go with each job's."""
    names = text_values(artifacts.iloc[rows]) if len(rows) else np.array([], dtype=object)
    job_of = {n: next((j for j in jobs if n.startswith(j + "/")), "") for n in pd.unique(names)}
    of_row = np.array([job_of[n] for n in names], dtype=object) if len(names) else np.array([], dtype=object)
    shared = of_row == ""
    parts = [rows[(of_row == job) | shared] for job in jobs]
    return [p for p in parts if len(p)] or [rows]
