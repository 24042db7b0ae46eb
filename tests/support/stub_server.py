"""A real HTTP server on localhost, run in a thread, that answers from a script of responses
and records what it received (multipart uploads decoded). Client tests talk to it over TCP."""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable
from urllib.parse import parse_qs, urlsplit

import pytest


@dataclass
class Received:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    at: float
    fields: dict[str, str] = field(default_factory=dict)       # multipart text fields
    files: list[tuple[str, bytes]] = field(default_factory=list)  # multipart files: (filename, content)


def decode_multipart(content_type: str, body: bytes) -> tuple[dict[str, str], list[tuple[str, bytes]]]:
    msg = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    fields, files = {}, []
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if part.get_filename() is not None:
            files.append((part.get_filename(), payload))
        else:
            fields[name] = payload.decode()
    return fields, files


class StubServer:
    """`respond(received) -> (status, json-able body)` decides each answer."""

    def __init__(self, respond: Callable[[Received], tuple[int, object]], keep_alive: bool = False):
        self.respond, self.received = respond, []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                url = urlsplit(self.path)
                rec = Received(self.command, url.path, parse_qs(url.query), dict(self.headers), body, time.monotonic())
                if self.headers.get_content_type() == "multipart/form-data":
                    rec.fields, rec.files = decode_multipart(self.headers["Content-Type"], body)
                stub.received.append(rec)
                status, answer = stub.respond(rec)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _handle
            # keep-alive (as Django's and gunicorn's servers answer): clients keep the socket pooled
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def log_message(self, *args):  # keep test output quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def uploads(self) -> list[Received]:
        """The trace uploads received (not the heartbeats)."""
        return [r for r in self.received if r.method == "POST" and r.path == "/api/v1/traces/"]

    @property
    def heartbeats(self) -> list[Received]:
        return [r for r in self.received if r.path == "/api/v1/hosts/heartbeat/"]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stub_server():
    """Call with a respond function; the servers are shut down after the test."""
    servers = []

    def start(respond, keep_alive: bool = False):
        server = StubServer(respond, keep_alive).__enter__()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.__exit__(None, None, None)


@pytest.fixture
def closed_port_url():
    """A URL where nothing listens (a port bound, then released)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
