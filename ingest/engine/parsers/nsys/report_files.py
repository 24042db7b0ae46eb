"""Raw Nsight reports (`.nsys-rep`, `.ncu-rep`): proprietary binary formats only NVIDIA's
tools read. Recognised by their magic bytes so the person gets the exact export command
instead of "unknown format".
"""
from __future__ import annotations

from pathlib import Path

from ingest.engine.events import EventSink, ParseError, ParseReport, excerpt

FORMAT = "nsight_report"
SOURCE = "nsys"

NSYS_MAGIC = b"NVIDIA Tegra Profiler Report"   # .nsys-rep (and the older .qdrep)
NCU_MAGIC = b"NVR\x00"                          # .ncu-rep


def sniff(head: bytes, name: str) -> bool:
    return head.startswith(NSYS_MAGIC) or head.startswith(NCU_MAGIC)


def parse(path: Path, sink: EventSink, report: ParseReport) -> None:
    with open(path, "rb") as f:
        head = f.read(len(NSYS_MAGIC))
    stem = Path(path).name.rsplit(".", 1)[0] or "report"
    if head.startswith(NSYS_MAGIC):
        raise ParseError(str(path), "byte 0", (
            f"a format tracedoc reads: export it with `nsys export --type sqlite -o {stem}.sqlite "
            f"{stem}.nsys-rep` and upload the .sqlite file"),
            got="a raw Nsight Systems report (.nsys-rep) that only NVIDIA's tools read")
    if not head.startswith(NCU_MAGIC):
        raise ParseError(str(path), "byte 0", "a raw Nsight Systems or Nsight Compute report's magic bytes",
                         got=excerpt(head))
    raise ParseError(str(path), "byte 0", (
        f"a format tracedoc reads: export it with `ncu --import {stem}.ncu-rep --page raw --csv > "
        f"{stem}.csv` (or `--page details` for the rule results) and upload the .csv file"),
        got="a raw Nsight Compute report (.ncu-rep) that only NVIDIA's tools read")
