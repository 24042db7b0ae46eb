"""The rule editor's server side: completion/hover hints from the schema, the modifier
registry and the feature list; every error of a rule at once with line and column; the
version-bump check while typing; per-selection counts and matched rows of a test run; a
trace picker that tells traces apart."""
import gzip
import json

from rules.engine.features import list_features
from rules.engine.modifiers import MODIFIERS
from tests.corpus import corpus
from tests.support.rule_texts import GRAPH_LAUNCHES as RULE, where

TWO_MISTAKES = RULE.replace("    name: cudaGraphLaunch", "    name|bogus: cudaGraphLaunch\n  other:\n    nosuchcol: 3") \
    .replace("condition: launches", "condition: launches or other")


def test_hints_come_from_the_schema_the_modifier_registry_and_the_feature_list(logged_in):
    hints = logged_in.get("/rules/hints/").json()
    keys = {k["name"]: k for k in hints["keys"]}
    assert {"id", "version", "match", "condition", "aggregate", "sequence"} <= set(keys)
    assert keys["severity"]["values"] == ["info", "warning", "error", "critical"]
    assert "required" in keys["version"]["doc"]
    assert [m["name"] for m in hints["modifiers"]] == list(MODIFIERS)
    assert all(m["doc"] for m in hints["modifiers"])
    assert [f["name"] for f in hints["features"]] == [f["name"] for f in list_features()]
    assert {"by", "window", "having"} <= {k["name"] for k in hints["nested"]["aggregate"]}
    assert "dur" in {c["name"] for c in hints["columns"]}


def test_validation_lists_every_selection_error_with_line_and_column(logged_in):
    body = logged_in.post("/rules/validate/", {"yaml": TWO_MISTAKES}, HTTP_HX_REQUEST="true").content.decode()
    assert "2 errors" in body
    assert f"{where(TWO_MISTAKES, 'name|bogus')}: " in body and "unknown modifier |bogus" in body
    assert f"{where(TWO_MISTAKES, 'nosuchcol')}: " in body and "unknown field &#x27;nosuchcol&#x27;" in body
    line = where(TWO_MISTAKES, "nosuchcol").split()[1].rstrip(",")
    assert f'data-line="{line}" data-col="5"' in body


def test_the_version_bump_is_checked_while_typing(logged_in, ours):
    changed = RULE.replace("severity: info", "severity: warning")
    body = logged_in.post("/rules/validate/", {"yaml": changed, "rule": ours.pk}).content.decode()
    assert f'{where(changed, "version:")}: </span><span class="message">version: the text changed, so bump' in body
    same = logged_in.post("/rules/validate/", {"yaml": RULE, "rule": ours.pk}).content.decode()
    assert "valid: <code>team.graph-launches</code> v1" in same
    bumped = changed.replace("version: 1", "version: 2")
    assert "v2" in logged_in.post("/rules/validate/", {"yaml": bumped, "rule": ours.pk}).content.decode()
    renamed = RULE.replace("id: team.graph-launches", "id: team.other")
    assert "a saved rule keeps its id" in logged_in.post("/rules/validate/",
                                                         {"yaml": renamed, "rule": ours.pk}).content.decode()


def test_a_test_run_shows_per_selection_counts_and_matched_rows(logged_in, graph_trace, trials):
    events = json.loads(gzip.decompress(corpus("h200", "cudagraph_abort", "kineto_trace.json.gz").read_bytes()))
    launches = sum(1 for e in events["traceEvents"] if e.get("name") == "cudaGraphLaunch")
    quiet = RULE.replace("condition: launches", "condition: launches and syncs") \
        .replace("    name: cudaGraphLaunch", "    name: cudaGraphLaunch\n  syncs:\n    kind: runtime\n    name: noSuchCall")
    body = trials.run(logged_in, "/rules/test/", {"yaml": quiet, "trace": graph_trace.pk})
    assert "no finding" in body
    assert f'data-selection="launches"><td><code>launches</code></td><td>events</td><td>{launches}</td>' in body
    assert 'data-selection="syncs"><td><code>syncs</code></td><td>events</td><td>0</td>' in body
    assert f"first 5 of {launches} rows" in body and body.count("<td>cudaGraphLaunch</td>") == 5


def test_the_trace_picker_shows_upload_time_labels_and_formats(logged_in, graph_trace, infra, alice):
    graph_trace.labels = {"model": "llama-70b"}
    graph_trace.save(update_fields=["labels"])
    page = logged_in.get("/rules/new/").content.decode()
    option = page.split(f'<option value="{graph_trace.pk}"', 1)[1].split("</option>", 1)[0]
    assert f"uploaded {graph_trace.created_at:%Y-%m-%d}" in option
    assert "kineto" in option and "model=llama-70b" in option
    assert "and 1 more" not in option
