"""vLLM's own KV-cache check, redone from the facts it prints when its message is missing.

vLLM (v0) logs its engine config ("Initializing an LLM engine ... max_seq_len=4096, ...") and then
"# GPU blocks: 229, # CPU blocks: 512". Right after, it raises if the blocks cannot hold one
sequence of max_seq_len tokens (block_size tokens per block, 16 unless the config says otherwise).
A log cut before that ValueError (an excerpt, a wrapped traceback) still holds the verdict in those
two numbers: `judge_blocks` turns the blocks line into the refusal the engine was about to print.
"""
from __future__ import annotations

import re

from ingest.engine.parsers.logs.lines import LineHit

DEFAULT_BLOCK_SIZE = 16      # vLLM's CacheConfig default
_MAX_LEN = re.compile(r"\bmax_(?:seq|model)_len=(\d{1,9})\b")
_BLOCK_SIZE = re.compile(r"\bblock_size=(\d{1,6})\b")


def engine_limits(body: str) -> tuple[int, int | None] | None:
    """(max_seq_len, block_size or None) of an engine-config line, else None."""
    m = _MAX_LEN.search(body) if "_len=" in body else None
    if m is None:
        return None
    size = _BLOCK_SIZE.search(body)
    return int(m.group(1)), int(size.group(1)) if size else None


def judge_blocks(finding: LineHit, limits: tuple[int, int | None]) -> LineHit:
    """A vLLM "# GPU blocks: N" line that cannot hold one max_seq_len sequence is the refusal."""
    max_len, block_size = limits
    blocks = int(finding.attrs["gpu_blocks"])
    size = block_size or DEFAULT_BLOCK_SIZE
    tokens = blocks * size
    if blocks <= 0 or tokens >= max_len:   # zero blocks: the no-budget match already decides
        return finding
    assumed = "" if block_size else f" (block_size {size}, vLLM's default)"
    attrs = dict(finding.attrs) | {
        "variant": "max_len_gt_cache", "engine": "vllm", "max_model_len": max_len, "kv_cache_tokens": tokens,
        "block_size": size, "derived": True,
        "summary": (f"{blocks:,} GPU blocks x {size} tokens{assumed} = {tokens:,} tokens of KV cache, less than "
                    f"max_seq_len {max_len:,}: not even one full-length request fits, which vLLM refuses")}
    return LineHit("error", "KVCacheInsufficient", attrs, "error", float(tokens), "tokens")
