"""The compiled extensions (ingest/engine/parsers/kineto/_scan.c, ingest/engine/_gather.c) are optional in
pyproject.toml, so an install where they failed to compile succeeds quietly. Their tests skip
only where no C compiler exists; where one does, a missing extension is a failure."""
from __future__ import annotations

import shutil

import pytest


def compiler_on_path() -> str | None:
    return next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)


def require_built(module, what: str) -> None:
    if module is not None:
        return
    found = compiler_on_path()
    if found:
        pytest.fail(f"{what} was not built although a C compiler ({found}) is on PATH: "
                    "the install failed to compile it (pip install -v -e . shows why)")
    pytest.skip(f"{what} was not built (no C compiler)")
