"""`tracedoc-agent wrap -- CMD ...`: run a command under capture and ship what it left.

The command runs with the NCCL flight recorder on and dumping into the spool, NCCL's own
logging at INFO (each only where the environment does not already say otherwise). Its
stdout and stderr still reach the terminal and are also kept as one log. NVML is sampled
while it runs. When it exits, the log, the samples and any dumps become one bundle, labelled
with the exit code (and the signal that ended it, if one did), and are shipped. The wrapper
exits with the command's exit code.

With a heartbeat, the agent also takes on-demand captures for the command: its environment
names a capture folder (TRACEDOC_CAPTURE_DIR) that the program's hook (agent.hook) polls, and
each result ships as a trace of its own while the command runs.
"""
from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Mapping

from agent.capture import Capture
from agent.dumps import DUMP_PATTERNS, DumpWatcher
from agent.heartbeat import Heartbeat
from agent.hook import ENV_VAR as CAPTURE_DIR_VAR
from agent.on_demand import DEFAULT_TIMEOUT_S as DEFAULT_CAPTURE_TIMEOUT_S
from agent.on_demand import OnDemand
from agent.nvml_sampler import Sampler
from agent.spool import Spool
from agent.tailer import LogTailer
from agent.uploader import Shipper

log = logging.getLogger(__name__)

ENV_DEFAULTS = {
    "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",  # flight recorder: entries kept per process group
    "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",       # dump the recorder when the watchdog times out
    "NCCL_DEBUG": "INFO",
}
# The flight recorder's dump path prefix (the rank is appended): current name, then the older one.
DUMP_PREFIX_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
COLLECT_EVERY_S = 10.0
LOG_HEAD_BYTES = 256 << 20
LOG_TAIL_BYTES = 64 << 20


def capture_env(base: Mapping[str, str], dump_dir: Path, capture_dir: Path | None = None) -> tuple[dict[str, str], Path]:
    """The command's environment, and the dump path prefix the flight recorder will use."""
    env = dict(base)
    for key, value in ENV_DEFAULTS.items():
        env.setdefault(key, value)
    if capture_dir is not None:
        env.setdefault(CAPTURE_DIR_VAR, str(capture_dir))
    prefix = next((env[v] for v in DUMP_PREFIX_VARS if env.get(v)), str(dump_dir / "nccl_trace_rank_"))
    for var in DUMP_PREFIX_VARS:
        env[var] = prefix
    return env, Path(prefix)


class BoundedLog:
    """The command's output as a file, bounded: the first `head` bytes, then, when more came,
    a line saying how much was left out, then the last `tail` bytes (where a crash is)."""

    def __init__(self, path: Path, head: int = LOG_HEAD_BYTES, tail: int = LOG_TAIL_BYTES):
        self.path, self.head_left, self.tail_max = path, head, tail
        self.file = open(path, "wb")
        self.tail: deque[bytes] = deque()
        self.tail_bytes = self.omitted = 0
        self.lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self.lock:
            if self.head_left > 0:
                self.file.write(data[:self.head_left])
                data, self.head_left = data[self.head_left:], self.head_left - len(data)
            if data:
                self.tail.append(data)
                self.tail_bytes += len(data)
                while self.tail_bytes - len(self.tail[0]) >= self.tail_max:
                    self.tail_bytes -= len(dropped := self.tail.popleft())
                    self.omitted += len(dropped)

    def close(self) -> None:
        with self.lock:
            if self.omitted:
                self.file.write(f"\n[tracedoc-agent: {self.omitted:,} bytes of output left out here]\n".encode())
            self.file.writelines(self.tail)
            self.file.close()


MAX_PARTIAL_LINE = 1 << 16


def _tee(pipe: BinaryIO, terminal: BinaryIO, out: BoundedLog) -> None:
    """Copy one stream to the terminal as it comes and to the shared log a line at a time,
    so stdout and stderr interleave by whole lines, never inside one. The pipe is closed
    through its file object: closing its bare descriptor left the object to close that number
    again later, by then another file's (the shipper's socket: `OSError: [Errno 9]` at exit)."""
    partial = b""
    while data := os.read(pipe.fileno(), 1 << 16):
        try:
            terminal.write(data)
            terminal.flush()
        except (OSError, ValueError):
            pass  # the terminal went away: keep logging
        partial += data
        cut = partial.rfind(b"\n") + 1
        if cut == 0 and len(partial) > MAX_PARTIAL_LINE:  # no newline in sight: don't hold it forever
            cut = len(partial)
        if cut:
            out.write(partial[:cut])
            partial = partial[cut:]
    if partial:
        out.write(partial)
    pipe.close()


def wrap(cmd: list[str], spool: Spool, labels: dict[str, str], sampler: Sampler | None = None,
         shipper: Shipper | None = None, ship_timeout: float = 120.0, log_globs: Iterable[str] = (),
         dump_dirs: Iterable[str] = (), logs_from_start: bool = False,
         stdout: BinaryIO | None = None, stderr: BinaryIO | None = None,
         heartbeat: Callable[[OnDemand], Heartbeat] | None = None,
         capture_timeout: float = DEFAULT_CAPTURE_TIMEOUT_S) -> int:
    """Run `cmd` under capture; returns its exit code (128+N when killed by signal N).
    `heartbeat(on_demand)` makes the heartbeat that runs while the command does."""
    work = spool.root / "wrap" / f"{time.time_ns()}-{os.getpid()}"
    work.mkdir(parents=True)
    env, prefix = capture_env(os.environ, work, work / "capture" if heartbeat else None)
    services = (_Services(spool, labels, shipper, Path(env[CAPTURE_DIR_VAR]), heartbeat, capture_timeout)
                if heartbeat else None)
    dumps = DumpWatcher([prefix.parent, *dump_dirs], spool, patterns=(prefix.name + "*", *DUMP_PATTERNS))
    capture = Capture(spool, sampler, LogTailer(log_globs, spool, logs_from_start) if log_globs else None, dumps)
    output = BoundedLog(work / "output.log")
    started = time.time()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    except OSError as e:
        log.error("cannot run %s: %s", cmd[0], e)
        output.close()
        shutil.rmtree(work, ignore_errors=True)
        if sampler:
            sampler.stop()
        return 127
    if services:
        services.start()
    tees = [threading.Thread(target=_tee, args=(pipe, term, output), daemon=True)
            for pipe, term in ((proc.stdout, stdout or sys.stdout.buffer), (proc.stderr, stderr or sys.stderr.buffer))]
    for t in tees:
        t.start()
    with _forwarding_signals(proc):
        while True:
            try:
                proc.wait(timeout=COLLECT_EVERY_S)
                break
            except subprocess.TimeoutExpired:
                capture.collect()  # keeps the sampler's memory bounded on long runs
    for t in tees:
        t.join()
    output.close()
    if services:
        services.stop()
    rc = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    spool.add_file(f"logs/{Path(cmd[0]).name}-{proc.pid}.log", output.path)
    command = " ".join(shlex.join(cmd).split())  # one line that a shell runs again, for the label
    outcome = {"capture": "wrap", "command": command[:200], "exit_code": str(rc), "failed": "true" if rc else "false"}
    if proc.returncode < 0:
        outcome["signal"] = _signal_name(-proc.returncode)
    bundle = capture.finish({**labels, **outcome}, started, time.time(),
                            name=f"{labels.get('host', '')}: {command_title(cmd)} (exit {rc})")
    shutil.rmtree(work, ignore_errors=True)
    if rc:
        log.warning("%s exited with %d; flagged in the bundle's labels", cmd[0], rc)
    _ship(bundle, spool, shipper, ship_timeout)
    return rc


TITLE_CHARS = 80


def command_title(cmd: list[str], limit: int = TITLE_CHARS) -> str:
    """The command as a person reads it, for a trace's name: one line, an argument with spaces
    in the quotes it does not contain (shlex's `'"'"'` escapes are for shells, not titles),
    cut at `limit` characters with an ellipsis."""
    words = []
    for arg in cmd:
        arg = " ".join(arg.split())
        if arg and not any(c in arg for c in " \t'\"$`|&;<>()*?[]#~"):
            words.append(arg)
        elif '"' not in arg:
            words.append(f'"{arg}"')
        elif "'" not in arg:
            words.append(f"'{arg}'")
        else:
            words.append(arg)  # both quotes inside: shown as it is
    title = " ".join(words)
    return title if len(title) <= limit else title[:limit - 1].rstrip() + "…"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class _Services:
    """What runs beside the command when the agent heartbeats: the heartbeat (which takes
    capture requests into the command's capture folder) and the shipping thread (which ships
    each capture's result as it comes, not at the end)."""

    def __init__(self, spool: Spool, labels: dict[str, str], shipper: Shipper | None, capture_dir: Path,
                 heartbeat: Callable[[OnDemand], Heartbeat], capture_timeout: float):
        self.shipper = shipper
        deliver = shipper.submit if shipper else (lambda job: job())  # no server: results wait in the spool
        self.on_demand = OnDemand(capture_dir, spool, labels, deliver, capture_timeout)
        self.heartbeat = heartbeat(self.on_demand)
        self.shipping = threading.Thread(target=shipper.run, name="shipper", daemon=True) if shipper else None

    def start(self) -> None:
        if self.shipping:
            self.shipping.start()
        self.heartbeat.start()

    def stop(self) -> None:
        self.heartbeat.stop()
        self.on_demand.poll()  # a result written as the command ended
        if self.shipping:
            self.shipper.close()
            self.shipping.join()


def _ship(bundle, spool: Spool, shipper: Shipper | None, timeout: float) -> None:
    if bundle is None:
        return
    if shipper is None:
        log.warning("no --server given: the bundle stays in the spool: %s", bundle.path)
        return
    if shipper.ship_until(time.monotonic() + timeout):
        answer = shipper.shipped[-1] if shipper.shipped else {}
        print(f"tracedoc-agent: shipped as trace {answer.get('id', '?')} {answer.get('web_url', '')}".rstrip(),
              file=sys.stderr)
    else:
        log.warning("could not ship within %.0f s; %d bundle(s) stay in %s and go with the next "
                    "`tracedoc-agent run` or `tracedoc-agent ship`", timeout, len(spool.bundles()), spool.outbox)


class _forwarding_signals:
    """SIGTERM and SIGHUP sent to the wrapper go to the command; SIGINT (Ctrl-C) already
    reaches the command from the terminal, so the wrapper itself ignores it and lets the
    command decide."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.saved = proc, {}

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            return self  # signals can only be handled in the main thread
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self.saved[sig] = signal.signal(sig, lambda signum, _frame: self.proc.send_signal(signum))
        self.saved[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
        return self

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
