"""Errors of the rule engine that several of its modules raise."""
from __future__ import annotations


class CompileError(ValueError):
    """A semantic error in a rule; `path` points into the rule document (for line/col),
    `offset` into the string value at that path."""

    def __init__(self, message: str, path: tuple = (), offset: int = 0):
        super().__init__(message)
        self.message, self.path, self.offset = message, tuple(path), offset


class EvalError(RuntimeError):
    """A rule that cannot be evaluated over this trace (a missing column, too many windows)."""
