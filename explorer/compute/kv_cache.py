"""The KV cache's tables: what each cache holds, and what a decoding costs with the cache and without it.

Rows are plain dicts (a page shows them as a table, a notebook as a DataFrame), computed from a ``KVCacheTrace``
alone; times are the trace's measurements, in milliseconds.
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


def cost_rows(trace: KVCacheTrace) -> list[dict]:
    """With the cache and without: positions run through the decoder, the prefill's time, a step's (the mean of
    the one-token steps) and the whole decoding's."""
    rows = []
    for label, reads, seconds in (
        ("with the KV cache", trace.cached_reads, trace.cached_seconds),
        ("without (each pass runs the whole prefix)", trace.uncached_reads, trace.uncached_seconds),
    ):
        rows.append(
            {
                "decoding": label,
                "positions run": int(reads.sum()),
                "prefill (ms)": f"{1000 * float(seconds[0]):.2f}",
                "mean step (ms)": f"{1000 * float(np.mean(seconds[1:])):.2f}" if len(seconds) > 1 else "",
                "total (ms)": f"{1000 * float(seconds.sum()):.1f}",
            }
        )
    return rows


def speedup(trace: KVCacheTrace) -> float:
    """How many times longer the whole decoding took without the cache than with it (measured)."""
    return float(trace.uncached_seconds.sum() / trace.cached_seconds.sum())
