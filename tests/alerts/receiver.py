"""A real HTTP receiver for alert tests: http.server in a thread on a free local port. It
keeps every request (path, headers, body) and answers 500 to the first `failures` ones, or
a 307 redirect to `redirect` when set."""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self):
        return json.loads(self.body)


class Receiver:
    def __init__(self):
        self.requests: list[Received] = []
        self.failures = 0
        self.redirect = ""
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with outer._lock:
                    outer.requests.append(Received(self.path, dict(self.headers.items()), body))
                    failing = outer.failures > 0
                    outer.failures -= failing
                if outer.redirect:
                    self.send_response(307)
                    self.send_header("Location", outer.redirect)
                    self.end_headers()
                    return
                self.send_response(500 if failing else 202)
                self.end_headers()
                self.wfile.write(b'{"status": "boom"}' if failing else b'{"status": "ok"}')

            def log_message(self, *args):  # keep the test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def on(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]

    def __enter__(self) -> "Receiver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
