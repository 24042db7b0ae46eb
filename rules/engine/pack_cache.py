"""The builtin rule pack, checked once and cached (marshal, plain values only) until a rule
file or a file of the rules package changes."""
from __future__ import annotations

import hashlib
import marshal
import os
import sys
from pathlib import Path
from typing import Callable

from rules.engine.rule import Rule

PACK_CACHE_VERSION = 1
_RULES_CODE = Path(__file__).resolve().parents[1]  # the rules app: the engine's checks and rules/schema.json


def cached_pack(files: list[Path], load: Callable[[list[Path]], list[Rule]]) -> list[Rule]:
    """`load(files)` (the loader's load_rule_files), from a cache when nothing it depends on changed.

    Checking the pack (YAML, JSON Schema, compiling every rule) costs about as much as the
    rest of a small diagnosis; a CLI run repeats it each time. The cache holds the checked
    rules' data (marshal: plain values only, like a .pyc) under a key over every rule file's
    bytes and every file of the rules package, so an edited rule, schema or feature is
    checked again. Nothing is cached when the pack has errors (they are raised each time)."""
    cache = _pack_cache_path()
    key = _pack_key(files) if cache is not None else b""
    cached = _read_pack(cache, key) if cache is not None else None
    if cached is not None:
        return cached
    rules = load(files)
    if cache is not None:
        _write_pack(cache, key, rules)
    return rules


def _pack_cache_path() -> Path | None:
    """TRACEDOC_CACHE (a folder; empty: no cache), else the user's cache folder."""
    where = os.environ.get("TRACEDOC_CACHE")
    if where is None:
        where = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tracedoc")
    return Path(where) / "builtin-rules.marshal" if where else None


def _pack_key(files: list[Path]) -> bytes:
    h = hashlib.sha256(f"{PACK_CACHE_VERSION} {sys.version}".encode())
    code = sorted(p for p in _RULES_CODE.rglob("*") if p.suffix in (".py", ".json") and p.is_file())
    for path in list(files) + code:
        try:
            data = path.read_bytes()
        except OSError:
            return b""  # unreadable: no key, no cache
        h.update(f"\0{path}\0{len(data)}\0".encode())
        h.update(data)
    return h.digest()


def _read_pack(cache: Path, key: bytes) -> list[Rule] | None:
    if not key:
        return None
    try:
        stored_key, entries = marshal.loads(cache.read_bytes())
        if stored_key != key:
            return None
        return [Rule.from_data(data, file, line, source) for data, file, line, source in entries]
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        return None


def _write_pack(cache: Path, key: bytes, rules: list[Rule]) -> None:
    if not key:
        return
    try:
        payload = marshal.dumps((key, [(r.data, r.file, r.line, r.source) for r in rules]))
        cache.parent.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError):  # data marshal cannot hold, or a read-only home: just no cache
        return
    tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(payload)
        os.replace(tmp, cache)  # readers see the old file or the new one, never half of one
    except OSError:
        tmp.unlink(missing_ok=True)

