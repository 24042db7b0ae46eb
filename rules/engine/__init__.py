"""The rules engine: YAML rules checked and compiled, the trace's features, evaluation to findings.

Runs without Django; the app around it stores team rules and serves the editor. The rule
packs it reads by default are rules/builtin, its schema rules/schema.json."""
