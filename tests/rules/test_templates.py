"""Templates: whitelisted placeholders, format specs and filters; hostile ones refused."""
import pytest

from rules.engine.loader import RuleError, load_rule_text
from tests.rules.helpers import MS, S, events, rule_text, run


@pytest.fixture(scope="module")
def frame():
    return events([
        {"ts": 1_700_000_000 * S, "dur": 2 * MS, "kind": "oom", "name": "OutOfMemory", "host": "gpu-7", "pid": 42,
         "attrs": {"requested": 2 * 1024**3, "device": {"free": 1536 * 1024**2}, "message": "CUDA out of memory"}},
        {"ts": 1_700_000_000 * S + 1500 * MS, "dur": 0, "kind": "oom", "name": "OutOfMemory", "host": "gpu-7", "pid": 42,
         "attrs": {"requested": 1024}},
    ])


BASE = "match:\n  sel: {kind: oom}\ncondition: sel\naggregate:\n  by: [host, pid]\n  having: max(attrs.requested) > 0\n"


@pytest.mark.parametrize("template, expected", [
    ("{count} OOMs on {host} pid {pid}", "2 OOMs on gpu-7 pid 42"),
    ("asked {first.attrs.requested|bytes} with {first.attrs.device.free|bytes} free",
     "asked 2.00 GiB with 1.50 GiB free"),
    ("first {first.ts|time}", "first 2023-11-14 22:13:20.000 UTC"),
    ("over {duration}", "over 1.5 s"),
    ("last took {last.dur|ms}; first took {first.dur|dur}", "last took 0 ms; first took 2 ms"),
    ("{metrics.max_attrs.requested:,}", "2,147,483,648.0"),
    ("{metrics.count:.1f} / {rate:.2f} per s", "2.0 / 1.33 per s"),
    ("{first.attrs.missing} and {{literal}}", "? and {literal}"),
    ("{first.attrs.device}", '{"free":1610612736}'),
])
def test_rendering(frame, template, expected):
    f = run(BASE, frame, explain=template)[0]
    assert f.explanation == expected


def test_recommendations_use_the_same_placeholders(frame):
    body = BASE + "recommend:\n  - 'Lower the batch on {host}'\n  - Plain text\n"
    assert run(body, frame)[0].recommendations == ("Lower the batch on gpu-7", "Plain text")


@pytest.mark.parametrize("template, message", [
    ("{__class__}", "placeholders are names like"),
    ("{first.__class__}", "placeholders are names like"),
    ("{first.name.__init__.__globals__}", "placeholders are names like"),
    ("{0}", "unknown placeholder {0}"),
    ("{0.__init__}", "placeholders are names like"),
    ("{first[0]}", "placeholders are names like"),
    ("{host!r}", "placeholders are names like"),
    ("{os}", "unknown placeholder {os}"),
    ("{first}", "needs a field"),
    ("{count:>1000000000}", "format spec"),
    ("{count|upper}", "unknown filter"),
    ("{count", "never closed"),
    ("count}", "single '}'"),
    ("{metrics.nonsense}", "not an aggregate"),
])
def test_hostile_or_broken_templates_are_refused_at_load(template, message):
    text = rule_text(BASE, explain=template)
    with pytest.raises(RuleError) as e:
        load_rule_text(text, "t.yaml")
    assert message in e.value.message
    assert (e.value.line, e.value.file) == (text.splitlines().index([l for l in text.splitlines() if l.startswith("explain")][0]) + 1, "t.yaml")


def test_rendered_values_are_bounded():
    frame = events([{"ts": 0, "kind": "log", "name": "x" * 10_000}])
    f = run("match:\n  sel: {kind: log}\ncondition: sel\n", frame, explain="{first.name}")[0]
    assert len(f.explanation) == 300
