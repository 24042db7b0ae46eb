"""Team rule texts the tests of several apps share, and where in a text the editor should
point (its `line L, col C`)."""

# a rule that fires on the cudagraph_abort trace's CUDA graph replays
GRAPH_LAUNCHES = """id: team.graph-launches
version: 1
title: CUDA graph replays seen
status: experimental
severity: info
owner: infra
root_cause: team.graph_replays
match:
  launches:
    kind: runtime
    name: cudaGraphLaunch
condition: launches
explain: "{count} graph replay(s)"
"""

# a rule that fires on the fragmented_decode trace's cudaMalloc calls
MALLOC_IN_DECODE = """id: team.malloc-in-decode
version: 1
title: cudaMalloc calls during decode
status: experimental
severity: warning
owner: infra
root_cause: team.malloc_in_decode
match:
  mallocs:
    kind: runtime
    name: cudaMalloc
condition: mallocs
explain: "{count} cudaMalloc call(s)"
"""

# two versions of MALLOC_IN_DECODE for the backtests
QUIET = MALLOC_IN_DECODE.replace("name: cudaMalloc", "name: cudaNoSuchCall")  # v1: fires on nothing
FIRING = MALLOC_IN_DECODE.replace("version: 1", "version: 2")  # v2: cudaMalloc, which the trace has


def where(text: str, needle: str) -> str:
    """`line L, col C` of the first `needle`, counted here (1-based) from the text."""
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return f"line {number}, col {line.index(needle) + 1}"
    raise AssertionError(needle)
