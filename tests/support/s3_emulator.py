"""An S3 API emulator for the storage tests: moto's server mode (`moto[server]`), started by the
test on a free port of 127.0.0.1. It speaks the S3 REST API over HTTP, so the code under test
uses its real S3 client (pyarrow's, the AWS SDK) exactly as against AWS S3 or MinIO."""
from __future__ import annotations

import logging
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import pyarrow.fs as pafs
from moto.server import ThreadedMotoServer

# moto accepts any key pair; these only have to be set (the AWS SDK refuses to sign without one)
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "tracedoc-test", "AWS_SECRET_ACCESS_KEY": "tracedoc-test-secret",
               "AWS_DEFAULT_REGION": "us-east-1"}


@dataclass(frozen=True)
class Emulator:
    endpoint_url: str

    def filesystem(self) -> pafs.S3FileSystem:
        """A client of the emulator with the test credentials (and leave to create buckets)."""
        host = self.endpoint_url.removeprefix("http://")
        return pafs.S3FileSystem(access_key=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                                 secret_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
                                 endpoint_override=host, scheme="http", allow_bucket_creation=True)

    def new_bucket(self) -> str:
        name = f"tracedoc-{uuid.uuid4().hex[:12]}"
        self.filesystem().create_dir(name)
        return name

    def files(self, prefix: str) -> dict[str, int]:
        """key -> size of every object (not the folder markers) under `bucket/prefix`."""
        infos = self.filesystem().get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True))
        return {i.path: i.size for i in infos if i.type == pafs.FileType.File}


@contextmanager
def s3_emulator() -> Iterator[Emulator]:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield Emulator(f"http://{host}:{port}")
    finally:
        server.stop()
