"""`tracedoc-agent run` as a process: follows a log, ships a bundle per window to a real local
server, and on SIGTERM ships the last window before exiting."""
import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_run_ships_windows_and_the_last_one_on_sigterm(tmp_path, stub_server):
    server = stub_server(lambda rec: (201, {"id": len(server.uploads), "state": "received"}))
    log = tmp_path / "train.log"
    log.write_bytes(b"window one\n")
    agent = subprocess.Popen(
        [sys.executable, "-m", "agent.main", "run", "--server", server.url, "--spool", str(tmp_path / "spool"),
         "--logs", str(tmp_path / "*.log"), "--from-start", "--ship-every", "0.5s",
         "--collect-every", "0.1s", "--labels", "cluster=test"],
        cwd=ROOT, env={**os.environ, "TRACEDOC_TOKEN": "env-token"}, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while not server.uploads and time.monotonic() < deadline:
            time.sleep(0.05)
        with open(log, "ab") as f:
            f.write(b"written just before the stop\n")  # picked up by the final collection
        agent.send_signal(signal.SIGTERM)
        _, err = agent.communicate(timeout=30)
    finally:
        if agent.poll() is None:
            agent.kill()
    assert agent.returncode == 0, err.decode()
    shipped = b""
    for rec in server.uploads:
        labels = json.loads(rec.fields["labels"])
        assert labels["cluster"] == "test" and labels["source"] == "tracedoc-agent"
        assert labels["window_start"] <= labels["window_end"]
        assert rec.headers["Authorization"] == "Token env-token"
        with tarfile.open(fileobj=io.BytesIO(rec.files[0][1]), mode="r:gz") as tar:
            shipped += b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.name.startswith("logs/"))
    assert shipped == b"window one\nwritten just before the stop\n"  # every line once, in order
    assert not list((tmp_path / "spool" / "outbox").iterdir())
