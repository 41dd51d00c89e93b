"""The KV cache's tables: what each cache holds, and what a decoding costs with the cache and without it.

Rows are plain dicts (a page shows them as a table, a notebook as a DataFrame), computed from a ``KVCacheTrace``
alone. Counts (positions run, attention scores computed) are exact; times are the trace's measurements, shown
in milliseconds as medians over its timed runs.
"""

from __future__ import annotations

import numpy as np

from explorer.data.attention import STACK_LABELS
from explorer.data.kv_cache import KVCacheTrace

SHAPE_AXES = "layer × (keys, values) × KV head × token × head_dim"


def pass_labels(steps: int) -> list[str]:
    """The passes' names: the prefill, then "step 1" … "step N"."""
    return ["prefill", *(f"step {step}" for step in range(1, steps + 1))]


def kib(nbytes: float) -> str:
    """Bytes as a person reads them: "7.5 KiB", "1.2 MiB"."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:,.1f} {unit}"
    return f"{int(nbytes):,} B"


def cache_rows(trace: KVCacheTrace) -> list[dict]:
    """One row per cache after the last pass: its shape (``SHAPE_AXES``), bytes, bytes per token and what it would
    take with a key and a value per query head."""
    rows = []
    for stack in trace.stacks:
        nbytes = int(stack.total_bytes[-1])
        ungrouped = int((stack.nbytes[-1].sum(axis=1) * trace.num_heads // stack.kv_heads).sum())
        rows.append(
            {
                "cache": STACK_LABELS.get(stack.stack, stack.stack),
                "shape": " × ".join(str(size) for size in stack.shape()),
                "bytes": kib(nbytes),
                "per token": kib(nbytes / np.mean(stack.tokens[-1])),
                f"with {trace.num_heads} KV heads (one per query head)": kib(ungrouped),
            }
        )
    return rows


def attention_scores(trace: KVCacheTrace) -> tuple[np.ndarray, np.ndarray]:
    """[pass] int, with the cache and without: the query·key scores each pass computes over every decoder layer
    and query head, queries fed × keys each is scored against (the whole query × key matrix, as eager attention
    computes it: the shape of the weights the model returns). Keys: with the cache, those cached before the pass
    and the ones it feeds (a sliding window's layer then trims its cache back to the window); without it, the whole
    prefix; an encoder-decoder's cross-attention adds the encoder's tokens as keys. The encoder itself, run once
    either way, is not counted."""
    heads, decoder = trace.num_heads, trace.decoder
    cross = sum(stack.tokens.sum(axis=1) for stack in trace.stacks[1:])  # [pass] keys over the cross layers
    held_before = np.vstack([np.zeros_like(decoder.tokens[:1]), decoder.tokens[:-1]])  # [pass, layer]
    keys = (held_before + trace.cached_reads[:, None]).sum(axis=1)
    with_cache = heads * trace.cached_reads * (keys + cross)
    without = heads * trace.uncached_reads * (decoder.num_layers * trace.uncached_reads + cross)
    return with_cache.astype(np.int64), without.astype(np.int64)


def spread(times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[run, pass] seconds → [pass] (median, fastest, slowest) over the runs."""
    return np.median(times, axis=0), times.min(axis=0), times.max(axis=0)


def run_totals(trace: KVCacheTrace) -> tuple[np.ndarray, np.ndarray]:
    """[run] seconds of the whole decoding in each timed run, with the cache and without."""
    return trace.cached_times.sum(axis=1), trace.uncached_times.sum(axis=1)


def measured_order(trace: KVCacheTrace) -> int:
    """1 when every timed run without the cache took longer than every run with it, -1 when every run with it took
    longer, 0 when the runs overlap (the times then show no difference either way)."""
    with_cache, without = run_totals(trace)
    if without.min() > with_cache.max():
        return 1
    return -1 if with_cache.min() > without.max() else 0


def cost_rows(trace: KVCacheTrace) -> list[dict]:
    """With the cache and without: positions run through the decoder and attention scores computed (counted), then
    the measured times: the prefill's and a step's median (the mean over the steps of each step's median), and the
    whole decoding's median over the runs with its fastest and slowest run."""
    rows = []
    scores = attention_scores(trace)
    totals = run_totals(trace)
    for index, (label, reads, times) in enumerate(
        (
            ("with the KV cache", trace.cached_reads, trace.cached_times),
            ("without (each pass runs the whole prefix)", trace.uncached_reads, trace.uncached_times),
        )
    ):
        median = np.median(times, axis=0)
        total = totals[index]
        rows.append(
            {
                "decoding": label,
                "positions run": int(reads.sum()),
                "attention scores": f"{int(scores[index].sum()):,}",
                "prefill (ms)": f"{1000 * float(median[0]):.2f}",
                "mean step (ms)": f"{1000 * float(np.mean(median[1:])):.2f}" if len(median) > 1 else "",
                f"total (ms, median of {len(total)} runs)": f"{1000 * float(np.median(total)):.1f}",
                "fastest–slowest run (ms)": f"{1000 * float(total.min()):.1f}–{1000 * float(total.max()):.1f}",
            }
        )
    return rows


def speedup(trace: KVCacheTrace) -> float:
    """How many times longer the whole decoding took without the cache than with it: the ratio of the median run
    totals (measured; ``measured_order`` says whether the runs show a difference at all)."""
    with_cache, without = run_totals(trace)
    return float(np.median(without) / np.median(with_cache))
