"""Which line classifiers can match a line, decided in one pass before any of them runs.

Each classifier family declares `Needs`: the literal words one of which its patterns cannot
match without (compared case-insensitively, so a family's words are a superset of what its
case-sensitive patterns require), and optionally the first characters a line it reads may
start with (table rows, indented figures). `KeywordGate` compiles every family's words into
one RE2 set, which reports every word present in a single linear scan of the line; the
families with none of their words present are skipped. A line of an NCCL INFO log thus runs
one or two families instead of all of them, and a hostile line of one repeated character
runs none.

The gate only skips work: a family it lets through runs exactly as before, in the same
order, so the events are the same with the gate on or off (tests/ingest/parsers check this
over every line of the corpus).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import re2


@dataclass(frozen=True)
class Needs:
    """What a line must contain for a family's patterns to have a chance: one of `words`
    (case-insensitive), or a first character in `starts`, or (after leading whitespace) in
    `starts_after_space`, or any leading whitespace when `first_space`."""
    words: tuple[str, ...]
    starts: str = ""
    starts_after_space: str = ""
    first_space: bool = False

    @property
    def has_openers(self) -> bool:
        return bool(self.starts or self.starts_after_space or self.first_space)

    def opens(self, text: str) -> bool:
        head = text[:1]
        if not head:
            return False
        if head in self.starts or (self.first_space and head.isspace()):
            return True
        return bool(self.starts_after_space) and text.lstrip()[:1] in tuple(self.starts_after_space)


class KeywordGate:
    """Bitmask of the families (by position in `needs`) whose words or first characters a
    text has; a family with `None` needs is always a candidate."""

    def __init__(self, needs: Sequence[Needs | None]):
        self.always = 0
        self.openers: list[tuple[int, Needs]] = []
        by_word: dict[str, int] = {}
        for i, need in enumerate(needs):
            bit = 1 << i
            if need is None:
                self.always |= bit
                continue
            if need.has_openers:
                self.openers.append((bit, need))
            for word in need.words:
                by_word[word.lower()] = by_word.get(word.lower(), 0) | bit
        self.words = tuple(by_word)
        self.bits = tuple(by_word.values())
        self.everything = (1 << len(needs)) - 1
        options = re2.Options()
        options.case_sensitive = False
        options.max_mem = 64 << 20
        self.set = re2.Set.SearchSet(options)
        for word in self.words:
            self.set.Add(re2.escape(word))
        self.set.Compile()

    def candidates(self, text: str) -> int:
        mask = self.always
        try:
            hits = self.set.Match(text)
        except UnicodeEncodeError:  # a lone surrogate (never from the log reader's decode): skip nothing
            return self.everything
        if hits:
            bits = self.bits
            for i in hits:
                mask |= bits[i]
        for bit, need in self.openers:
            if need.opens(text):
                mask |= bit
        return mask


def words(*groups: Iterable[str]) -> tuple[str, ...]:
    """Flatten word lists declared next to each module's patterns."""
    return tuple(w for g in groups for w in g)
