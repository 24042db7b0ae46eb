"""`tracedoc submit PATH...`: upload to a tracedoc server, wait for its diagnosis, print it.

Files go as they are; each folder goes as one tar.gz. All of them form one trace. The report
is rendered like `tracedoc diagnose` renders it, and the exit status means the same: 0 nothing
at or above --fail-on, 1 findings at or above it, 2 unusable input, and also 2 when the server
cannot be reached, refuses the token or the upload, or the diagnosis fails or does not finish
within --timeout. Every format names the trace's web page, so a CI log points to it.

Runs on the standard library alone (the `tracedoc-client` distribution, clients/python/):
nothing on this path imports Django, pandas, pyarrow or requests (tests/tracedoc/test_client_distribution.py
installs that distribution into a bare virtual environment and submits with it).
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

from cli.api_client import ApiClient, ApiError
from cli.output import EXIT_BAD_INPUT, EXIT_OK, FORMATS, print_report
from diagnosis.engine.render import RENDERERS, RenderOptions
from diagnosis.engine.results import Report

SERVER_MAX_WAIT_S = 300  # the server answers ?wait= for at most this long; longer waits poll
POLL_S = 2.0


class SubmitError(Exception):
    """Something the user must fix or know: printed, exit 2."""


def cmd_submit(args) -> int:
    # --wait is how long the server holds the upload's answer, never the overall timeout: past
    # it the client polls until --timeout (issue 32: `--wait 1` used to give up after 1 s)
    timeout = args.timeout if args.timeout is not None else args.default_timeout
    wait = min(timeout if args.wait is None else args.wait, timeout, SERVER_MAX_WAIT_S)
    try:
        if not args.server:
            raise SubmitError("no server: give --server or set TRACEDOC_SERVER")
        if not args.token:
            raise SubmitError("no token: give --token or set TRACEDOC_TOKEN")
        labels = parse_labels(args.labels)
        also = _also(args.also)
        client = ApiClient(args.server, args.token)
        deadline = time.monotonic() + timeout
        with contextlib.ExitStack() as stack:
            files = [_open_input(Path(p), stack) for p in args.paths]
            trace = client.upload(files, labels, wait=wait, name=args.name, team=args.team)
        if args.wait == 0:
            print(f"tracedoc: uploaded as trace {trace.get('id')}: {trace.get('web_url')}")
            return EXIT_OK
        report = _report(client, trace, deadline, timeout)
    except (SubmitError, ApiError) as e:
        print(f"tracedoc: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _write_also(Report.from_dict(report), also, args, trace.get("web_url"))


def _also(values: list[str]) -> list[tuple[str, Path]]:
    outputs = []
    for value in values:
        fmt, eq, path = value.partition("=")
        if not eq or fmt not in FORMATS or not path:
            raise SubmitError(f"--also: {value!r} is not FORMAT=PATH with FORMAT one of {', '.join(FORMATS)}")
        outputs.append((fmt, Path(path)))
    return outputs


def _write_also(report: Report, also: list[tuple[str, Path]], args, web_url: str | None) -> int:
    options = RenderOptions(fail_on=args.fail_on, web_url=web_url)
    for fmt, path in also:
        try:
            path.write_text(RENDERERS[fmt](report, options))
        except OSError as e:
            print(f"tracedoc: --also {fmt}={path}: {e.strerror or e}", file=sys.stderr)
            return EXIT_BAD_INPUT
    return print_report(report, args.format, args.fail_on, web_url=web_url)


def parse_labels(values: list[str]) -> dict[str, str] | None:
    """`key=value[,key=value]` (the web form's and the API's syntax), or a JSON object; repeatable."""
    labels: dict[str, str] = {}
    for raw in values:
        text = raw.strip()
        if text.startswith("{"):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as e:
                raise SubmitError(f"--labels: not valid JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(parsed, dict):
                raise SubmitError('--labels: expected key=value or a JSON object such as {"env": "ci"}')
            labels.update({str(k): str(v) for k, v in parsed.items()})
            continue
        for part in (p.strip() for p in text.split(",")):
            key, eq, value = part.partition("=")
            if not part:
                continue
            if not eq or not key.strip():
                raise SubmitError(f"--labels: {part!r} is not key=value")
            labels[key.strip()] = value.strip()
    return labels or None


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


def _report(client, trace: dict, deadline: float, timeout: float) -> dict:
    """The report of an uploaded trace, polling its state past the server's own wait."""
    while trace.get("state") not in ("done", "failed") and time.monotonic() < deadline:
        trace.update(client.trace(trace["id"]))
        if trace.get("state") not in ("done", "failed"):
            time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
    where = trace.get("web_url") or f"trace {trace.get('id')}"
    if trace.get("state") == "failed":
        raise SubmitError(f"the server could not diagnose the trace: {trace.get('error') or 'no reason given'} "
                          f"({where})")
    if trace.get("state") != "done":
        raise SubmitError(f"the trace is still {trace.get('state')} after {timeout:.0f} s; "
                          f"its report will be at {where} (or raise --timeout)")
    return trace.get("report") or client.report(trace["id"])
