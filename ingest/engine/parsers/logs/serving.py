"""Serving engines' KV-cache lines (vLLM v0/v1, SGLang, TGI and wrappers that relay them).

Four kinds of evidence, all about the same root cause (the KV cache does not fit):
* refusals: the engine computed its KV budget and stopped, or its pool ran dry with nothing
  left to preempt (`KVCacheInsufficient`, an error, with the numbers it printed and a one-line
  `summary`); vLLM, SGLang, TGI, LMDeploy (TurboMind and PyTorch engine), TensorRT-LLM;
* context cut to fit: the engine started, but shortened the longest sequence it serves to what
  the cache holds (`KVCacheContextReduced`: TurboMind's session_len, TensorRT-LLM's
  maxSequenceLen, vLLM's opt-in auto-fit);
* run-time pressure: vLLM preempting sequence groups (log line or the Prometheus counter),
  SGLang retracting requests, a request the whole cache can never hold, llama.cpp finding no
  free KV cells (`KVCachePreemption`, `KVCacheRetract`, `KVCacheFull`, warnings);
* sizing facts and periodic stats (`KVCacheMemory`, `KVCachePool`, `KVCacheBlocks`,
  `KVCacheConcurrency`, `ServingStats`): plain numbers; the rules decide what is too small
  or too full, so teams can tune the thresholds.

Patterns are fixed (ours), searched once per line, with no nested quantifiers.
"""
from __future__ import annotations

import re
from ingest.engine.parsers.logs.cuda import Hit



# --- start-up refusals --------------------------------------------------------------------------
# (variant, trigger): a trigger is a fixed substring the engine prints only when it gives up.
_REFUSALS = (
    ("no_memory", "No available memory for the cache blocks"),
    ("needed_gt_available", "larger than the available KV cache memory"),
    ("needed_gt_available", "To serve at least one request with the model"),   # v1; also "models's"
    ("max_len_gt_cache", "larger than the maximum number of tokens that can be stored in KV cache"),
    ("mem_fraction_static", "Please try to increase --mem-fraction-static"),
    ("mem_fraction_static", "Not enough memory for KV cache"),
    ("decode_oom", "Decode out of memory. Try to lower your batch size"),        # SGLang gave up retracting
    ("prefill_oom", "Prefill out of memory. Try to lower your batch size"),
)
# Refusals whose wording varies: (variant, pattern). Bounded, anchored on fixed words.
_REFUSAL_PATTERNS = (
    # SGLang's token allocator, old ("Prefill/Decode out of memory") and new ("Out of memory") wording;
    # capitalised so "CUDA out of memory. Try ..." from other tools does not count
    ("token_pool_oom", re.compile(r"\b(Prefill|Decode|Out) of memory\. Try to lower your batch size")),
    # SGLang retract_decode with a single request left (also "in SWA mode")
    ("kv_pool_exhausted", re.compile(r"No space left for only one request")),
    # SGLang's request-to-token pool (one KV index row per running request): "alloc_req_slots runs out
    # of memory. Please set a smaller number for `--max-running-requests`"
    ("req_slots_exhausted", re.compile(r"\balloc_req_slots runs out of memory\b")),
    # TensorRT-LLM C++ runtime and PyTorch backend
    ("seq_does_not_fit", re.compile(r"maxTokensInPagedKvCache(?: \(\d+\))? must be large enough|"
                                    r"Impossible to fit in any sequence in kvCache")),
    # LMDeploy's PyTorch engine ("No enough gpu/host memory for kv cache"), nano-vllm-style engines,
    # SGLang's newer "Not enough memory to allocate KV cache"; not LMCache's "Failed to allocate"
    # vLLM's KV-cache checks named in a traceback cut before their message (they raise only that error)
    ("no_memory", re.compile(r"\b(?:raise_if_cache_size_invalid|check_enough_kv_cache_memory)\b")),
    ("no_kv_memory", re.compile(r"\b(?:No|Not) enough (?:\w{1,6} )?memory (?:for|to allocate) (?:the )?kv[ _-]?cache\b",
                                re.I)),
    # SGLang's "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.88"
    ("no_kv_memory", re.compile(r"\bno (?:\w{1,6} )?memory (?:left )?for (?:the )?kv[ _-]?cache\b", re.I)),
)
_TURBOMIND_NO_BLOCKS = re.compile(r"No enough blocks(?!\s+for `session_len`)")
_TGI_REFUSAL = re.compile(r"Not enough memory to handle (\d+) total tokens with (\d+) prefill tokens")
_TGI_PREFILL = re.compile(r"Not enough memory to handle (\d+) prefill tokens")
_TRT_TOKENS = re.compile(r"maxTokensInPagedKvCache \((\d+)\)")
_SGLANG_ALLOC = re.compile(r"Try to allocate (\d+) tokens")
_MAX_LEN = re.compile(r"max seq len \(?(\d+)\)?")
_CACHE_TOKENS = re.compile(r"stored in KV cache \((\d+)\)")
_NEEDED = re.compile(r"([\d.]{1,40}) GiB KV cach")             # "cach" so a terminal-wrapped line still counts
_AVAILABLE = re.compile(r"available KV cache memory \((-?[\d.]+) GiB\)")
_ESTIMATED = re.compile(r"estimated maximum model length is (\d+)")
_MEM_FRACTION = re.compile(r"mem[_-]fraction[_-]static=(\d{1,3}(?:\.\d{1,6})?)")

# --- context cut to what the cache holds ------------------------------------------------------------
_CONTEXT_REDUCED = (
    ("lmdeploy", re.compile(r"No enough blocks for `session_len` \((\d+)\), `session_len` truncated to (\d+)")),
    ("tensorrt_llm", re.compile(r"(maxAttentionWindow) and maxSequenceLen are too large for at least one sequence "
                                r"to fit in kvCache\. [Tt]hey are reduced to (\d+)")),
    ("vllm", re.compile(r"Auto-fit max_model_len: reduced from (\d+) to (\d+)")),
)

# --- run-time pressure --------------------------------------------------------------------------
_PREEMPT = re.compile(r"(?:Sequence group|[Rr]equest) (\S+) is preempted (?:by|in) PreemptionMode\.(\w+)")
_PREEMPT_TOTAL = re.compile(r"total_(?:num_)?cumulative_preemption(?:_cnt)?=(\d+)")
_PREEMPT_V1 = re.compile(r"^Preempt(?:ing|ed) request (\S+)|preempting (\S+) to free KV blocks|"
                         r"Cannot allocate \d+ tokens for request (\S+) after \d+ preemption attempts")
# one request that can never fit: vLLM v0 ignores it; llama.cpp's server cannot place a batch
_REJECTED = re.compile(r"Input prompt \((\d+) tokens\)(?: \+ lookahead slots \(\d+\))? is too long and exceeds "
                       r"the capacity of block_manager")
_LLAMA_CPP_FULL = re.compile(r"failed to find (?:a memory slot|KV cache slot|free space in the KV cache)"
                             r"(?: for u?batch of size (\d+))?")
# llama.cpp's server gives the request up once halving the batch reached n_batch = 1 (or decode failed
# outright): "failed to decode the batch, n_batch = 1, ret = 1", later "failed to decode the batch: KV cache
# is full - try increasing it via the context size, i = 0, n_batch = 1, ret = 1". Printed only then.
_LLAMA_CPP_GAVE_UP = re.compile(r"failed to decode the batch\b(?:[^\n]{0,200}?n_batch = (\d{1,9}))?(?:, ret = (-?\d{1,9}))?")
# a pasted /metrics scrape: the cumulative counter (v0 and v1 names)
_PROM_PREEMPT = re.compile(r"^vllm:num_preemptions(?:_total)?\{[^}]{0,400}\} ([\d.]+(?:e\+?\d+)?)\s*$")
_RETRACT = re.compile(r"(Decode out of memory happened|KV cache pool is full\. Retract requests\.)")
_RETRACTED = re.compile(r"#retracted_reqs: (\d+)")
_TOKEN_RATIO = re.compile(r"#new_token_ratio: ([\d.]+) -> ([\d.]+)")

# --- sizing facts --------------------------------------------------------------------------------
_KV_MEMORY = (re.compile(r"Available KV cache memory: (-?[\d.]+) ?GiB"),
              re.compile(r"the rest of the memory reserved for KV Cache is (-?[\d.]+) ?GiB"),
              re.compile(r"kv_cache_size=(-?[\d.]+) ?GiB"))
_SGLANG_POOL = (re.compile(r"larger than the profiled value (-?\d+)"),
                re.compile(r"max_total_num_tokens=(-?\d+)"),
                re.compile(r"KV Cache is allocated\.[^#]{0,80}#tokens: (-?\d+)"))
_BLOCKS = re.compile(r"# (?:GPU|cuda|NPU|XPU|HPU|TPU) blocks: (\d+)(?:, # CPU blocks: (\d+))?|"
                     r"\[BlockManager\] max_block_count = (\d+)")   # LMDeploy TurboMind
# vLLM v1; TensorRT-LLM ("Using N tokens in paged KV cache", "Max tokens in paged KV cache: N",
# "Allocated X GiB for max tokens in paged KV cache (N)")
_KV_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens|Using (\d+) tokens in paged KV cache|"
                        r"[Mm]ax tokens in paged KV cache(?:: | \()(\d+)")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")

# --- periodic stats ------------------------------------------------------------------------------
MAX_GLUED = 50   # records read from one line; more is a runaway paste
_VLLM_USAGE = re.compile(r"GPU KV cache usage: ([\d.]+)%")
_VLLM_USAGE_V1 = re.compile(r"(?<!CPU )KV cache usage: ([\d.]+)%")
_VLLM_COUNTS = {"running": re.compile(r"Running: (\d+) reqs"), "waiting": re.compile(r"(?:Waiting|Pending): (\d+) reqs"),
                "swapped": re.compile(r"Swapped: (\d+) reqs")}
_SGLANG_USAGE = (re.compile(r"full token usage: ([\d.]+)"), re.compile(r"(?<!swa )(?<!mamba )token usage: ([\d.]+)"))
_SGLANG_COUNTS = {"running": re.compile(r"#running-req: (\d+)"), "waiting": re.compile(r"#queue-req: (\d+)"),
                  "retracted": re.compile(r"#retracted-req: (\d+)")}

# What a line must contain for classify_serving to match (the line prefilter's words, matched
# case-insensitively; logs.prefilter): keep in step with the patterns above.
SERVING_WORDS = tuple(trigger.lower() for _, trigger in _REFUSALS) + (
    "of memory. try to lower your batch size", "no space left for only one request", "maxtokensinpagedkvcache",
    "impossible to fit in any sequence", "alloc_req_slots runs out", "enough", "memory for the kv", "memory for kv",  # refusal patterns, TurboMind, TGI
    "raise_if_cache_size_invalid", "check_enough_kv_cache_memory",      # vLLM's checks, message cut
    "reduced", "truncated",                                             # _context_reduced
    "preempt", "capacity of block_manager", "failed to find", "decode out of memory", "kv cache pool is full",
    "failed to decode the batch",
    "kv cache usage:", "token usage:",                                  # _stats
    "available kv cache memory", "reserved for kv cache", "kv_cache_size=", "larger than the profiled value",
    "max_total_num_tokens=", "kv cache is allocated", " blocks: ", "max_block_count", "kv cache size:",
    "paged kv cache", "maximum concurrency for",                        # _sizing
)


def classify_serving(body: str) -> Hit | None:
    for check in (_refusal, _context_reduced, _pressure, _stats, _sizing):
        hit = check(body)
        if hit:
            return hit
    return None


def _refusal(body: str) -> Hit | None:
    variant = next((v for v, trigger in _REFUSALS if trigger in body), None) or _refusal_pattern(body)
    tgi = _TGI_REFUSAL.search(body) if variant is None else None
    if variant is None and tgi is None:
        return None
    attrs: dict = {"variant": variant or "tgi_batch_tokens", "engine": "tgi" if tgi else _engine(variant, body)}
    for key, rx, cast in (("max_model_len", _MAX_LEN, int), ("kv_cache_tokens", _CACHE_TOKENS, int),
                          ("needed_gib", _NEEDED, float), ("available_gib", _AVAILABLE, float),
                          ("estimated_max_len", _ESTIMATED, int), ("mem_fraction_static", _MEM_FRACTION, float)):
        m = rx.search(body)
        if m:
            attrs[key] = cast(m.group(1))
    if tgi:
        attrs.update(max_batch_total_tokens=int(tgi.group(1)), prefill_tokens=int(tgi.group(2)))
    for key, rx in (("prefill_tokens", _TGI_PREFILL), ("kv_cache_tokens", _TRT_TOKENS),
                    ("requested_tokens", _SGLANG_ALLOC)):
        if key not in attrs and (m := rx.search(body)):
            attrs[key] = int(m.group(1))
    if variant == "token_pool_oom":
        refusal = _REFUSAL_PATTERNS[0][1].search(body)
        assert refusal is not None  # the pattern that named the variant
        phase = refusal.group(1)
        attrs["phase"] = phase.lower() if phase != "Out" else ""
    attrs["summary"] = _refusal_summary(attrs)
    return Hit("error", "KVCacheInsufficient", attrs, "error")


def _refusal_pattern(body: str) -> str | None:
    """The refusals whose wording varies; TurboMind's bare "No enough blocks" only with its own tag,
    since the phrase is common in unrelated programs."""
    variant = next((v for v, rx in _REFUSAL_PATTERNS if rx.search(body)), None)
    if variant is None and "No enough blocks" in body and ("[TM]" in body or "LlamaBatch" in body) \
            and _TURBOMIND_NO_BLOCKS.search(body):
        variant = "turbomind_no_blocks"
    if variant is None and _TGI_PREFILL.search(body):
        variant = "tgi_prefill_tokens"
    return variant


_ENGINES = {"mem_fraction_static": "sglang", "decode_oom": "sglang", "prefill_oom": "sglang",
            "token_pool_oom": "sglang", "kv_pool_exhausted": "sglang", "req_slots_exhausted": "sglang",
            "seq_does_not_fit": "tensorrt_llm",
            "turbomind_no_blocks": "lmdeploy", "tgi_prefill_tokens": "tgi"}


_ENGINE_NAMES = {"lmdeploy": "LMDeploy TurboMind", "tensorrt_llm": "TensorRT-LLM", "vllm": "vLLM's auto-fit"}


def _engine(variant: str | None, body: str = "") -> str:
    if variant == "no_kv_memory":
        return "lmdeploy" if "No enough" in body else ("sglang" if "mem-fraction-static" in body else "unknown")
    return _ENGINES.get(variant or "", "vllm")


def _refusal_summary(a: dict) -> str:
    """One sentence with the numbers the engine printed (templates cannot branch)."""
    v = a["variant"]
    length = f"max_model_len {a['max_model_len']:,}" if "max_model_len" in a else "max_model_len"
    if v == "max_len_gt_cache":
        room = f"the {a['kv_cache_tokens']:,} tokens" if "kv_cache_tokens" in a else "the tokens"
        return f"{length} is larger than {room} the KV cache can hold, so not even one full-length request fits"
    if v == "needed_gt_available":
        need = f"{a['needed_gib']} GiB of" if "needed_gib" in a else "more"
        have = f"only {a['available_gib']} GiB is available" if "available_gib" in a else "the available memory is smaller"
        text = f"one request at {length} needs {need} KV cache but {have}"
        return text + (f"; the longest that fits is {a['estimated_max_len']:,} tokens" if "estimated_max_len" in a else "")
    if v == "no_memory":
        return "weights, profiled activations and non-torch memory already fill the memory share; nothing is left for KV blocks"
    if v == "mem_fraction_static":
        return "SGLang could not allocate a KV pool inside --mem-fraction-static after loading the weights"
    if v in ("decode_oom", "prefill_oom"):
        return f"SGLang ran out of KV pool tokens during {v.split('_')[0]} and could not retract enough requests"
    if v == "token_pool_oom":
        need = f" {a['requested_tokens']:,} tokens" if "requested_tokens" in a else ""
        return (f"SGLang's KV token pool could not hold{need or ' the next tokens'}"
                f"{(' during ' + a['phase']) if a.get('phase') else ''} even after evicting the prefix cache")
    if v == "kv_pool_exhausted":
        return ("SGLang's KV pool had no free slot left even for its last running request, so retracting "
                "requests could not help and the scheduler stopped")
    if v == "req_slots_exhausted":
        return ("SGLang's request-to-token pool had no free row for the batch's requests: more requests ran "
                "at once than the pool was sized for (--max-running-requests)")
    if v == "seq_does_not_fit":
        room = f" ({a['kv_cache_tokens']:,} tokens)" if "kv_cache_tokens" in a else ""
        return f"TensorRT-LLM's paged KV cache{room} cannot hold one sequence to completion"
    if v == "turbomind_no_blocks":
        return "LMDeploy TurboMind ran out of KV cache blocks for the sequences it had admitted"
    if v == "no_kv_memory":
        return "the engine found no memory left for its KV cache after loading the weights"
    if v == "tgi_prefill_tokens":
        return (f"TGI's warm-up could not fit a prefill batch of {a['prefill_tokens']:,} tokens "
                "(--max-batch-prefill-tokens) with its KV cache")
    if v == "tgi_batch_tokens":
        return (f"the KV cache cannot hold --max-batch-total-tokens {a['max_batch_total_tokens']:,} "
                f"with {a['prefill_tokens']:,} prefill tokens")
    return "the engine refused to start: the KV cache does not fit"


def _context_reduced(body: str) -> Hit | None:
    """The engine started, but cut its longest sequence down to what the KV cache can hold."""
    if "reduced" not in body and "truncated" not in body:
        return None
    for engine, rx in _CONTEXT_REDUCED:
        m = rx.search(body)
        if not m:
            continue
        requested = int(m.group(1)) if m.group(1).isdigit() else None
        reduced = int(m.group(2))
        attrs = {"engine": engine, "requested_len": requested, "reduced_to": reduced,
                 "auto_fit": engine == "vllm"}   # vLLM only does this when asked (max_model_len auto)
        asked = f"from {requested:,} " if requested else ""
        attrs["summary"] = (f"{_ENGINE_NAMES[engine]} cut its maximum sequence length {asked}to {reduced:,} tokens "
                            "because one full-length sequence does not fit in the KV cache")
        return Hit("log", "KVCacheContextReduced", attrs, "" if attrs["auto_fit"] else "warning", float(reduced),
                   "tokens")
    return None


def _pressure(body: str) -> Hit | None:
    m = _PREEMPT.search(body)
    if m or "not enough KV cache space" in body:
        total = _PREEMPT_TOTAL.search(body)
        request, mode = (m.group(1), m.group(2)) if m else ("", "")
        attrs: dict[str, object] = {"request": request, "mode": mode,
                                    "cumulative_preemptions": int(total.group(1)) if total else None, "engine": "vllm"}
        attrs["summary"] = (f"vLLM preempted {('sequence group ' + request) if m else 'a sequence group'}"
                            f"{(' by ' + mode) if m else ''} for lack of KV cache space"
                            + (f" ({attrs['cumulative_preemptions']:,} preemptions so far)" if total else ""))
        return Hit("log", "KVCachePreemption", attrs, "warning", float(total.group(1)) if total else 1.0)
    m = _PREEMPT_V1.search(body)
    if m:
        request = next(g for g in m.groups() if g)
        return Hit("log", "KVCachePreemption", {"request": request, "mode": "", "engine": "vllm",
                                                "cumulative_preemptions": None,
                                                "summary": f"vLLM preempted request {request} to free KV blocks"},
                   "warning", 1.0)
    m = _PROM_PREEMPT.match(body.strip()) if body.startswith("vllm:num_preemptions") else None
    if m and float(m.group(1)) > 0:
        count = int(float(m.group(1)))
        return Hit("log", "KVCachePreemption", {"request": "", "mode": "", "engine": "vllm", "source": "prometheus",
                                                "cumulative_preemptions": count,
                                                "summary": f"vLLM's vllm:num_preemptions counter reads {count:,}"},
                   "warning", float(count))
    m = _REJECTED.search(body)
    if m:
        tokens = int(m.group(1))
        return Hit("log", "KVCacheFull", {"engine": "vllm", "prompt_tokens": tokens, "summary":
                                          f"vLLM ignored a {tokens:,}-token prompt: it exceeds what the whole KV "
                                          "cache (block manager) can hold"}, "warning", float(tokens), "tokens")
    m = _LLAMA_CPP_GAVE_UP.search(body) if "failed to decode the batch" in body else None
    if m:
        n_batch, ret = (int(m.group(1)) if m.group(1) else None), (int(m.group(2)) if m.group(2) else None)
        at = f" at n_batch = {n_batch}" if n_batch is not None else ""
        return Hit("error", "KVCacheDecodeFailed", {"engine": "llama.cpp", "n_batch": n_batch, "ret": ret,
                                                    "summary": f"llama.cpp gave the request up: decode failed{at}"
                                                               + (f" (ret = {ret})" if ret is not None else "")},
                   "error", float(n_batch if n_batch is not None else 1))
    m = _LLAMA_CPP_FULL.search(body)
    if m:
        size = f" for a batch of {int(m.group(1)):,} tokens" if m.group(1) else ""
        batch = int(m.group(1)) if m.group(1) else None
        return Hit("log", "KVCacheFull", {"engine": "llama.cpp", "batch_tokens": batch,
                                          "summary": f"llama.cpp found no free KV cache cells{size} (context full)"},
                   "warning", float(batch or 1))
    m = _RETRACT.search(body)
    if m:
        n = _RETRACTED.search(body)
        ratio = _TOKEN_RATIO.search(body)
        attrs = {"engine": "sglang", "event": m.group(1), "retracted": int(n.group(1)) if n else None,
                 "new_token_ratio_before": float(ratio.group(1)) if ratio else None,
                 "new_token_ratio_after": float(ratio.group(2)) if ratio else None}
        attrs["summary"] = (f"SGLang's KV pool was full and it retracted {attrs['retracted'] or 'some'} running request(s)"
                            + (f" (new_token_ratio {ratio.group(1)} -> {ratio.group(2)})" if ratio else ""))
        return Hit("log", "KVCacheRetract", attrs, "warning", float(n.group(1)) if n else 1.0)
    return None


def _stats(body: str) -> Hit | None:
    if "KV cache usage:" in body and " reqs" in body:
        records = [r for r in (_vllm_record(seg) for seg in _vllm_segments(body)) if r]
        if records:
            # several records glued on one line (lost newlines): keep the one under most pressure
            usage, counts = max(records, key=lambda r: (_waiting(r[1]) > 0, r[0]))
            hit = _stats_hit("vllm", usage, counts)
            if len(records) > 1:
                hit.attrs["glued_records"] = len(records)
            return hit
    if "token usage:" in body and "#queue-req" in body:
        m = _SGLANG_USAGE[0].search(body) or _SGLANG_USAGE[1].search(body)
        if m:
            return _stats_hit("sglang", float(m.group(1)), {k: rx.search(body) for k, rx in _SGLANG_COUNTS.items()})
    return None


def _vllm_segments(body: str) -> list[str]:
    """One piece per stats record: each starts at "Avg prompt throughput" (v0 and v1)."""
    starts = [m.start() for m in re.finditer("Avg prompt throughput", body)][:MAX_GLUED] or [0]
    starts[0] = 0
    return [body[a:b] for a, b in zip(starts, starts[1:] + [len(body)])]


def _vllm_record(segment: str) -> tuple[float, dict] | None:
    m = _VLLM_USAGE.search(segment) or _VLLM_USAGE_V1.search(segment)
    if not m:
        return None
    return float(m.group(1)) / 100.0, {k: rx.search(segment) for k, rx in _VLLM_COUNTS.items()}


def _waiting(counts: dict) -> int:
    return sum(int(m.group(1)) for k, m in counts.items() if m and k in ("waiting", "swapped"))


def _stats_hit(engine: str, usage: float, counts: dict) -> Hit:
    attrs: dict = {"engine": engine, "kv_usage": round(usage, 4)}
    attrs.update({k: int(m.group(1)) for k, m in counts.items() if m})
    return Hit("sample", "ServingStats", attrs, "", usage, "ratio")


def _sizing(body: str) -> Hit | None:
    for rx in _KV_MEMORY:
        m = rx.search(body)
        if m:
            gib = float(m.group(1))
            return Hit("log", "KVCacheMemory", {"kv_cache_gib": gib, "engine": "vllm",
                                                "summary": f"{gib} GiB is left for the KV cache after profiling"},
                       "", gib, "GiB")
    for rx in _SGLANG_POOL:
        m = rx.search(body)
        if m:
            tokens = int(m.group(1))
            return Hit("log", "KVCachePool", {"kv_cache_tokens": tokens, "engine": "sglang",
                                              "summary": f"the profiled KV pool is {tokens:,} tokens"},
                       "", float(tokens), "tokens")
    m = _BLOCKS.search(body)
    if m:
        blocks = int(m.group(1) or m.group(3))
        attrs = {"gpu_blocks": blocks, "summary": f"{blocks:,} GPU blocks fit in the KV cache"}
        if m.group(2) is not None:
            attrs["cpu_blocks"] = int(m.group(2))
        return Hit("log", "KVCacheBlocks", attrs, "", float(blocks), "blocks")
    m = _KV_TOKENS.search(body)
    if m:
        tokens = int(next(g for g in m.groups() if g).replace(",", ""))
        return Hit("log", "KVCacheSize", {"kv_cache_tokens": tokens}, "", float(tokens), "tokens")
    m = _CONCURRENCY.search(body)
    if m:
        max_model_len, concurrency = int(m.group(1).replace(",", "")), float(m.group(2))
        attrs = {"max_model_len": max_model_len, "concurrency": concurrency,
                 "summary": f"the KV cache holds {concurrency}x of one request at max_model_len {max_model_len:,}"}
        return Hit("log", "KVCacheConcurrency", attrs, "", concurrency, "x")
    return None
