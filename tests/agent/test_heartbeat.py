"""The heartbeat thread against a real local HTTP server: what it says, and the capture
orders it takes from the answer."""
import json
import time

from agent.heartbeat import Heartbeat
from agent.on_demand import OnDemand
from agent.spool import Spool
from agent.uploader import ApiClient

GPU = {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-1", "memory_total": 1 << 30, "driver": "580"}


def test_heartbeats_report_the_host_and_hand_orders_to_the_capture_folder(tmp_path, stub_server):
    orders = iter([[{"id": 5, "kind": "profiler", "steps": 4}]])
    server = stub_server(lambda rec: (200, {"host": "h", "captures": next(orders, [])}))
    spool = Spool(tmp_path / "spool")
    spool.add_chunk("s", b"x")
    spool.make_bundle({})  # one bundle waiting
    on_demand = OnDemand(tmp_path / "capture", spool, {"host": "h"}, deliver=lambda job: job())
    beat = Heartbeat(ApiClient(server.url, "tok"), "h", spool, interval=0.2, on_demand=on_demand,
                     gpus=lambda: [GPU]).start()
    deadline = time.monotonic() + 10
    while len(server.heartbeats) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    beat.stop()
    first = json.loads(server.heartbeats[0].body)
    assert (first["host"], first["gpus"], first["pending_bundles"], first["interval"]) == ("h", [GPU], 1, 0.2)
    assert server.heartbeats[0].headers["Authorization"] == "Token tok"
    assert json.loads((tmp_path / "capture" / "requests" / "5.json").read_text())["steps"] == 4
    assert list(on_demand.outstanding) == [5]


def test_an_unreachable_server_does_not_stop_the_heartbeat(tmp_path, closed_port_url):
    beat = Heartbeat(ApiClient(closed_port_url, "tok"), "h", Spool(tmp_path / "spool"), interval=0.05)
    assert not beat.beat() and not beat.beat()
    assert beat.beats == 0
