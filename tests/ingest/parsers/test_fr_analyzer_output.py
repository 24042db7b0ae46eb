"""The flight-recorder analyzer's printed verdict becomes one event with its facts."""
import json
import re

from diagnosis.engine import scenarios
from tests.corpus import corpus

FILES = ("fr_trace_output_pr140969_not_all_ranks_joining.txt", "fr_trace_outputs_tutorial_debug_hangs.txt")


def test_verdict_facts_match_the_text(corpus_dir):
    for name in FILES:
        path = corpus("public", "flight_recorder", name)
        text = path.read_text()
        ev = scenarios.events(path)
        rows = ev[ev["name"] == "FRMissingRanks"]
        headers = re.findall(r"Not all ranks joining collective[:,] sequence number: (\d+)", text)
        assert len(rows) == len(headers) == 1
        a = json.loads(rows["attrs"].iloc[0])
        assert a["seq"] == int(headers[0])
        missing = re.search(r"missing ranks: \{([\d, ]+)\}", text).group(1)
        assert a["missing_ranks"] == [int(x) for x in missing.split(",")]
        assert a["world_size"] == int(re.search(r"world size: (\d+)", text).group(1))
        assert a["state"] == re.search(r"collective state: (\w+)", text).group(1)


def test_verdict_is_a_peer_missing_diagnosis(corpus_dir):
    report = scenarios.report(corpus("public", "flight_recorder", FILES[0]))
    finding = next(f for f in report["findings"] if f["root_cause"] == "nccl.timeout.peer_missing")
    assert finding["severity"] == "critical"
    assert "3, 4, 5, 6, 7" in finding["explanation"] and "31117" in finding["explanation"]
