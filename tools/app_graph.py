"""The folder-level import graph between the Django apps, with the arrows that point upward.

An arrow A -> B means some module of app A imports some module of app B. The apps are ranked
in WEB_LAYERS, top first; an arrow from a lower app to a higher one is *upward*. Apps whose
arrows form a circle (a strongly connected component of more than one app) are listed too.

    python tools/app_graph.py            # the arrows, upward ones marked, the circles
    python tools/app_graph.py --mermaid  # the same graph as a mermaid block for docs/

Uses grimp (installed with import-linter); run from the repository root. Exit status 1 when
an upward arrow or a circle exists, so the figures can gate a check.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import grimp

# Top first. `tracedoc` is the project (settings, root URLs, the workflow that chains ingest
# and diagnosis); the apps below it may be imported by those above, never the other way.
WEB_LAYERS: tuple[str, ...] = (
    "tracedoc",
    "alerts",
    "otlp_receiver",
    "hosts",
    "diagnosis",
    "rules",
    "ingest",
    "accounts",
    "problems",  # the API's error documents (RFC 9457), below every app: it knows no model
)


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    imports: tuple[tuple[str, str], ...]  # (importer, imported) module pairs

    @property
    def upward(self) -> bool:
        return WEB_LAYERS.index(self.source) > WEB_LAYERS.index(self.target)


def app_arrows() -> list[Arrow]:
    graph = grimp.build_graph(*WEB_LAYERS, include_external_packages=False, cache_dir=None)
    pairs: dict[tuple[str, str], set[tuple[str, str]]] = defaultdict(set)
    for importer in graph.modules:
        source = importer.split(".")[0]
        for imported in graph.find_modules_directly_imported_by(importer):
            target = imported.split(".")[0]
            if source != target and target in WEB_LAYERS:
                pairs[(source, target)].add((importer, imported))
    return [Arrow(s, t, tuple(sorted(m))) for (s, t), m in sorted(pairs.items(), key=_rank)]


def _rank(item: tuple[tuple[str, str], object]) -> tuple[int, int]:
    (source, target), _ = item
    return WEB_LAYERS.index(source), WEB_LAYERS.index(target)


def circles(arrows: list[Arrow]) -> list[list[str]]:
    """Strongly connected components of more than one app (Tarjan)."""
    edges: dict[str, list[str]] = defaultdict(list)
    for arrow in arrows:
        edges[arrow.source].append(arrow.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(app: str) -> None:
        index[app] = low[app] = len(index)
        stack.append(app)
        for nxt in edges[app]:
            if nxt not in index:
                visit(nxt)
                low[app] = min(low[app], low[nxt])
            elif nxt in stack:
                low[app] = min(low[app], index[nxt])
        if low[app] == index[app]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == app:
                    break
            if len(component) > 1:
                found.append(sorted(component, key=WEB_LAYERS.index))

    for app in WEB_LAYERS:
        if app not in index:
            visit(app)
    return found


def mermaid(arrows: list[Arrow]) -> str:
    lines = ["```mermaid", "graph TD"]
    for arrow in arrows:
        style = "-.->|UP|" if arrow.upward else "-->"
        lines.append(f"  {arrow.source} {style} {arrow.target}")
    lines.append("```")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mermaid", action="store_true", help="print a mermaid graph")
    parser.add_argument("--imports", action="store_true", help="list the imports of upward arrows")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path.cwd()))
    arrows = app_arrows()
    found = circles(arrows)
    upward = [a for a in arrows if a.upward]
    if args.mermaid:
        print(mermaid(arrows))
    else:
        for arrow in arrows:
            mark = "  UP" if arrow.upward else ""
            print(f"{arrow.source:>13} -> {arrow.target:<13} {len(arrow.imports):3d} imports{mark}")
            if args.imports and arrow.upward:
                for importer, imported in arrow.imports:
                    print(f"{'':17}{importer} -> {imported}")
        print(f"arrows: {len(arrows)}, upward: {len(upward)} "
              f"({sum(len(a.imports) for a in upward)} imports), circles: "
              + ("; ".join(" ".join(c) for c in found) or "none"))
    return 1 if upward or found else 0


if __name__ == "__main__":
    sys.exit(main())
