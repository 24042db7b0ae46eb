"""Coverage-guided fuzz targets for the native code that parses uploads, with differential
oracles (tests/fuzz/oracles.py), run by atheris (libFuzzer) over a kept seed corpus.

    python -m tests.fuzz.targets TARGET BUILD_DIR [libFuzzer flags] WORK_CORPUS SEEDS

BUILD_DIR holds the extensions built by tests/fuzz/build.py (AddressSanitizer,
UndefinedBehaviorSanitizer and libFuzzer's coverage), loaded by file name: never the installed
ones. The Python runs with atheris' AddressSanitizer runtime preloaded (`build.fuzz_env`):
tests/fuzz/test_native_fuzz.py runs it so in `make test`. libFuzzer writes the inputs it finds
into WORK_CORPUS (a temporary folder); SEEDS (tests/fuzz/seeds/TARGET) is only read.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from tests.fuzz import oracles

SEEDS = Path(__file__).resolve().parent / "seeds"


def load(build_dir: Path | str, name: str):
    """The extension module `name` (`_scan`, `_gather`) built into `build_dir`."""
    path = next(Path(build_dir).glob(f"{name}.*.so"))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gather_case(data: bytes) -> tuple[tuple, bool] | None:
    """take_strings' arguments from fuzz bytes, and whether their offset buffers are aligned.
    Layout: chunk count, flags, output size,
    written + 16; per chunk: rows, data size, rows + 1 offsets as int8 steps, the data; then
    (chunk, row) pairs as int8. Flags: bit k < 4 drops chunk k; 5: one more chunk id than
    rows; 6: one row end too few; 7: a misaligned offset buffer."""
    if len(data) < 4:
        return None
    n_chunks, flags, out_len, written = data[0] % 5, data[1], data[2] * 2, data[3] - 16
    pos, sources = 4, []
    for k in range(n_chunks):
        n_rows, size = data[pos] % 8 if pos < len(data) else 0, data[pos + 1] % 64 if pos + 1 < len(data) else 0
        steps = data[pos + 2:pos + 3 + n_rows].ljust(n_rows + 1, b"\0")
        pos += 3 + n_rows
        offsets = np.cumsum(np.frombuffer(steps, np.int8), dtype=np.int32)
        text = np.frombuffer(data[pos:pos + size], np.uint8)
        pos += size
        sources.append(None if flags >> k & 1 else (offsets, text))
    pairs = np.frombuffer(data[pos:pos + (len(data) - pos) // 2 * 2], np.int8).astype(np.int64)
    chunk_of, within = pairs[0::2].copy(), pairs[1::2].copy()
    if flags >> 5 & 1:
        chunk_of = np.append(chunk_of, 0)
    ends_len = max(len(within) - (flags >> 6 & 1), 0)
    held = [k for k, s in enumerate(sources) if s is not None]
    aligned = not (flags >> 7 & 1 and held)
    if not aligned:
        offsets, text = sources[held[0]]
        sources[held[0]] = (memoryview(b"\0" + offsets.tobytes())[1:], text)
    return (out_len, ends_len, written, sources, chunk_of, within), aligned


def gather_seed(out_len: int, written: int, chunks: list[tuple[list[int], bytes] | None],
                rows: list[tuple[int, int]], flags: int = 0) -> bytes:
    """The fuzz bytes `gather_case` reads back as these arguments (offsets start at 0 and step
    by at most 127; a None chunk is dropped)."""
    for k, chunk in enumerate(chunks):
        flags |= (chunk is None) << k
    out = bytearray([len(chunks), flags, out_len // 2, written + 16])
    for chunk in chunks:
        offsets, text = chunk or ([0], b"")
        out += bytes([len(offsets) - 1, len(text)]) + np.diff([0] + offsets).astype(np.int8).tobytes() + text
    for k, r in rows:
        out += np.array([k, r], np.int8).tobytes()
    return bytes(out)


@dataclass(frozen=True)
class Target:
    module: str                      # the extension, as build.py names it
    check: Callable[[object, bytes], object]
    max_len: int                     # libFuzzer's -max_len: small inputs, many of them


def check_gather(module, data: bytes) -> None:
    case = gather_case(data)
    if case is not None:
        args, aligned = case
        oracles.check_take_strings(module, *args, aligned=aligned)


TARGETS = {
    "kineto_scan": Target("_scan", oracles.check_scan, 4096),
    "gather": Target("_gather", check_gather, 1024),
}


def replay(module, name: str, seeds: Path | None = None) -> int:
    """Every seed of a target through its oracle (with whatever build `module` is); how many."""
    files = sorted((seeds or SEEDS / name).iterdir())
    for f in files:
        try:
            TARGETS[name].check(module, f.read_bytes())
        except oracles.Mismatch as e:
            raise oracles.Mismatch(f"{f.name}: {e}") from None
    return len(files)


def main(argv: list[str]) -> None:
    import atheris  # the test extra; only here, so the oracles load without it

    name, build_dir, flags = argv[1], argv[2], argv[3:]
    target = TARGETS[name]
    module = load(build_dir, target.module)  # before Setup: libFuzzer sees its coverage counters
    atheris.Setup([argv[0], f"-max_len={target.max_len}", *flags], lambda data: target.check(module, data))
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
