"""NCCL RAS status in JSON (`ncclras -f json`, NCCL 2.28.7+): the raw per-rank data behind the
text report. Rows use the names the text report's lines get in the log parser (logs.nccl), so
the `nccl_ras` feature reads both: per communicator, its missing ranks (unresponsive or dead)
and, per operation type, ranks whose launched-operation counts differ from the others'.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ingest.engine.clock import Clock
from ingest.engine.events import EventSink, ParseError, ParseReport, clamp_int, describe
from ingest.engine.io import decode_json, read_all

FORMAT = "nccl_ras_json"
SOURCE = "log"  # a status report, read like the text one (the `source` values of docs/rules.md "Events and fields")
MAX_BYTES = 256 * 1024**2


def sniff(head: bytes, name: str) -> bool:
    text = head.lstrip()
    return text.startswith(b"{") and b'"communicators"' in head and b'"nccl_version"' in head \
        and (b'"missing_ranks' in head or b'"collective_counts"' in head or b'"ras"' in head)


def parse(path: Path, sink: EventSink, report: ParseReport) -> None:
    doc = decode_json(read_all(path, MAX_BYTES), str(path))
    if not isinstance(doc, dict) or not isinstance(doc.get("communicators"), list):
        got = (describe(doc) if not isinstance(doc, dict) else "no 'communicators' key" if "communicators" not in doc
               else f"'communicators' as {describe(doc['communicators'])}")
        raise ParseError(str(path), "top level", "an ncclras JSON report with a 'communicators' list", got=got)
    report.meta.update({"nccl_version": str(doc.get("nccl_version", "")), "timestamp": str(doc.get("timestamp", "")),
                        "clock": Clock("none", note="RAS reports carry a local time string only").to_meta()})
    for i, comm in enumerate(doc["communicators"]):
        if isinstance(comm, dict):
            _communicator(comm, f"communicators[{i}]", sink)
        else:
            report.skipped["communicator not an object"] += 1


def _communicator(comm: dict, loc: str, sink: EventSink) -> None:
    h = str(comm.get("hash", "")).removeprefix("0x")
    sink.emit(ts=0, kind="log", name="NCCLRasCommunicator", attrs={"hash": h, "size": comm.get("size")}, loc=loc)
    missing = [m for m in comm.get("missing_ranks") or [] if isinstance(m, dict)]
    if missing:
        dead = [m for m in missing if (m.get("status") or {}).get("considered_dead")]
        name, unit = ("NCCLRasDeadProcesses", "process") if len(dead) == len(missing) else ("NCCLRasMissingRanks",
                                                                                              "rank")
        sink.emit(ts=0, kind="error", name=name, severity="warning", loc=f"{loc}.missing_ranks",
                  attrs={"count": len(missing), "unit": unit})
        for m in missing:
            _rank(m, f"{loc}.missing_ranks", sink)
    _counts(comm, loc, sink)


def _counts(comm: dict, loc: str, sink: EventSink) -> None:
    """Per operation type, the groups of ranks by launched count, when they differ."""
    by_op: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in comm.get("ranks") or []:
        if isinstance(r, dict) and isinstance(r.get("collective_counts"), dict):
            for op, n in r["collective_counts"].items():
                by_op[str(op)][clamp_int(n, 0)].append(r)
    for op, groups in by_op.items():
        if len(groups) < 2:
            continue
        sink.emit(ts=0, kind="error", name="NCCLRasOpCountMismatch", severity="warning", loc=f"{loc}.ranks",
                  attrs={"op": op})
        largest = max(len(g) for g in groups.values())
        for n, members in sorted(groups.items()):
            sink.emit(ts=0, kind="log", name="NCCLRasOpCount", loc=f"{loc}.ranks",
                      attrs={"count": len(members), "operation": n})
            if len(members) < largest:  # the text report lists an outlier group's members
                for m in members:
                    _rank(m, f"{loc}.ranks", sink)


def _rank(r: dict, loc: str, sink: EventSink) -> None:
    sink.emit(ts=0, kind="log", name="NCCLRasRank", loc=loc,
              attrs={"rank": clamp_int(r.get("rank")), "pid": clamp_int(r.get("pid")), "node": str(r.get("host", "")),
                     "gpu": r.get("cuda_dev")})
