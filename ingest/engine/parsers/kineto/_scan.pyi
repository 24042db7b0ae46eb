"""The compiled Kineto window scanner (_scan.c): the types its callers rely on."""
from typing import Any

KEYS: tuple[str, ...]  # the top-level keys, then the args keys, in the order of `scan`'s columns

# (events, spans, columns, long_digits, numbers), or None: decode the window with msgspec
def scan(window: bytearray | memoryview, /) -> tuple[int, Any, Any, Any, Any] | None: ...
