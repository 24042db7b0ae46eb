"""Errors of the rule engine that several of its modules raise (and the CLI catches: this module
imports nothing, so catching them does not load the engine)."""
from __future__ import annotations


class CompileError(ValueError):
    """A semantic error in a rule; `path` points into the rule document (for line/col),
    `offset` into the string value at that path."""

    def __init__(self, message: str, path: tuple = (), offset: int = 0):
        super().__init__(message)
        self.message, self.path, self.offset = message, tuple(path), offset
        # the rule's other problems, found after this one (rules.engine.compiler.compile_rule checks
        # every part of a rule, so `rules validate` lists them all)
        self.more: tuple[CompileError, ...] = ()

    @property
    def every(self) -> tuple["CompileError", ...]:
        return (self, *self.more)


class EvalError(RuntimeError):
    """A rule that cannot be evaluated over this trace (a missing column, too many windows)."""


class RuleError(ValueError):
    """A rule file that cannot be used, at `file:line:col` (rules.engine.loader raises it)."""

    def __init__(self, file: str, line: int, col: int, message: str):
        super().__init__(f"{file}:{line}:{col}: {message}")
        self.file, self.line, self.col, self.message = str(file), line, col, message

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "col": self.col, "message": self.message}
