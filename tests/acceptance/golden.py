"""Golden reports: the whole JSON report of every corpus scenario and captured fixture,
stored so that a refactor or a speed-up can be shown to change nothing a user sees.

    python -m tests.acceptance.golden          # rewrite tests/fixtures/golden_reports/

Rewrite only when a change of diagnosis is intended, and say why in the commit.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from diagnosis.engine import scenarios
from tests.corpus import CORPUS

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "golden_reports"
FIXTURES = ROOT / "tests" / "fixtures"
PUBLIC_FILES = ("kineto", "nsys", "ncu", "nvml", "otlp", "perf", "memory_snapshot")


def cases() -> dict[str, Path]:
    """Golden name -> input (a folder or a file)."""
    out: dict[str, Path] = {}
    if CORPUS.is_dir():
        for name in scenarios.list_scenarios(CORPUS):
            out[name] = CORPUS / name
        for family in PUBLIC_FILES:
            for p in sorted((CORPUS / "public" / family).iterdir()):
                out[f"public/{family}/{p.name}"] = p
    for group in ("h200_rerun", "h200_open_world", "nccl_multirank"):
        for p in sorted((FIXTURES / group).iterdir()):
            if p.is_dir() and not p.name.startswith("_"):
                out[f"{group}/{p.name}"] = p
    return out


def file_name(case: str) -> str:
    return case.replace("/", "__") + ".json"


def normalized(report: dict) -> dict:
    """The report as JSON would carry it (floats rounded to 9 significant digits, so a
    summation order change in a speed-up is not a diagnosis change)."""
    return _round(json.loads(json.dumps(report, default=str, sort_keys=True)))


def _round(v):
    if isinstance(v, float):
        return v if not math.isfinite(v) or v == 0 else float(f"{v:.9g}")
    if isinstance(v, dict):
        return {k: _round(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_round(x) for x in v]
    return v


def render(case: str) -> str:
    return json.dumps(normalized(scenarios.report(cases()[case])), indent=1, sort_keys=True) + "\n"


def main() -> int:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    wanted = cases()
    for case in wanted:
        (GOLDEN / file_name(case)).write_text(render(case))
        print(case, file=sys.stderr)
    for stale in set(p.name for p in GOLDEN.glob("*.json")) - {file_name(c) for c in wanted}:
        (GOLDEN / stale).unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
