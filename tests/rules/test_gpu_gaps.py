"""Host time inside GPU idle gaps: the interval join gives what a loop over the gaps gives."""
import numpy as np
import pandas as pd

from rules.features import TraceContext, as_event_frame
from rules.features.gpu import _host_time_in


def test_host_time_in_gaps_matches_a_loop_over_gaps():
    rng = np.random.default_rng(3)
    n = 4000
    ts = rng.integers(0, 1_000_000_000, n)
    dur = rng.integers(0, 60_000_000, n)            # some ops span several gaps, some none
    kinds = rng.choice(["cpu_op", "runtime", "kernel", "sync"], n)
    names = rng.choice(["a", "b", "c", "d"], n)
    ev = as_event_frame(pd.DataFrame({"ts": ts, "dur": dur, "kind": kinds, "name": names}))
    starts = np.arange(0, 1_000_000_000, 40_000_000)
    bounds = np.column_stack([starts + 5_000_000, starts + 5_000_000 + rng.integers(1_000_000, 30_000_000, len(starts))])
    want: dict[str, int] = {}
    host = np.isin(kinds, ["cpu_op", "runtime", "annotation", "sync"]) & (dur > 0)
    for lo, hi in bounds:
        inside = host & (ts < hi) & (ts + dur > lo)
        for name, s, e in zip(names[inside], ts[inside], (ts + dur)[inside]):
            want[name] = want.get(name, 0) + int(min(e, hi) - max(s, lo))
    assert _host_time_in(TraceContext(ev), bounds) == want
