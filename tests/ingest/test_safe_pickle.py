import os
import pickle
import pickletools

import pytest

from ingest.engine.events import ParseError
from ingest.engine.safe_pickle import load_path, loads
from tests.corpus import corpus

CORPUS_PICKLES = [("h200", "nccl_timeout", "nccl_trace_rank_0"),
                  ("h200", "oom_fragmentation", "memory_snapshot.pickle"),
                  ("h200", "oom_true_fragmentation", "memory_snapshot.pickle")]


class _Payload:
    def __init__(self, target):
        self.target = target

    def __reduce__(self):  # what a malicious upload carries
        return (os.system, (f"touch {self.target}",))


def _first_global_offset(data: bytes) -> int:
    return next(pos for op, _, pos in pickletools.genops(data) if op.name in ("GLOBAL", "STACK_GLOBAL"))


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_malicious_pickle_runs_nothing_and_names_offset(tmp_path, protocol):
    target = tmp_path / "pwned"
    data = pickle.dumps({"entries": [_Payload(target)]}, protocol=protocol)
    path = tmp_path / "evil.pkl"
    path.write_bytes(data)
    with pytest.raises(ParseError) as e:
        load_path(path)
    assert not target.exists()
    msg = str(e.value)
    assert str(path) in msg
    assert f"byte {_first_global_offset(data)}" in msg
    assert "system" in msg  # the global's name (posix.system / nt.system)


def test_persistent_id_is_refused(tmp_path):
    class P(pickle.Pickler):
        def persistent_id(self, obj):
            return "ext" if obj == "x" else None
    import io
    buf = io.BytesIO()
    P(buf, protocol=2).dump(["x"])
    with pytest.raises(ParseError, match="PERSID|persistent"):
        loads(buf.getvalue(), "p.pkl")


@pytest.mark.parametrize("parts", CORPUS_PICKLES)
def test_every_corpus_pickle_loads_as_plain_data(corpus_dir, parts):
    data = load_path(corpus(*parts))
    plain = (dict, list, tuple, str, bytes, int, float, bool, type(None))
    stack = [data]
    while stack:
        x = stack.pop()
        assert isinstance(x, plain), type(x)
        if isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)


def test_truncated_pickle_reports_offset(corpus_dir, tmp_path):
    data = corpus(*CORPUS_PICKLES[1]).read_bytes()
    cut = tmp_path / "cut.pickle"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError) as e:
        load_path(cut)
    assert str(cut) in str(e.value) and "byte " in e.value.where
    assert int(e.value.where.split()[1]) <= len(data) // 2


def test_corrupted_opcode_reports_its_offset(tmp_path):
    data = bytearray(pickle.dumps({"a": list(range(50))}, protocol=4))
    pos = [p for _, _, p in pickletools.genops(bytes(data))][6]  # an opcode, not an argument byte
    data[pos] = 0xFF  # not an opcode
    with pytest.raises(ParseError) as e:
        loads(bytes(data), "bad.pkl")
    assert e.value.where == f"byte {pos}"


def test_not_a_pickle():
    with pytest.raises(ParseError, match="byte 0"):
        loads(b"{}", "x.json")
