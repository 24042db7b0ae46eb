"""perf output (`perf script`, `perf trace`, `perf trace -s`) and bpftrace text into events,
checked against the files' own lines."""
import json
import re

from tests.corpus import corpus

_HEADER = re.compile(r"^\S")


def test_perf_script_samples_and_stacks(parse):
    path = corpus("cpu", "tokenizer_hotspot.perf-script.txt")
    lines = path.read_text().splitlines()
    headers = [i for i, l in enumerate(lines) if l and _HEADER.match(l) and not l.startswith("#")]
    result, df = parse(path)
    assert result.format == "perf_script" and len(df) == len(headers)
    assert result.meta["clock"]["domain"] == "monotonic"
    # the second sample, checked against the file's own lines
    i = headers[1]
    comm, pid, ts = re.match(r"^(\S+)\s+(\d+)\s+(\d+\.\d+):", lines[i]).groups()
    frames = []
    for l in lines[i + 1:]:
        if not l.startswith("\t"):
            break
        frames.append(re.sub(r"\+0x[0-9a-f]+$", "", l.split(None, 1)[1].rsplit(" (", 1)[0]))
    row = df[df["loc"] == f"line {i + 1}"].iloc[0]
    attrs = json.loads(row["attrs"])
    assert attrs["stack"] == frames and row["name"] == frames[0] and attrs["comm"] == comm
    assert row.pid == int(pid) and row.ts == round(float(ts) * 1e9)
    assert attrs["event"] == "cpu-clock:ppp" and row.value == 2004008 and row.unit == "ns"


def test_public_perf_variants(parse):
    for name in ("flamegraph_perf-funcab-pid-01.txt", "flamegraph_perf-iperf-stacks-pidtid-01.txt",
                 "flamegraph_perf-cycles-instructions-01.txt", "flamegraph_example-perf-stacks.txt.gz"):
        result, df = parse(corpus("public", "perf", name))
        assert result.format == "perf_script" and not result.error, name
    text = corpus("public", "perf", "flamegraph_perf-iperf-stacks-pidtid-01.txt").read_text()
    first = re.search(r"^iperf (\d+)/(\d+) \[(\d+)\]", text, re.M)
    _, df = parse(corpus("public", "perf", "flamegraph_perf-iperf-stacks-pidtid-01.txt"))
    assert (df.iloc[0].pid, df.iloc[0].tid) == (int(first.group(1)), int(first.group(2)))
    result, df = parse(corpus("public", "perf", "flamegraph_perf-funcab-pid-01.txt"))
    assert result.meta["clock"]["domain"] == "none"  # no timestamps printed


def test_perf_trace_futex_rows(parse):
    path = corpus("cpu", "tokenizer_threads.perf-trace.txt")
    text = path.read_text()
    # futex calls that completed on their own line, plus continuations with a duration
    direct = len(re.findall(r"^\s*[\d.]+ \(\s*[\d.]+ ms\): \S+/\d+ futex\(", text, re.M))
    continued = len(re.findall(r"^\s*[\d.]+ \(\s*[\d.]+ ms\): \S+/\d+\s+\.\.\. \[continued\]: futex\(", text, re.M))
    result, df = parse(path)
    sync = df[df.kind == "sync"]
    assert len(sync) == direct + continued and set(sync.name) == {"futex"}
    assert result.meta["clock"]["domain"] == "relative"


def test_perf_trace_summary(parse):
    path = corpus("cpu", "tokenizer_threads.perf-trace-summary.txt")
    text = path.read_text()
    result, df = parse(path)
    assert result.format == "perf_trace_summary"
    assert len(df) == len(re.findall(r"^\s+[a-z_0-9]+\s+\d+\s+\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+%",
                                     text, re.M))
    futex = df[(df.name == "futex") & (df.tid == 9420)].iloc[0]
    attrs = json.loads(futex["attrs"])
    assert (attrs["calls"], futex.value, attrs["max_ms"]) == (73, 696.209, 577.005)


def test_bpftrace_futex_waits_and_histograms(parse):
    path = corpus("cpu", "tokenizer_threads.bpftrace.txt")
    text = path.read_text()
    waits_us = [int(v) for v in re.findall(r"futex_wait_us=(\d+)", text)]
    result, df = parse(path)
    sync = df[df.kind == "sync"]
    assert len(sync) == len(waits_us)
    gil = sync[(sync.dur >= 4_900_000) & (sync.dur <= 5_400_000)]
    assert len(gil) == sum(4900 <= w <= 5400 for w in waits_us) and len(gil) > 1000
    hist = df[(df.kind == "sample") & (df.name == "futex_wait_us")].iloc[0]
    buckets = json.loads(hist["attrs"])["buckets"]
    bucket_4k = next(b for b in buckets if b["lo"] == 4096)
    assert bucket_4k["count"] == int(re.search(r"^\[4K, 8K\)\s+(\d+)", text, re.M).group(1))
    malloc = json.loads(df[df.name == "malloc_bytes"].iloc[0]["attrs"])["buckets"]
    assert max(malloc, key=lambda b: b["count"])["lo"] == 1024  # dominated by 1-2 KiB requests


def test_a_runtime_log_line_shaped_like_a_sample_header_is_not_perf_script():
    """HIP's runtime log (ROCm/ROCm#2153, ROCm 5): ':0:rocdevice.cpp :2672: 0696142325 us: 5999 : [tid:...]'
    reads as comm, pid, event 'us' and a tail starting with digits; perf's own inline samples put an
    instruction address (6-16 hex digits) and a symbol there."""
    from ingest.engine.parsers.perf.script import sniff

    rocm = (b":0:rocdevice.cpp :2672: 0696142325 us: 5999 : [tid:0x7f676e4c7640] Device::callbackQueue aborting "
            b"with error : HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond "
            b"the largest legal address. code: 0x29\nforrtl: error (76): Abort trap signal\n")
    assert not sniff(rocm, "run.log")
    inline = (b"swapper     0 [000] 5931.316423: cpu-clock: ffffffff8105f3c6 native_safe_halt ([kernel.kallsyms])\n"
              b"python3  4412 [001] 5931.316437: cpu-clock: 7f3a2b1c40d0 _PyEval_EvalFrameDefault (/usr/bin/python3.11)\n")
    assert sniff(inline, "perf.txt")
