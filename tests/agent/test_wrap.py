import io
import json
import os
import sys
import shlex
import subprocess
import threading
import time
import tarfile
from pathlib import Path

from agent.main import main
from agent.nvml_sampler import Sampler
from agent.spool import Spool
from agent.uploader import ApiClient, Shipper
from agent.wrap import BoundedLog, _tee, command_title, wrap
from ingest.engine.bundle import expand
from ingest.engine.parsers import detect
from tests.support.nvml_sampler import FakeReader

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "agent"

# A training script in miniature: talks on both streams, leaves a flight-recorder dump where
# the wrapper pointed it, reports the NCCL settings it saw, and fails with exit code 3.
FAILING = """
import os, sys
print("step 1 loss 2.31", flush=True)
print("NCCL_DEBUG=" + os.environ["NCCL_DEBUG"], "BUFFER=" + os.environ["TORCH_NCCL_TRACE_BUFFER_SIZE"],
      "ON_TIMEOUT=" + os.environ["TORCH_NCCL_DUMP_ON_TIMEOUT"], flush=True)
open(os.environ["TORCH_FR_DUMP_TEMP_FILE"] + "0", "wb").write(b"flight recorder dump of rank 0")
print("RuntimeError: boom on rank 0", file=sys.stderr)
sys.exit(3)
"""


def bundle_members(path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def test_wrap_captures_output_dumps_and_samples_and_flags_the_exit(tmp_path, monkeypatch):
    monkeypatch.delenv("NCCL_DEBUG", raising=False)
    monkeypatch.setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "50")  # the user's own setting is kept
    spool = Spool(tmp_path / "spool")
    out, err = io.BytesIO(), io.BytesIO()
    sampler = Sampler(FakeReader(), interval=0.01, host="h").start()

    rc = wrap([sys.executable, "-c", FAILING], spool, {"host": "h", "job": "t"}, sampler, stdout=out, stderr=err)

    assert rc == 3
    assert out.getvalue().startswith(b"step 1 loss 2.31\n")  # still reaches the terminal
    assert err.getvalue() == b"RuntimeError: boom on rank 0\n"
    [bundle] = spool.bundles()
    labels = bundle.meta["labels"]
    assert (labels["exit_code"], labels["failed"], labels["job"], labels["capture"]) == ("3", "true", "t", "wrap")
    assert labels["command"].startswith(sys.executable)
    files = bundle_members(bundle.path)
    [log_name] = [n for n in files if n.startswith("logs/")]
    log = files[log_name]
    assert b"step 1 loss 2.31\n" in log and b"RuntimeError: boom on rank 0\n" in log
    assert b"NCCL_DEBUG=INFO BUFFER=50 ON_TIMEOUT=1" in log
    assert files["dumps/nccl_trace_rank_0"] == b"flight recorder dump of rank 0"
    samples = [json.loads(x) for x in files["nvml_samples.jsonl"].splitlines()]
    assert samples and {s["gpu"] for s in samples} == {0, 1}
    assert not (spool.root / "wrap").exists() or not any((spool.root / "wrap").iterdir())


def test_wrap_ships_the_bundle_when_the_command_exits(tmp_path, stub_server):
    server = stub_server(lambda rec: (201, {"id": 9, "state": "received", "web_url": "http://s/traces/9/"}))
    spool = Spool(tmp_path / "spool")
    shipper = Shipper(spool, ApiClient(server.url, "tok"))
    rc = wrap([sys.executable, "-c", "import sys; print('x', file=sys.stderr); sys.exit(3)"], spool,
              {"host": "h"}, shipper=shipper, stdout=io.BytesIO(), stderr=io.BytesIO())
    assert rc == 3
    [upload] = server.received
    assert json.loads(upload.fields["labels"])["exit_code"] == "3"
    assert spool.bundles() == []


def test_the_agent_command_without_a_gpu_says_so_and_still_wraps(tmp_path, capfd):
    rc = main(["wrap", "--spool", str(tmp_path / "spool"), "--", sys.executable, "-c",
               "import sys; print('hi from the job', file=sys.stderr); sys.exit(3)"])
    out, err = capfd.readouterr()
    assert rc == 3
    assert "hi from the job" in err
    assert "Traceback" not in err
    if "NVML unavailable" in err:  # a host without a GPU: one clear line, the capture goes on
        assert "no GPU samples will be captured" in err
    assert "the bundle stays in the spool" in err
    assert len(Spool(tmp_path / "spool").bundles()) == 1


def test_a_missing_command_exits_127(tmp_path):
    assert wrap(["/nonexistent/train"], Spool(tmp_path), {}) == 127


def test_the_log_keeps_head_and_tail_of_long_output(tmp_path):
    log = BoundedLog(tmp_path / "out.log", head=10, tail=10)
    for i in range(10):
        log.write(b"%05d" % i)  # 50 bytes in all
    log.close()
    text = (tmp_path / "out.log").read_bytes()
    assert text.startswith(b"0000000001")
    assert text.endswith(b"0000800009")
    assert b"[tracedoc-agent: 30 bytes of output left out here]" in text


def test_the_bundle_captured_on_an_h200_expands_into_parsable_artifacts(tmp_path):
    """`wrap` ran a CUDA matmul that exits 3 on an H200 (tests/fixtures/agent): the server's
    bundle expansion and format detection see the NVML samples and the command's log."""
    labels = json.loads((FIXTURES / "wrap_bundle_h200.json").read_text())["labels"]
    assert labels["exit_code"] == "3" and labels["failed"] == "true"
    with expand([FIXTURES / "wrap_bundle_h200.tar.gz"], tmp_path) as members:
        formats = {m.name: detect(m.path, m.name).FORMAT for m in members}
    assert formats["nvml_samples.jsonl"] == "nvml_jsonl"
    assert [f for name, f in formats.items() if name.startswith("logs/")] == ["log"]


def test_stdout_and_stderr_interleave_by_whole_lines(tmp_path):
    """A partial line on one stream must not be split by a line from the other."""
    log = BoundedLog(tmp_path / "out.log")
    (ra, wa), (rb, wb) = os.pipe(), os.pipe()
    tees = [threading.Thread(target=_tee, args=(os.fdopen(r, "rb"), io.BytesIO(), log)) for r in (ra, rb)]
    for t in tees:
        t.start()
    os.write(wa, b"loss 2.")        # half a line on stdout...
    time.sleep(0.2)
    os.write(wb, b"RuntimeError: boom\n")  # ...while stderr prints a whole one
    time.sleep(0.2)
    os.write(wa, b"31\n")
    os.close(wa), os.close(wb)
    for t in tees:
        t.join(5)
    log.close()
    lines = (tmp_path / "out.log").read_bytes().splitlines()
    assert sorted(lines) == [b"RuntimeError: boom", b"loss 2.31"]


def test_a_command_killed_by_a_signal_is_labelled_with_it(tmp_path):
    spool = Spool(tmp_path / "spool")
    killed = "import os, signal; print('about to die', flush=True); os.kill(os.getpid(), signal.SIGKILL)"

    rc = wrap([sys.executable, "-c", killed], spool, {"host": "h"}, stdout=io.BytesIO(), stderr=io.BytesIO())

    assert rc == 128 + 9
    labels = spool.bundles()[0].meta["labels"]
    assert (labels["exit_code"], labels["signal"], labels["failed"]) == ("137", "SIGKILL", "true")


def test_a_real_wrap_run_ends_without_a_traceback_and_names_the_command_readably(tmp_path, stub_server):
    """Issue 32: every `tracedoc-agent wrap` ended with `OSError: [Errno 9]` (the output pipes'
    descriptors closed twice, the second time the shipper's socket that reused the number), and
    its trace name showed the shell's `'"'"'` quoting. The agent as a process, shipping to a
    server, heartbeat on."""
    server = stub_server(lambda rec: (201, {"id": 7, "state": "received", "web_url": "http://s/traces/7/"}),
                         keep_alive=True)
    script = "echo \"it's done\"; echo warn >&2; exit 0"
    run = subprocess.run([sys.executable, "-m", "agent.main", "wrap", "--server", server.url, "--token", "tok",
                          "--spool", str(tmp_path / "spool"), "--labels", "host=gpu-a", "--", "sh", "-c", script],
                         capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stderr
    assert "it's done" in run.stdout and "shipped as trace 7" in run.stderr
    assert "Traceback" not in run.stderr and "Errno 9" not in run.stderr, run.stderr
    [upload] = [r for r in server.received if r.fields.get("name")]
    assert upload.fields["name"] == "gpu-a: sh -c echo \"it's done\"; echo warn >&2; exit 0 (exit 0)"
    assert json.loads(upload.fields["labels"])["command"] == shlex.join(["sh", "-c", script])  # runs again


def test_command_titles_read_as_typed_and_stay_short():
    assert command_title(["bash", "-lc", "torchrun --nproc 8 train.py && echo ok"]) == \
        'bash -lc "torchrun --nproc 8 train.py && echo ok"'
    assert command_title(["python", "train.py", "--lr", "3e-4"]) == "python train.py --lr 3e-4"
    assert command_title(["python", "-c", 'print("a\n  b")']) == "python -c 'print(\"a b\")'"
    long = command_title(["python", "-c", "x" * 300])
    assert len(long) == 80 and long.endswith("…")


def test_the_tee_closes_the_pipe_through_its_file_object(tmp_path):
    """A bare os.close left the file object open on a number the next socket reuses: closing
    the object later (when the Popen goes) closed that socket instead."""
    log = BoundedLog(tmp_path / "out.log")
    r, w = os.pipe()
    pipe = os.fdopen(r, "rb")
    os.write(w, b"done\n")
    os.close(w)
    _tee(pipe, io.BytesIO(), log)
    assert pipe.closed
