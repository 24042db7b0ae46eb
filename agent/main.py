"""The `tracedoc-agent` command.

  run     capture continuously (NVML, logs, dumps) and ship a bundle every --ship-every
  wrap    run one command under capture; ship its bundle when it exits
  ship    ship what waits in the spool now (after an outage, or a wrap without --server)
  sample  write NVML samples as JSON lines to a file, no server involved
  ebpf    one eBPF capture window (bpftrace: CUDA calls, futex waits) into a file, no server involved
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

from agent import __version__
from agent.capture import Capture, base_labels, run_loop
from agent.dumps import DumpWatcher
from agent.ebpf_order import EbpfOrderSettings
from agent.ebpf import (
    EbpfOptions, render_program, resolve_libcudart, run_capture, start_ebpf_thread, unavailable_reason,
)
from agent.nvml_sampler import NvmlReader, NvmlUnavailable, Sampler, gpu_inventory, open_sampler
from agent.on_demand import OnDemand
from agent.placement import place_thread
from agent.spool import Spool
from agent.tailer import LogTailer

log = logging.getLogger("agent")

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_S = {"ms": 1e-3, "s": 1, "m": 60, "h": 3600, None: 1}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?)?\s*$", re.I)


def duration(text: str) -> float:
    """'60s', '5m', '1h', '250ms' or plain seconds."""
    m = _DURATION.match(text)
    if not m or float(m.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a positive duration such as 60s, 5m, 1h or 0.5")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def size(text: str) -> int:
    """'2GiB', '500M', or plain bytes."""
    m = _SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: a size such as 2GiB or 500M")
    power = "KMGT".index(m.group(2)[0].upper()) + 1 if m.group(2) else 0
    return int(float(m.group(1)) * 1024**power)


def label(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: labels are key=value")
    return key.strip(), value.strip()


def default_spool() -> str:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("TRACEDOC_SPOOL") or os.path.join(cache, "tracedoc-agent", "spool")


def read_token(args) -> str:
    if args.token_file:
        path = Path(args.token_file)
        try:
            if path.stat().st_mode & 0o077:
                log.warning("%s can be read by other users; chmod 600 it", path)
            return path.read_text().strip()
        except OSError as e:
            raise SystemExit(f"tracedoc-agent: cannot read the token file: {e}") from None
    return args.token or ""


# -- commands ----------------------------------------------------------------------------------


def _open(args):
    from agent.uploader import ApiClient, Shipper  # requests, ~40 ms of imports: `sample` and `ebpf` ship nothing
    spool = Spool(args.spool, args.spool_max)
    shipper = None
    if args.server:
        shipper = Shipper(spool, ApiClient(args.server, _token(args)), backoff_max=args.retry_max)
    return spool, shipper


def _token(args) -> str:
    token = read_token(args)
    if not token:
        raise SystemExit("tracedoc-agent: no token: give --token, --token-file or set TRACEDOC_TOKEN")
    return token


def _heartbeat(args, spool, shipper, host: str, setup=None):
    """A heartbeat factory for `run` and `wrap` (None without a server or with --no-heartbeat):
    its own HTTP session, so it never waits on an upload in flight."""
    if not args.server or not args.heartbeat:
        return None
    from agent.heartbeat import Heartbeat  # imports requests (through the uploader): only with a server
    from agent.uploader import ApiClient  # requests: only with a server
    client = ApiClient(args.server, _token(args))
    return lambda on_demand: Heartbeat(client, host, spool, shipper, args.heartbeat, on_demand,
                                       gpus=gpu_inventory, setup=setup)


def cmd_run(args) -> int:
    if not args.server:
        raise SystemExit("tracedoc-agent run: give --server (or set TRACEDOC_SERVER)")
    place_thread(args.nice, args.cpus)  # before any other thread starts: they inherit it
    spool, shipper = _open(args)
    labels = base_labels(dict(args.labels))
    capture = Capture(spool, open_sampler(args.interval, labels["host"], args.pcie, start=False),
                      LogTailer(args.logs, spool, args.from_start) if args.logs else None,
                      DumpWatcher(args.dumps, spool) if args.dumps else None)
    if not (capture.sampler or capture.tailer or capture.dumps):
        log.error("nothing to capture: NVML is unavailable and no --logs or --dumps were given")
        return EXIT_ERROR
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    shipping = threading.Thread(target=shipper.run, name="shipper", daemon=True)
    shipping.start()
    heartbeat = _heartbeat(args, spool, shipper, labels["host"])
    if heartbeat:
        capture_dir = args.capture_dir or str(spool.root / "capture")
        on_demand = OnDemand(Path(capture_dir), spool, labels, shipper.submit, args.capture_timeout,
                             ebpf=EbpfOrderSettings(libcudart=args.ebpf_libcudart))  # an `ebpf` order probes it too
        heartbeat = heartbeat(on_demand).start()
        log.info("heartbeat every %.0f s; on-demand captures go through %s", args.heartbeat, capture_dir)
    if args.ebpf:
        start_ebpf_thread(_ebpf_options(args), spool, stop)
    log.info("capturing into %s; shipping to %s every %.0f s", spool.root, args.server, args.ship_every)

    def close_window(start: float, end: float, chunks) -> None:
        shipper.submit(lambda: capture.bundle(labels, start, end, chunks=chunks))

    window_start = run_loop(capture, stop, args.interval, min(args.collect_every, args.ship_every),
                            args.ship_every, close_window)
    log.info("stopping: bundling the last window and shipping for up to %.0f s", args.ship_timeout)
    if heartbeat:
        heartbeat.stop()
    shipper.close()  # the windows already closed are bundled first, in order
    shipping.join()
    capture.finish(labels, window_start, time.time())
    if not shipper.ship_until(time.monotonic() + args.ship_timeout):
        log.warning("%d bundle(s) stay in %s for the next run", len(spool.bundles()), spool.outbox)
    return EXIT_OK


def cmd_wrap(args) -> int:
    from agent.wrap import wrap  # imports requests (heartbeat, shipper): only for `wrap`

    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        raise SystemExit("tracedoc-agent wrap: give the command after --, e.g. wrap -- python train.py")
    spool, shipper = _open(args)
    labels = base_labels(dict(args.labels))
    sampler = open_sampler(args.interval, labels["host"], args.pcie,  # placed in its own thread only:
                           setup=lambda: place_thread(args.nice, args.cpus))  # the command keeps its priority
    return wrap(cmd, spool, labels, sampler, shipper, args.ship_timeout,
                log_globs=args.logs, dump_dirs=args.dumps, logs_from_start=args.from_start,
                heartbeat=_heartbeat(args, spool, shipper, labels["host"],
                                     setup=lambda: place_thread(args.nice, args.cpus)),
                capture_timeout=args.capture_timeout)


def cmd_ship(args) -> int:
    if not args.server:
        raise SystemExit("tracedoc-agent ship: give --server (or set TRACEDOC_SERVER)")
    spool, shipper = _open(args)
    waiting = len(spool.bundles())
    if shipper.ship_until(time.monotonic() + args.ship_timeout):
        print(f"tracedoc-agent: shipped {waiting} bundle(s)", file=sys.stderr)
        return EXIT_OK
    print(f"tracedoc-agent: {len(spool.bundles())} bundle(s) not shipped; they stay in {spool.outbox}",
          file=sys.stderr)
    return EXIT_ERROR


def cmd_sample(args) -> int:
    place_thread(args.nice, args.cpus)
    try:
        sampler = Sampler(NvmlReader(pcie=args.pcie), args.interval)
    except NvmlUnavailable as e:
        print(f"tracedoc-agent: {e}", file=sys.stderr)
        return EXIT_ERROR
    out = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")
    sampler.start()
    deadline = time.monotonic() + args.duration
    try:
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(1.0, left))
            out.write(sampler.drain())
            out.flush()
    except KeyboardInterrupt:
        pass
    sampler.stop()
    out.write(sampler.drain())
    out.flush()
    print(f"tracedoc-agent: {sampler.samples} samples of {len(sampler.reader.devices())} GPU(s)", file=sys.stderr)
    return EXIT_OK


def _ebpf_options(args):
    return EbpfOptions(window_s=args.ebpf, every_s=getattr(args, "ebpf_every", 0.0) or 0.0,
                       libcudart=args.ebpf_libcudart, pids=tuple(args.ebpf_pid), cuda=not args.ebpf_futex_only,
                       max_bytes=args.ebpf_max, min_us=args.ebpf_min_us, launches=args.ebpf_launches)


def cmd_ebpf(args) -> int:
    """One capture window into a file, no server: to see what `run --ebpf` would ship."""
    opts = _ebpf_options(args)
    if args.print_program:
        libcudart = resolve_libcudart(opts.libcudart, opts.pids) if opts.cuda else None
        if opts.cuda and libcudart is None:
            print("tracedoc-agent: eBPF capture unavailable: libcudart not found: give --ebpf-libcudart PATH",
                  file=sys.stderr)
            return EXIT_ERROR
        print(render_program(opts.window_s, libcudart, opts.pids, opts.min_us, opts.launches), end="")
        return EXIT_OK
    if (reason := unavailable_reason(opts.cuda, opts.libcudart, opts.pids)) is not None:
        print(f"tracedoc-agent: eBPF capture unavailable: {reason}", file=sys.stderr)
        return EXIT_ERROR
    place_thread(args.nice, args.cpus)
    libcudart = resolve_libcudart(opts.libcudart, opts.pids) if opts.cuda else None
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    result = run_capture(render_program(opts.window_s, libcudart, opts.pids, opts.min_us, opts.launches),
                         Path(args.output),
                         opts.window_s, opts.max_bytes, stop=stop)
    notes = "; ".join(result.notes)
    print(f"tracedoc-agent: {result.events} events in {result.duration_s:.1f} s into {args.output}"
          f" (wall-clock minus monotonic: {result.clock_offset_ns} ns){'; ' + notes if notes else ''}",
          file=sys.stderr)
    if result.events == 0 and result.error:
        print(f"tracedoc-agent: bpftrace failed: {result.error}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


# -- arguments ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """Every command and option of the agent (long on purpose: one declaration per option, read
    as the command's reference)."""
    p = argparse.ArgumentParser(prog="tracedoc-agent", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"tracedoc-agent {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log what is shipped and when")
    sub = p.add_subparsers(dest="cmd", required=True)

    def server_args(s, ship_timeout: float):
        s.add_argument("--server", default=os.environ.get("TRACEDOC_SERVER"),
                       help="tracedoc server URL (default $TRACEDOC_SERVER)")
        s.add_argument("--token", default=os.environ.get("TRACEDOC_TOKEN"),
                       help="API token (default $TRACEDOC_TOKEN; prefer it or --token-file: "
                            "command lines are visible to other users)")
        s.add_argument("--token-file", help="read the API token from this file")
        s.add_argument("--spool", default=default_spool(), help="spool folder (default %(default)s)")
        s.add_argument("--spool-max", type=size, default="2GiB",
                       help="bound of the spool; the oldest files go first (default 2GiB)")
        s.add_argument("--ship-timeout", type=duration, default=ship_timeout,
                       help="how long to keep retrying at exit (default %(default)s s)")
        s.add_argument("--retry-max", type=duration, default=300.0,
                       help="longest wait between tries to ship while the server is unreachable (default 300 s)")

    def placement_args(s):
        s.add_argument("--pcie", action="store_true",
                       help="also record PCIe traffic (from the driver's byte counters, once a second; where "
                            "it has none, from a 20 ms driver query made every 10 s)")
        s.add_argument("--nice", type=int, default=10,
                       help="run the agent at this nice value and the lowest best-effort I/O priority "
                            "(default 10; 0 leaves both alone)")
        s.add_argument("--cpus", default="auto",
                       help="pin the agent: 'auto' (the highest-numbered allowed CPU, on hosts of 4 CPUs "
                            "or more), 'none', or a list such as 31 or 30-31 (default auto)")

    def capture_args(s):
        s.add_argument("--interval", type=duration, default=0.1, help="NVML sample interval (default 0.1 s)")
        placement_args(s)
        s.add_argument("--logs", nargs="+", default=[], metavar="GLOB", help="log files to follow")
        s.add_argument("--from-start", action="store_true",
                       help="ship what the log files already hold too (default: only what is appended)")
        s.add_argument("--dumps", nargs="+", default=[], metavar="DIR",
                       help="folders where flight-recorder dumps (nccl_trace_rank_*) and memory "
                            "snapshots (*.pickle) appear")
        s.add_argument("--labels", nargs="+", type=label, default=[], metavar="KEY=VALUE",
                       help="labels added to every bundle (host, agent version and window are added)")
        s.add_argument("--heartbeat", type=duration, default=30.0,
                       help="tell the server this host is alive, and take its capture requests, this often "
                            "(default 30 s)")
        s.add_argument("--no-heartbeat", dest="heartbeat", action="store_const", const=0.0,
                       help="no heartbeat, hence no on-demand captures")
        s.add_argument("--capture-timeout", type=duration, default=600.0,
                       help="how long an on-demand capture may take before it is reported failed (default 600 s)")

    def ebpf_args(s, window_flag: bool):
        if window_flag:
            s.add_argument("--ebpf", type=duration, metavar="WINDOW",
                           help="an eBPF capture window of this length with bpftrace (CUDA synchronize "
                                "calls, futex waits), at the start; off by default")
            s.add_argument("--ebpf-every", type=duration, metavar="PERIOD",
                           help="with --ebpf: a window every PERIOD (default: one only)")
        s.add_argument("--ebpf-libcudart", metavar="PATH",
                       help="the libcudart.so to probe (default: the one the --ebpf-pid processes map, else "
                            "the usual places)")
        s.add_argument("--ebpf-pid", type=int, nargs="+", default=[], metavar="PID",
                       help="only these processes (default: every process calling the CUDA runtime)")
        s.add_argument("--ebpf-launches", action="store_true",
                       help="also probe cudaLaunchKernel (each probed call costs microseconds: a launch-bound "
                            "loop slows down while the window lasts)")
        s.add_argument("--ebpf-futex-only", action="store_true",
                       help="futex waits of --ebpf-pid only, no CUDA probes (no libcudart needed)")
        s.add_argument("--ebpf-max", type=size, default="64MiB", help="output bound per window (default 64MiB)")
        s.add_argument("--ebpf-min-us", type=int, default=50,
                       help="events at least this long are listed one by one; all are in the histograms "
                            "(default 50 us)")

    r = sub.add_parser("run", help="capture continuously and ship every --ship-every")
    server_args(r, 30.0)
    capture_args(r)
    r.add_argument("--ship-every", type=duration, default=60.0, help="bundle window (default 60s)")
    r.add_argument("--collect-every", type=duration, default=5.0, help=argparse.SUPPRESS)
    r.add_argument("--capture-dir", default=os.environ.get("TRACEDOC_CAPTURE_DIR"),
                   help="the folder through which programs (agent.hook) take on-demand captures "
                        "(default $TRACEDOC_CAPTURE_DIR, else capture/ in the spool)")
    ebpf_args(r, window_flag=True)
    r.set_defaults(func=cmd_run)

    w = sub.add_parser("wrap", help="run a command under capture: wrap [options] -- CMD ...")
    server_args(w, 120.0)
    capture_args(w)
    w.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    w.set_defaults(func=cmd_wrap)

    s = sub.add_parser("ship", help="ship the bundles waiting in the spool")
    server_args(s, 60.0)
    s.set_defaults(func=cmd_ship)

    m = sub.add_parser("sample", help="write NVML samples as JSON lines (no server)")
    m.add_argument("--interval", type=duration, default=0.1)
    m.add_argument("--duration", type=duration, default=60.0)
    m.add_argument("--output", default="-", help="file to write (default stdout)")
    placement_args(m)
    m.set_defaults(func=cmd_sample)

    e = sub.add_parser("ebpf", help="one eBPF capture window into a file (no server)")
    e.add_argument("--duration", dest="ebpf", type=duration, default=10.0, help="the window (default 10 s)")
    e.add_argument("--output", default="host_stalls.bpftrace.txt", help="file to write (default %(default)s)")
    e.add_argument("--print-program", action="store_true", help="print the bpftrace program and exit")
    ebpf_args(e, window_flag=False)
    placement_args(e)
    e.set_defaults(func=cmd_ebpf)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("tracedoc-agent: %(levelname)s: %(message)s"))
    log.handlers[:] = [handler]
    log.propagate = False
    quiet = not args.verbose and args.cmd != "run"  # a wrapped command's terminal stays uncluttered
    log.setLevel(logging.WARNING if quiet else logging.INFO)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
