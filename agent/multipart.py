"""A multipart/form-data body streamed from the files, with its length known in advance: shared
by the agent's requests-based client and the stdlib client of `tracedoc submit` (cli/api_client.py),
so it imports nothing outside the standard library."""
from __future__ import annotations

import os
import uuid
from typing import BinaryIO


class MultipartBody:
    """A multipart/form-data body read from the files as it is sent, so a multi-gigabyte
    upload is never held in memory (requests would build it in memory). Its length is known
    in advance, so it goes out with a Content-Length (Django needs one)."""

    CHUNK = 1 << 20

    def __init__(self, fields: dict[str, str], files: list[tuple[str, BinaryIO]]):
        self.boundary = uuid.uuid4().hex
        self._parts: list[bytes | BinaryIO] = []
        for key, value in fields.items():
            self._parts.append(self._header(f'name="{key}"') + value.encode() + b"\r\n")
        for filename, f in files:
            safe = filename.replace('"', "_").replace("\r", "_").replace("\n", "_")
            self._parts += [self._header(f'name="files"; filename="{safe}"',
                                         "Content-Type: application/octet-stream\r\n"), f, b"\r\n"]
        self._parts.append(f"--{self.boundary}--\r\n".encode())
        self._length = sum(len(p) if isinstance(p, bytes) else _remaining(p) for p in self._parts)

    def _header(self, disposition: str, extra: str = "") -> bytes:
        return f"--{self.boundary}\r\nContent-Disposition: form-data; {disposition}\r\n{extra}\r\n".encode()

    @property
    def content_type(self) -> str:
        return f"multipart/form-data; boundary={self.boundary}"

    def __len__(self) -> int:
        return self._length

    def __iter__(self):  # requests streams a body that is iterable and has a length (urllib: read)
        while data := self.read(self.CHUNK):
            yield data

    def read(self, n: int = -1) -> bytes:
        while self._parts:
            part = self._parts[0]
            if isinstance(part, bytes):
                self._parts.pop(0)
                return part
            data = part.read(self.CHUNK if n is None or n < 0 else n)
            if data:
                return data
            self._parts.pop(0)
        return b""


def _remaining(f: BinaryIO) -> int:
    return os.fstat(f.fileno()).st_size - f.tell()
