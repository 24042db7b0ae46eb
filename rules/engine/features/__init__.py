"""Built-in features: derived tables that rules select from with `from: <name>`.

A feature is a documented Python function over the trace (`ctx.events`, other features
via `ctx.feature(name)`) returning rows shaped like events (see ingest.engine.trace_frame.as_event_frame) plus any
extra numeric/boolean columns. Rules cannot run code; features are how the engine offers
what selections and aggregates cannot express (correlations, derived metrics).

    @feature("steady_state", doc="The steady-state window after the cold start (one row).")
    def steady_state(ctx) -> pd.DataFrame: ...

Each feature is computed lazily, at most once per trace, and cached in the TraceContext.
Feature modules are the other modules of this package; they are imported on first use.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from ingest.engine import interruptions
from ingest.engine.trace_frame import TraceFrame, as_event_frame


@dataclass(frozen=True)
class Feature:
    name: str
    doc: str
    fn: Callable[["TraceContext"], pd.DataFrame]


_REGISTRY: dict[str, Feature] = {}
_modules_loaded = False


def feature(name: str, doc: str):
    """Register `fn(ctx) -> DataFrame` as the feature `name` (lowercase, digits, _)."""
    if not name or not all(c.islower() or c.isdigit() or c == "_" for c in name):
        raise ValueError(f"feature name {name!r} must be lowercase letters, digits and _")

    def register(fn):
        if name in _REGISTRY and _REGISTRY[name].fn is not fn:
            raise ValueError(f"feature {name!r} is registered twice")
        _REGISTRY[name] = Feature(name, " ".join(doc.split()), fn)
        return fn
    return register


def _load_modules() -> None:
    global _modules_loaded
    if _modules_loaded:
        return
    _modules_loaded = True
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def get_feature(name: str) -> Feature | None:
    _load_modules()
    return _REGISTRY.get(name)


def list_features() -> list[dict]:
    """[{"name", "doc"}] sorted by name: for docs/rules.md, the API and validation messages."""
    _load_modules()
    return [{"name": f.name, "doc": f.doc} for f in sorted(_REGISTRY.values(), key=lambda f: f.name)]


class FeatureError(RuntimeError):
    pass


class TraceContext(TraceFrame):
    """One trace's frame (events, span, index: ingest.engine.trace_frame) plus its features, each
    computed at most once."""

    def __init__(self, events: pd.DataFrame):
        super().__init__(events)
        self._features: dict[str, pd.DataFrame | FeatureError] = {}
        self._computing: list[str] = []

    def feature(self, name: str) -> pd.DataFrame:
        cached = self._features.get(name)
        if isinstance(cached, FeatureError):
            raise cached
        if cached is not None:
            return cached
        feat = get_feature(name)
        if feat is None:
            raise FeatureError(f"unknown feature {name!r} (known: {', '.join(f['name'] for f in list_features())})")
        if name in self._computing:
            raise FeatureError(f"feature {name!r} depends on itself: {' -> '.join(self._computing + [name])}")
        self._computing.append(name)
        try:
            result = as_event_frame(feat.fn(self))
        except FeatureError:
            raise
        except Exception as e:  # remembered so every rule using it reports the same cause fast
            interruptions.reraise(e)
            err = FeatureError(f"feature {name!r} failed: {type(e).__name__}: {e}")
            self._features[name] = err
            raise err from e
        finally:
            self._computing.pop()
        self._features[name] = result
        return result

    def table(self, source: str | None) -> pd.DataFrame:
        """The frame a selection reads: the events (None) or a feature."""
        return self.events if source is None else self.feature(source)


__all__ = ["feature", "list_features", "get_feature", "TraceContext", "FeatureError"]
