"""Rule files on disk: folders expanded to their YAML files, each read bounded and as UTF-8."""
from __future__ import annotations

from pathlib import Path

from rules.engine import limits
from rules.engine.errors import RuleError

RULE_SUFFIXES = (".yaml", ".yml")


def read_rule_file(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(limits.MAX_RULE_FILE_BYTES + 1)
    except OSError as e:
        raise RuleError(str(path), 1, 1, f"cannot read rule file: {e.strerror or e}") from None
    if len(data) > limits.MAX_RULE_FILE_BYTES:
        raise RuleError(str(path), 1, 1, f"rule file is larger than {limits.MAX_RULE_FILE_BYTES:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RuleError(str(path), 1, 1, f"rule file is not UTF-8 text (byte {e.start})") from None


def rule_files(paths) -> list[Path]:
    """Files as given, folders expanded to their *.yaml / *.yml files (sorted)."""
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.iterdir() if f.suffix in RULE_SUFFIXES and f.is_file()))
        else:
            out.append(p)
    return out
