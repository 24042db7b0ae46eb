"""The `submit` command's arguments. `tracedoc diagnose` builds this parser too, so the command
itself (the HTTP client, the renderers: cli.submit) is imported only when it runs."""
from __future__ import annotations

import os

from cli.output import FORMATS
from rules.engine.severity import SEVERITIES

DEFAULT_TIMEOUT_S = 300.0


def add_submit_parser(sub) -> None:
    s = sub.add_parser("submit", help="upload files to a tracedoc server and print its diagnosis")
    s.add_argument("paths", nargs="+", help="files and folders (a folder is sent as one tar.gz); one trace")
    s.add_argument("--server", default=os.environ.get("TRACEDOC_SERVER"),
                   help="server URL, e.g. https://tracedoc.example.com (default $TRACEDOC_SERVER)")
    s.add_argument("--token", default=os.environ.get("TRACEDOC_TOKEN"),
                   help="API token (default $TRACEDOC_TOKEN, which keeps it out of the process list)")
    s.add_argument("--labels", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                   help="labels, e.g. branch=main,ci=true (repeatable; a JSON object is accepted too)")
    s.add_argument("--name", default="", help="trace name shown in the web UI")
    s.add_argument("--team", default="", help="team slug, when the token's user is in several teams")
    s.add_argument("--timeout", type=float, default=None,
                   help=f"seconds to wait for the diagnosis before exiting 2 (default {DEFAULT_TIMEOUT_S:.0f})")
    s.add_argument("--wait", type=float, default=None,
                   help="seconds the server holds the upload's answer (at most 300; default: --timeout); "
                        "past it the report is polled for until --timeout. "
                        "0 uploads, prints the trace's URL and exits 0 without waiting")
    s.add_argument("--format", choices=FORMATS, default="text")
    s.add_argument("--also", action="append", default=[], metavar="FORMAT=PATH",
                   help="also write the report in FORMAT to PATH, e.g. sarif=tracedoc.sarif (repeatable): "
                        "one upload gives the gate, the code-scanning file and the PR summary")
    s.add_argument("--fail-on", choices=SEVERITIES, default="error",
                   help="exit 1 when a finding is at or above this severity (default: error)")
    s.set_defaults(func=_cmd_submit, default_timeout=DEFAULT_TIMEOUT_S)


def _cmd_submit(args) -> int:
    from cli.submit import cmd_submit  # see the module docstring
    return cmd_submit(args)
