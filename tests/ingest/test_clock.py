"""Clock travels through report.meta as a dict and reads back the same."""
from ingest.engine.clock import Clock
from ingest.engine.events import ParseReport


def test_meta_round_trip_keeps_every_field():
    clock = Clock("monotonic", "perf clock", offset_ns=-5, offset_source="perf header reference time",
                  year_assumed=2024, date_assumed=True, tz_assumed=True)
    report = ParseReport()
    report.set_clock(clock)
    assert Clock.from_meta(report.meta) == clock
    assert clock.assumptions == ["year_assumed", "date_assumed", "tz_assumed"]


def test_unset_fields_stay_out_of_the_meta():
    assert Clock("none", "no timestamps").to_meta() == {"domain": "none", "note": "no timestamps"}
    assert Clock("unix", source="baseTimeNanoseconds + ts").to_meta() == {
        "domain": "unix", "source": "baseTimeNanoseconds + ts"}


def test_a_meta_without_a_clock_reads_as_unknown():
    assert Clock.from_meta({}).domain == "unknown"
    assert Clock.from_meta({"clock": "unix"}).domain == "unknown"
    assert Clock.from_meta({"clock": {"domain": "unix", "offset_ns": "12"}}).offset_ns is None
