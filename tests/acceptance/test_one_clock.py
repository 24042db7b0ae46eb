"""Each h200 scenario bundle ends on one clock: independent artifacts agree in time."""
import json

import pytest

from diagnosis.engine import scenarios
from tests.corpus import CORPUS

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not found")
MS = 10**6


def test_oom_seen_by_profiler_and_snapshot_at_the_same_moment():
    ev = scenarios.events(CORPUS / "h200" / "oom_fragmentation")
    oom = ev[ev["kind"] == "oom"]
    kineto = oom[oom["artifact"] == "kineto_trace.json.gz"]["ts"].sort_values().to_numpy()
    snapshot = oom[oom["artifact"] == "memory_snapshot.pickle"]["ts"].sort_values().to_numpy()
    assert len(kineto) == len(snapshot) == 2
    # two clocks recorded by two different subsystems agree within a millisecond
    assert (abs(kineto - snapshot) < MS).all()
    allocs = ev[ev["kind"] == "alloc"]
    assert allocs["ts"].min() < kineto.min() and kineto.max() <= ev[ev["source"] == "memory_snapshot"]["ts"].max() + MS


def test_watchdog_fires_after_the_last_completed_collective():
    ev = scenarios.events(CORPUS / "h200" / "nccl_timeout")
    fr = ev[(ev["source"] == "flight_recorder") & (ev["kind"] == "collective")]
    states = fr["attrs"].map(lambda a: json.loads(a)["state"])
    last_completed = (fr["ts"] + fr["dur"])[states == "completed"].max()
    watchdog = ev[(ev["kind"] == "error") & (ev["name"] == "NCCLWatchdogTimeout")]["ts"].min()
    assert watchdog > last_completed
    # the stuck collective was enqueued (flight recorder) seconds before the watchdog gave up (log)
    enqueued = fr[states != "completed"]["ts"].min()
    assert 0 < watchdog - enqueued < 60_000 * MS
    # the profiler's warm-up collectives sit inside the flight recorder's window
    kineto = ev[(ev["source"] == "kineto") & (ev["kind"] == "collective")]
    assert fr["ts"].min() - 1000 * MS <= kineto["ts"].min() <= fr["ts"].max()
