"""Each artifact's first and last time in the report (`trace.artifacts[].start_ts/end_ts`): the
same figures whether a trace has a few artifacts (masked reductions) or many (one pass)."""
import numpy as np
import pandas as pd
import pytest

from diagnosis.engine import pipeline


def frame(artifacts: int, rows: int, seed: int, categorical: bool) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(-5, 10**9, rows))  # rows at or before 0 carry no time
    names = np.array([f"rank{i}.json" for i in range(artifacts)], dtype=object)[rng.integers(0, artifacts, rows)]
    artifact = pd.Series(names).astype("category") if categorical else pd.Series(names, dtype=object)
    return pd.DataFrame({"ts": ts, "dur": rng.integers(0, 10**6, rows), "artifact": artifact})


def plain(events: pd.DataFrame) -> dict:
    timed = events[events["ts"] > 0]
    end = timed["ts"] + timed["dur"]
    return {str(a): (int(g["ts"].min()), int(end[g.index].max()))
            for a, g in timed.groupby(timed["artifact"].astype(str))}


@pytest.mark.parametrize("artifacts", [1, 3, pipeline.FEW_ARTIFACTS, pipeline.FEW_ARTIFACTS + 5])
@pytest.mark.parametrize("categorical", [True, False])
def test_first_and_last_time_per_artifact(artifacts, categorical):
    events = frame(artifacts, 5_000, seed=artifacts, categorical=categorical)
    assert pipeline._extents(events) == plain(events)


def test_an_artifact_without_timed_rows_has_no_extent():
    events = pd.DataFrame({"ts": [0, 5, 7], "dur": [1, 1, 3], "artifact": pd.Categorical(["a", "b", "b"])})
    assert pipeline._extents(events) == {"b": (5, 10)}
    assert pipeline._extents(events.assign(ts=0)) == {}
