"""Helpers the acceptance tests share."""
from pathlib import Path

from rules.engine.severity import RANK


def by_root(report: dict) -> dict[str, str]:
    """Root-cause key -> the highest severity any finding with that key carries."""
    out: dict[str, str] = {}
    for f in report["findings"]:
        key = f["root_cause"]
        if key not in out or RANK[f["severity"]] > RANK[out[key]]:
            out[key] = f["severity"]
    return out


def assert_diagnosis(report: dict, entry: dict) -> None:
    """An EXPECTED.yaml entry holds for a report: `root_cause` heads a cluster at `severity` or
    above (`none`: nothing at warning or above), `absent` keys are not reported, `not_headline`
    keys head no cluster, and each `mentions` text is in the root cause's explanation."""
    found = by_root(report)
    for key in entry.get("absent") or []:
        assert key not in found, f"{key} reported: {found}"
    if entry["root_cause"] == "none":
        loud = {k: s for k, s in found.items() if RANK[s] >= RANK["warning"]}
        assert not loud, f"healthy input raised {loud}"
        return
    key, severity = entry["root_cause"], entry["severity"]
    assert key in found, f"expected {key}, got {found}"
    assert RANK[found[key]] >= RANK[severity], f"{key} at {found[key]}, expected >= {severity}"
    headlines = {c["root_cause"] for c in report["clusters"]}
    assert key in headlines, f"{key} is not a cluster headline: {sorted(headlines)}"
    consequences = set(entry.get("not_headline") or [])
    assert not consequences & headlines, f"consequence(s) head a cluster: {sorted(headlines)}"
    explained = " ".join(f["explanation"] for f in report["findings"] if f["root_cause"] == key)
    for text in entry.get("mentions") or []:
        assert text in explained, f"{text!r} not in the {key} explanation: {explained[:300]}"


def assert_labelled_file(path: Path, entry: dict) -> None:
    """One blind-round file diagnosed on its own as its EXPECTED.yaml entry says, and a file that
    shows a failure never yields "no findings"."""
    from diagnosis.engine import scenarios  # Django-backed: imported by the tests that need it

    assert path.is_file(), f"{path.name} listed in EXPECTED.yaml but missing"
    report = scenarios.report(path)
    assert_diagnosis(report, entry)
    if entry["root_cause"] != "none":
        assert report["findings"], "a failure in the file, and no finding at all"


def labelled_cases(root: Path, strict_xfail: bool = False) -> list:
    """One pytest param (path, entry) per EXPECTED.yaml entry of a blind round's folders; an entry's
    `xfail` text marks it as a known miss."""
    import pytest
    import yaml

    cases = []
    for expected in sorted(root.glob("*/EXPECTED.yaml")):
        for entry in yaml.safe_load(expected.read_text()) or []:
            marks = [pytest.mark.xfail(reason=entry["xfail"], strict=strict_xfail)] if entry.get("xfail") else []
            cases.append(pytest.param(expected.parent / entry["file"], entry,
                                      id=f"{expected.parent.name}/{entry['file']}", marks=marks))
    return cases


def assert_round_manifest(cases: list, files: int, healthy: int, xfails: int) -> None:
    """A blind round is what its docstring says: so many files, each from its own public page or
    thread (an https address: a GitHub thread, a forum post, a blog), so many healthy look-alikes,
    so many known misses."""
    entries = [c.values[1] for c in cases]
    assert len(entries) == files and all(e["source"].startswith("https://") for e in entries)
    assert sum(e["root_cause"] == "none" for e in entries) == healthy
    assert len({e["source"] for e in entries}) == files
    assert sum(bool(e.get("xfail")) for e in entries) == xfails


def blind_round(folder: str, files: int, healthy: int, xfails: int) -> tuple:
    """A blind round's two tests over tests/fixtures/<folder>: its manifest (so many files, healthy
    look-alikes and known misses, one thread each) and one diagnosis per labelled file, known misses
    as strict xfails. The module assigns them to test_* names for pytest to collect."""
    import pytest

    cases = labelled_cases(Path(__file__).resolve().parent.parent / "fixtures" / folder, strict_xfail=True)

    def test_the_round_is_what_its_docstring_says():
        assert_round_manifest(cases, files=files, healthy=healthy, xfails=xfails)

    @pytest.mark.parametrize("path,entry", cases)
    def test_diagnosed_as_labelled(path: Path, entry: dict):
        assert_labelled_file(path, entry)

    return test_the_round_is_what_its_docstring_says, test_diagnosed_as_labelled
