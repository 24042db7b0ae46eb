"""The diagnosis engine: findings grouped into root-cause clusters, SLOs, the report and its
renderings (text, timeline, charts, diffs), backtests.

Runs without Django; the app around it stores reports and clusters, triages and serves them."""
