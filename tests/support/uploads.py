"""Uploading corpus files through `POST /api/v1/traces/` as a client does (multipart)."""
import io

from tests.corpus import corpus

SCENARIO = ("h200", "cudagraph_abort")


def corpus_files():
    return sorted(corpus(*SCENARIO).iterdir())


def upload(client, paths, **fields):
    files = [io.BytesIO(p.read_bytes()) for p in paths]
    for f, p in zip(files, paths):
        f.name = p.name
    return client.post("/api/v1/traces/", {"files": files, **fields}, format="multipart")
