"""Where the shared corpus lies: `../shared/corpus` beside the project root, or $TRACEDOC_CORPUS."""
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("TRACEDOC_CORPUS", ROOT.parent / "shared" / "corpus")).resolve()


def corpus(*parts: str) -> Path:
    return CORPUS.joinpath(*parts)
