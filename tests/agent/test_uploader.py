"""The shipping loop against a real HTTP server on localhost that fails, then accepts."""
import gzip
import io
import json
import tarfile
import threading
import time

from agent.spool import Spool
from agent.uploader import ApiClient, Shipper

ACCEPTED = {"id": 42, "state": "received", "web_url": "http://server/traces/42/"}


def spool_with_bundle(tmp_path, content=b'{"ts_ns": 1, "util_gpu": 5}\n'):
    spool = Spool(tmp_path / "spool")
    spool.add_chunk("nvml_samples.jsonl", content)
    bundle = spool.make_bundle({"host": "gpu-7", "window_start": "2026-01-01T00:00:00Z"}, name="gpu-7 window")
    return spool, bundle


def test_retries_with_growing_backoff_until_the_server_accepts(tmp_path, stub_server):
    answers = iter([(503, {"detail": "busy"}), (503, {"detail": "busy"}), (201, ACCEPTED)])
    server = stub_server(lambda rec: next(answers))
    spool, bundle = spool_with_bundle(tmp_path)
    shipper = Shipper(spool, ApiClient(server.url, "secret-key"), backoff_base=0.1, jitter=lambda: 1.0)
    key = bundle.meta["key"]

    assert shipper.ship_until(time.monotonic() + 10)

    posts = server.received
    assert [r.method + " " + r.path for r in posts] == ["POST /api/v1/traces/"] * 3
    gaps = [b.at - a.at for a, b in zip(posts, posts[1:])]
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2  # base, then twice the base
    last = posts[-1]
    assert last.headers["Authorization"] == "Token secret-key"
    assert json.loads(last.fields["labels"]) == {"host": "gpu-7", "window_start": "2026-01-01T00:00:00Z"}
    assert last.fields["name"] == "gpu-7 window"
    [(filename, payload)] = last.files
    assert filename.endswith(".tar.gz")
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:gz") as tar:
        assert tar.extractfile("nvml_samples.jsonl").read() == b'{"ts_ns": 1, "util_gpu": 5}\n'
    assert spool.bundles() == []
    assert list(shipper.shipped) == [ACCEPTED]
    # every try carries the key the bundle was made with: the server makes one trace of them
    assert {r.headers["Idempotency-Key"] for r in posts} == {key}


def test_a_server_that_is_down_leaves_the_bundle_in_the_spool(tmp_path, closed_port_url):
    spool, bundle = spool_with_bundle(tmp_path)
    shipper = Shipper(spool, ApiClient(closed_port_url, "k"), backoff_base=0.05)
    assert not shipper.ship_pending()
    assert shipper.failures == 1
    assert spool.bundles() == [bundle] and bundle.path.exists()
    assert not shipper.ship_until(time.monotonic() + 0.3)
    assert shipper.failures >= 2 and spool.bundles() == [bundle]


def test_a_refused_token_keeps_the_bundle_for_later(tmp_path, stub_server):
    server = stub_server(lambda rec: (401, {"detail": "Invalid token."}))
    spool, bundle = spool_with_bundle(tmp_path)
    assert not Shipper(spool, ApiClient(server.url, "wrong")).ship_pending()
    assert spool.bundles() == [bundle]


def test_a_bundle_refused_for_good_moves_to_rejected_and_the_next_one_ships(tmp_path, stub_server):
    server = stub_server(lambda rec: (400, {"detail": ["labels: invalid key"]}) if len(server.received) == 1
                         else (201, ACCEPTED))
    spool, bad = spool_with_bundle(tmp_path)
    spool.add_chunk("nvml_samples.jsonl", b"{}\n")
    good = spool.make_bundle({"host": "gpu-7"})

    assert Shipper(spool, ApiClient(server.url, "k")).ship_pending()
    assert len(server.received) == 2
    assert spool.bundles() == []
    assert (spool.rejected / bad.path.name).exists()
    assert "labels: invalid key" in json.loads((spool.rejected / bad.labels_path.name).read_text())["rejected"]
    assert not good.path.exists()


def test_the_shipping_thread_bundles_what_is_submitted_and_ships_it(tmp_path, stub_server):
    server = stub_server(lambda rec: (201, ACCEPTED))
    spool = Spool(tmp_path)
    shipper = Shipper(spool, ApiClient(server.url, "k"))
    thread = threading.Thread(target=shipper.run)
    thread.start()
    bundled_on = []
    try:
        spool.add_chunk("logs/a.log", b"line\n")
        shipper.submit(lambda: bundled_on.append(threading.get_ident()) or spool.make_bundle({"host": "h"}))
        deadline = time.monotonic() + 5
        while not server.received and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        shipper.close()
        thread.join(5)
    assert spool.bundles() == [] and len(server.received) == 1
    assert bundled_on == [thread.ident]  # the gzip work happened off the caller's (sampling) thread
    assert not thread.is_alive()


def test_the_shipping_thread_keeps_its_backoff_and_survives_a_failing_job(tmp_path, closed_port_url):
    spool, _ = spool_with_bundle(tmp_path)
    shipper = Shipper(spool, ApiClient(closed_port_url, "k"), backoff_base=60.0, jitter=lambda: 1.0)
    thread = threading.Thread(target=shipper.run)
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while shipper.failures < 1 and time.monotonic() < deadline:  # the left-over bundle is tried at once
            time.sleep(0.02)
        shipper.submit(lambda: 1 / 0)  # logged, not fatal
        shipper.submit(lambda: spool.add_chunk("s", b"x") and spool.make_bundle({}))
        time.sleep(0.3)
    finally:
        shipper.close()
        thread.join(5)
    assert not thread.is_alive()
    assert shipper.failures == 1  # a new job did not cut the 60 s backoff short
    assert len(spool.bundles()) == 2


def test_large_uploads_stream_with_a_content_length(tmp_path, stub_server):
    """A bundle bigger than one read block goes out whole, with an exact Content-Length."""
    server = stub_server(lambda rec: (201, ACCEPTED))
    big = bytes(range(256)) * (3 * 4096 + 7)  # ~3 MiB, not a multiple of the block size
    path = tmp_path / "big.bin"
    path.write_bytes(gzip.compress(big, compresslevel=1))
    with open(path, "rb") as f:
        ApiClient(server.url, "k").upload([("big.bin.gz", f)], {"k": "v"})
    [rec] = server.received
    assert int(rec.headers["Content-Length"]) == len(rec.body)
    assert gzip.decompress(rec.files[0][1]) == big
