"""A TCP proxy in front of a real tracedoc web server that can play an outage: `down` closes
every connection at once (the server cannot be reached), `lose` drops the answers to the next
N uploads after the server has handled them (the trace exists, the client sees a failure),
`up` forwards. It records each upload's Idempotency-Key and what became of it."""
from __future__ import annotations

import socket
import threading
from dataclasses import dataclass


@dataclass
class Forwarded:
    path: str
    key: str
    status: int | None  # None: the answer was dropped


class FlakyProxy:
    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.down, self.lose = True, 0
        self.uploads: list[Forwarded] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            if self.down:
                return
            request = _read_request(conn)
            if request is None:
                return
            head, body = request
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1].split("?")[0]
            headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            # one request per upstream connection: the answer ends when the server closes
            head = "\r\n".join(line for line in lines if not line.lower().startswith("connection:"))
            with socket.create_connection(("127.0.0.1", self.upstream_port)) as upstream:
                upstream.sendall(head.encode("latin-1").rstrip(b"\r\n") + b"\r\nConnection: close\r\n\r\n" + body)
                answer = _read_all(upstream)
            upload = path == "/api/v1/traces/" and lines[0].startswith("POST")
            with self.lock:
                lost = upload and self.lose > 0
                if lost:
                    self.lose -= 1
                if upload:
                    status = None if lost else int(answer.split(b" ", 2)[1])
                    self.uploads.append(Forwarded(path, headers.get("idempotency-key", ""), status))
            if not lost:
                conn.sendall(answer)


def _read_request(conn: socket.socket) -> tuple[bytes, bytes] | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head, body


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data
