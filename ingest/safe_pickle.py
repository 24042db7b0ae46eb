"""Reading pickles from untrusted files as plain data, never as code.

PyTorch writes flight-recorder dumps and memory snapshots as pickles of plain dicts and
lists. A pickle can also name any importable callable (os.system ...) and have it called
while loading, so `pickle.load` on an upload is remote code execution. This unpickler
refuses every global: `find_class` and `persistent_load` raise, which closes GLOBAL,
STACK_GLOBAL, INST, OBJ's class, EXT1/2/4 and PERSID/BINPERSID; without a callable,
REDUCE, NEWOBJ and BUILD have nothing to call and fail too.

Errors name the file and the byte offset of the offending opcode. The offset is found by
a second, pure-inspection pass (pickletools.genops, which executes nothing) only when
loading fails, so the good path costs one C-speed load.
"""
from __future__ import annotations

import io
import pickle
import pickletools
from pathlib import Path
from typing import Any

from ingest.events import ParseError
from ingest.io import read_all

# Snapshots of long runs reach hundreds of MiB; beyond this we refuse rather than swap.
MAX_PICKLE_BYTES = 2 * 1024**3
PROTOCOLS = (2, 3, 4, 5)

# Opcodes that reach for code or objects outside plain data.
_FORBIDDEN = {
    "GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "BUILD", "NEWOBJ", "NEWOBJ_EX",
    "PERSID", "BINPERSID", "EXT1", "EXT2", "EXT4", "NEXT_BUFFER", "READONLY_BUFFER",
}
_STRING_OPS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING",
               "BINSTRING", "SHORT_BINSTRING"}


def is_pickle(head: bytes) -> bool:
    """True for a protocol 2-5 pickle header (PROTO opcode, then the version byte)."""
    return len(head) >= 2 and head[0] == 0x80 and head[1] in PROTOCOLS


class _RefusingUnpickler(pickle.Unpickler):
    refused: str | None = None

    def find_class(self, module: str, name: str):
        self.refused = f"{module}.{name}"
        raise pickle.UnpicklingError(f"global {self.refused} refused")

    def persistent_load(self, pid: Any):
        self.refused = f"persistent id {pid!r:.80}"
        raise pickle.UnpicklingError("persistent id refused")


def loads(data: bytes, path: str | Path) -> Any:
    """Plain Python data from pickle bytes, or ParseError(path, 'byte N', why)."""
    path = str(path)
    if not is_pickle(data[:2]):
        raise ParseError(path, "byte 0", "a pickle of protocol 2-5 (header 0x80 0x02..0x05)")
    unpickler = _RefusingUnpickler(io.BytesIO(data))
    try:
        return unpickler.load()
    except Exception as e:  # any failure: locate it with the inspect-only pass
        where, what = _locate_problem(data, unpickler.refused)
        raise ParseError(path, where, what or f"a well-formed pickle ({type(e).__name__}: {e})") from None


def load_path(path: str | Path, limit: int = MAX_PICKLE_BYTES) -> Any:
    """Read (gzip-transparent, size-bounded) and unpickle safely."""
    return loads(read_all(path, limit), path)


def _locate_problem(data: bytes, refused: str | None) -> tuple[str, str | None]:
    """Where loading failed: ('byte N', reason) for a forbidden opcode or damaged stream.
    `refused` is the exact name find_class saw, when it was asked for one."""
    recent: list[str] = []  # last strings pushed: STACK_GLOBAL takes module and name from them
    pos = 0
    try:
        for op, arg, pos in pickletools.genops(data):
            if op.name in _STRING_OPS:
                recent = (recent + [str(arg)])[-2:]
            elif op.name in _FORBIDDEN:
                return f"byte {pos}", _forbidden_reason(op.name, arg, refused, recent)
    except ValueError as e:  # genops reports truncation and unknown opcodes with a position
        return f"byte {_position(str(e), len(data))}", f"a complete, well-formed pickle ({e})"
    return f"byte {pos}", None


def _forbidden_reason(opname: str, arg: Any, refused: str | None, recent: list[str]) -> str:
    if refused:
        name = refused
    elif opname in ("GLOBAL", "INST"):
        name = str(arg).replace(" ", ".")
    elif opname == "STACK_GLOBAL":
        name = ".".join(recent) if len(recent) == 2 else "a global from the stack"
    elif opname in ("EXT1", "EXT2", "EXT4"):
        name = f"extension code {arg}"
    elif opname in ("PERSID", "BINPERSID"):
        name = "a persistent id"
    else:
        name = "an object constructor"
    return f"plain data only; {opname} opcode refused (it would load {name})"


def _position(message: str, default: int) -> int:
    """genops messages read 'at position 123, ...' or 'pickle exhausted before ...'."""
    marker = "at position "
    if marker in message:
        digits = message.split(marker, 1)[1].split(",", 1)[0].split()[0]
        if digits.isdigit():
            return int(digits)
    return default
