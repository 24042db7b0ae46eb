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

from ingest.engine.events import MAX_GOT, ParseError, excerpt
from ingest.engine.io import env_int, read_all

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
    """Plain Python data from pickle bytes, or ParseError(path, 'byte N', why). The data is
    also held to objects_allowed() (see check_objects) before anyone walks it."""
    path = str(path)
    if not is_pickle(data[:2]):
        raise ParseError(path, "byte 0", "a pickle of protocol 2-5 (header 0x80 0x02..0x05)",
                         got=excerpt(data[:17], 16))
    unpickler = _RefusingUnpickler(io.BytesIO(data))
    try:
        value = unpickler.load()
    except Exception as e:  # any failure: locate it with the inspect-only pass
        where, what, got = _locate_problem(data, unpickler.refused)
        raise ParseError(path, where, what or "a well-formed pickle",
                         got=got or f"{type(e).__name__}: {e}"[:MAX_GOT]) from None
    check_objects(value, path, len(data))
    return value


# What the data of one pickle may expand to. A pickle stores a shared object once and refers to
# it again with a 2-byte memo reference, so 12 KB can hold a list of lists doubling 40 times:
# cheap to load, but every reader that walks it (a parser copying a value into its attrs, JSON
# written out for the report) expands it. Counted as readers see it: a shared object once per
# reference, a string one object per STRING_CHARS characters.
OBJECTS_PER_BYTE = 8      # real snapshots: 1.5-2.7 objects per pickle byte
OBJECTS_FLOOR = 10_000_000
MAX_OBJECTS = 2_000_000_000
MAX_DEPTH = 100          # snapshots and flight-recorder dumps nest about 6 levels
STRING_CHARS = 64
_CONTAINERS = (dict, list, tuple, set, frozenset)


def objects_allowed(pickle_bytes: int) -> int:
    cap = env_int("TRACEDOC_MAX_PICKLE_OBJECTS", MAX_OBJECTS)
    return min(cap, max(OBJECTS_FLOOR, pickle_bytes * OBJECTS_PER_BYTE))


def check_objects(value: Any, path: str, pickle_bytes: int) -> int:
    """The objects `value` expands to (see above), or ParseError naming where in the data the
    bound, the nesting bound or a cycle was met. Each distinct container is walked once (its
    expanded size is remembered), so this costs the pickle's size, not the expansion's."""
    allowed = objects_allowed(pickle_bytes)
    if not isinstance(value, _CONTAINERS):
        return _leaf(value)
    sizes: dict[int, int] = {}      # id -> expanded size of a container already walked
    on_path = {id(value)}
    # a frame: [container, iterator over its children, how it was reached, objects under it,
    #           children seen]
    stack: list[list] = [_frame(value, _TOP)]
    total = 1
    while stack:
        frame = stack[-1]
        is_dict = isinstance(frame[0], dict)
        for child in frame[1]:
            frame[4] += 1
            if is_dict:
                key, child = child
                cost = _leaf(key) if not isinstance(key, _CONTAINERS) else check_objects(key, path, pickle_bytes)
                frame[3] += cost
                total += cost
            if isinstance(child, _CONTAINERS):
                known = sizes.get(id(child))
                if known is None:
                    label = _label(frame)
                    if id(child) in on_path:
                        raise ParseError(path, _where(stack, label), "plain data without cycles",
                                         got="an object that contains itself")
                    if len(stack) >= MAX_DEPTH:
                        raise ParseError(path, _where(stack, label), f"data nested at most {MAX_DEPTH} levels deep",
                                         got="deeper nesting")
                    stack.append(_frame(child, label))
                    on_path.add(id(child))
                    total += 1
                    if total > allowed:
                        raise _too_many(path, stack, None, allowed, pickle_bytes)
                    break
                cost = known
            else:
                cost = _leaf(child)
            frame[3] += cost
            total += cost
            if total > allowed:
                raise _too_many(path, stack, _label(frame), allowed, pickle_bytes)
        else:
            stack.pop()
            on_path.discard(id(frame[0]))
            sizes[id(frame[0])] = frame[3]
            if stack:
                stack[-1][3] += frame[3]
    return total


_TOP = object()


def _frame(container: Any, label: Any) -> list:
    return [container, iter(container.items() if isinstance(container, dict) else container), label, 1, 0]


def _label(frame: list) -> Any:
    """The key (a dict) or index of the child the frame's iterator gave last."""
    if isinstance(frame[0], dict):
        return list(frame[0])[frame[4] - 1] if frame[4] else None
    return frame[4] - 1


def _leaf(value: Any) -> int:
    if isinstance(value, (str, bytes, bytearray)):
        return 1 + len(value) // STRING_CHARS
    return 1


def _where(stack: list[list], label: Any) -> str:
    keys = [f[2] for f in stack[1:]] + ([] if label is None else [label])
    labels = [f"[{excerpt(k) if isinstance(k, (str, bytes)) else f'{k!r:.40}'}]" for k in keys]
    if len(labels) > 8:  # a deep path: its start (the key people know) and its end
        labels = labels[:4] + [f"...({len(labels) - 6} levels)..."] + labels[-2:]
    return "at " + ("".join(labels) or "the top level")


def _too_many(path: str, stack: list[list], label: Any, allowed: int, pickle_bytes: int) -> ParseError:
    return ParseError(path, _where(stack, label),
                      f"at most {allowed:,} objects for a pickle of {pickle_bytes:,} bytes ({OBJECTS_PER_BYTE} "
                      f"per byte, at least {OBJECTS_FLOOR:,}; TRACEDOC_MAX_PICKLE_OBJECTS in all), counting a "
                      "shared object once per reference",
                      got="more: shared references repeat objects without storing them (possible pickle bomb)")


def load_path(path: str | Path, limit: int = MAX_PICKLE_BYTES) -> Any:
    """Read (gzip-transparent, size-bounded) and unpickle safely."""
    return loads(read_all(path, limit), path)


def _locate_problem(data: bytes, refused: str | None) -> tuple[str, str | None, str | None]:
    """Where loading failed: ('byte N', expected, got) for a forbidden opcode or damaged stream.
    `refused` is the exact name find_class saw, when it was asked for one."""
    recent: list[str] = []  # last strings pushed: STACK_GLOBAL takes module and name from them
    pos: int | None = 0
    try:
        for op, arg, pos in pickletools.genops(data):
            if op.name in _STRING_OPS:
                recent = (recent + [str(arg)])[-2:]
            elif op.name in _FORBIDDEN:
                return f"byte {pos}", "plain data only", _forbidden_reason(op.name, arg, refused, recent)
    except ValueError as e:  # genops reports truncation and unknown opcodes with a position
        return f"byte {_position(str(e), len(data))}", "a complete, well-formed pickle", str(e)[:MAX_GOT]
    return f"byte {pos}", None, None


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
    return f"a {opname} opcode, refused (it would load {excerpt(name, 80)})"


def _position(message: str, default: int) -> int:
    """genops messages read 'at position 123, ...' or 'pickle exhausted before ...'."""
    marker = "at position "
    if marker in message:
        digits = message.split(marker, 1)[1].split(",", 1)[0].split()[0]
        if digits.isdigit():
            return int(digits)
    return default
