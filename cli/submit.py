"""`tracedoc submit PATH...`: upload to a tracedoc server, wait for its diagnosis, print it.

Files go as they are; each folder goes as one tar.gz. All of them form one trace. The report
is rendered like `tracedoc diagnose` renders it, and the exit status means the same: 0 nothing
at or above --fail-on, 1 findings at or above it, 2 unusable input, and also 2 when the server
cannot be reached, refuses the token or the upload, or the diagnosis fails or does not finish
within --wait.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

from cli.output import EXIT_BAD_INPUT, print_report
SERVER_MAX_WAIT_S = 300  # the server answers ?wait= for at most this long; longer waits poll
POLL_S = 2.0


def add_submit_parser(sub) -> None:
    s = sub.add_parser("submit", help="upload files to a tracedoc server and print its diagnosis")
    s.add_argument("paths", nargs="+", help="files and folders (a folder is sent as one tar.gz); one trace")
    s.add_argument("--server", default=os.environ.get("TRACEDOC_SERVER"),
                   help="server URL, e.g. https://tracedoc.example.com (default $TRACEDOC_SERVER)")
    s.add_argument("--token", default=os.environ.get("TRACEDOC_TOKEN"),
                   help="API token (default $TRACEDOC_TOKEN, which keeps it out of the process list)")
    s.add_argument("--labels", help='labels as a JSON object, e.g. \'{"branch": "main", "ci": "true"}\'')
    s.add_argument("--name", default="", help="trace name shown in the web UI")
    s.add_argument("--team", default="", help="team slug, when the token's user is in several teams")
    s.add_argument("--wait", type=float, default=300.0, help="seconds to wait for the diagnosis (default 300)")
    s.add_argument("--format", choices=["text", "json", "junit", "sarif"], default="text")
    s.add_argument("--fail-on", choices=["info", "warning", "error", "critical"], default="error",
                   help="exit 1 when a finding is at or above this severity (default: error)")
    s.set_defaults(func=cmd_submit)


class SubmitError(Exception):
    """Something the user must fix or know: printed, exit 2."""


def cmd_submit(args) -> int:
    from agent.uploader import ApiClient, ApiError

    try:
        if not args.server:
            raise SubmitError("no server: give --server or set TRACEDOC_SERVER")
        if not args.token:
            raise SubmitError("no token: give --token or set TRACEDOC_TOKEN")
        labels = _labels(args.labels)
        client = ApiClient(args.server, args.token)
        deadline = time.monotonic() + args.wait
        with contextlib.ExitStack() as stack:
            files = [_open_input(Path(p), stack) for p in args.paths]
            trace = client.upload(files, labels, wait=min(args.wait, SERVER_MAX_WAIT_S), name=args.name,
                                  team=args.team)
        report = _report(client, trace, deadline, args.wait)
    except (SubmitError, ApiError) as e:
        print(f"tracedoc: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return print_report(report, args.format, args.fail_on)


def _labels(raw: str | None) -> dict | None:
    if not raw:
        return None
    try:
        labels = json.loads(raw)
    except json.JSONDecodeError as e:
        raise SubmitError(f"--labels: not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(labels, dict):
        raise SubmitError('--labels: expected a JSON object such as {"env": "ci"}')
    return labels


def _open_input(path: Path, stack: contextlib.ExitStack) -> tuple[str, BinaryIO]:
    if path.is_dir():
        return f"{path.resolve().name}.tar.gz", stack.enter_context(folder_as_tar_gz(path))
    try:
        return path.name, stack.enter_context(open(path, "rb"))
    except OSError as e:
        raise SubmitError(f"{path}: {e.strerror or e}") from None


def folder_as_tar_gz(folder: Path) -> BinaryIO:
    """The folder's regular files (hidden ones skipped, as the server skips them) as a
    temporary tar.gz, positioned at its start; removed when closed."""
    out = tempfile.TemporaryFile(suffix=".tar.gz")
    with tarfile.open(fileobj=out, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for root, dirs, names in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(n for n in names if not n.startswith(".")):
                path = Path(root, name)
                if not path.is_file():
                    continue  # sockets, FIFOs, dangling links
                with open(path, "rb") as f:
                    tar.addfile(tar.gettarinfo(arcname=path.relative_to(folder).as_posix(), fileobj=f), f)
    out.seek(0)
    return out


def _report(client, trace: dict, deadline: float, wait: float) -> dict:
    """The report of an uploaded trace, polling its state past the server's own wait."""
    while trace.get("state") not in ("done", "failed") and time.monotonic() < deadline:
        trace = client.trace(trace["id"])
        if trace.get("state") not in ("done", "failed"):
            time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
    where = trace.get("web_url") or f"trace {trace.get('id')}"
    if trace.get("state") == "failed":
        raise SubmitError(f"the server could not diagnose the trace: {trace.get('error') or 'no reason given'} "
                          f"({where})")
    if trace.get("state") != "done":
        raise SubmitError(f"the trace is still {trace.get('state')} after {wait:.0f} s; "
                          f"its report will be at {where} (or raise --wait)")
    return trace.get("report") or client.report(trace["id"])


