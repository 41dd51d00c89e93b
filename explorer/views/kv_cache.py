"""KV cache views: what the cache holds after each pass of a greedy decoding, what each pass computes with the cache
and without it (counted, exact), and each pass's measured time both ways (medians of repeated runs); each of the
last two with the sentence it supports (``caption``), computed from the trace. One measurement
(``explorer.kv_cache`` to ``measured`` steps, a gateway job) serves every value of the page's Steps slider: a view
shows its first ``steps`` steps (each pass reads only what came before it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer import gateway
from explorer.compute.kv_cache import attention_scores, kib, measured_order, run_totals, speedup, spread
from explorer.data.kv_cache import KVCacheTrace
from explorer.render.kv_cache import cache_size_figure, pass_times_figure, pass_work_figure
from explorer.render.style import FigureInfo
from explorer.views import Builder, builder

MEASURED_STEPS = 32  # the decoding pages' Steps slider's maximum: one measurement for every position of it


@dataclass(frozen=True)
class CacheSize:
    """The bytes each cache holds after the prefill and each of the first ``steps`` steps."""

    model: str
    prompt: str
    steps: int = 8
    measured: int = MEASURED_STEPS

    title = "KV cache size"

    @classmethod
    def for_result(cls, trace: KVCacheTrace):
        return cls(trace.model_name, trace.prompt, trace.steps, trace.steps)

    def result(self, progress=None) -> KVCacheTrace:
        """The measurement to ``measured`` steps, cut to ``steps``."""
        measured = gateway.run("kv cache", self.model, self.prompt, max(self.measured, self.steps), progress=progress)
        return measured.first(min(self.steps, measured.steps))

    def info(self, trace: KVCacheTrace) -> FigureInfo:
        return FigureInfo(self.title, model=self.model, text=self.prompt, where=(f"{trace.steps} steps",))

    def figure(self, trace: KVCacheTrace) -> Builder:
        grouped = trace.grouping_saving > 1
        sizes = {stack.stack: stack.total_bytes for stack in trace.stacks}
        ungrouped = trace.ungrouped_bytes if grouped else None
        return builder(cache_size_figure, sizes, trace.decoder.tokens.max(axis=1), ungrouped, info=self.info(trace))


@dataclass(frozen=True)
class PassWork(CacheSize):
    """What each pass computes with the cache and without it, counted: attention scores, positions run."""

    title = "What each pass computes, with the KV cache and without"

    def figure(self, trace: KVCacheTrace) -> Builder:
        scores = attention_scores(trace)
        return builder(pass_work_figure, *scores, trace.cached_reads, trace.uncached_reads, info=self.info(trace))

    def caption(self, trace: KVCacheTrace) -> str:
        return work_sentence(trace)


@dataclass(frozen=True)
class PassTimes(CacheSize):
    """Each pass's measured time with the cache and without it: the median of the timed runs, their range."""

    title = "Each pass's measured time, with the KV cache and without"

    def figure(self, trace: KVCacheTrace) -> Builder:
        times = (spread(trace.cached_times), spread(trace.uncached_times))
        reads = (trace.cached_reads, trace.uncached_reads)
        runs = len(trace.cached_times)
        return builder(pass_times_figure, *times, *reads, runs=runs, info=self.info(trace))

    def caption(self, trace: KVCacheTrace) -> str:
        return time_sentence(trace)


def work_sentence(trace: KVCacheTrace) -> str:
    """What the counts show: how much more the decoding runs and computes without the cache (exact)."""
    scores = [int(counts.sum()) for counts in attention_scores(trace)]
    reads = [int(trace.cached_reads.sum()), int(trace.uncached_reads.sum())]
    passes = f"the prefill and {trace.steps} step{'s' if trace.steps > 1 else ''}"
    if reads[1] == reads[0]:
        return f"Counted: {passes} run {reads[0]:,} positions and compute {scores[0]:,} attention scores either way."
    same = (
        f" The prefill is the same pass both ways ({int(attention_scores(trace)[0][0]):,} scores); each step then "
        "runs one position with the cache and the whole prefix without it."
        if trace.cached_reads[0] == trace.uncached_reads[0] and (trace.cached_reads[1:] == 1).all()
        else ""
    )
    return (
        f"Counted, not timed: without the cache {passes} run {reads[1]:,} positions through the decoder instead of "
        f"{reads[0]:,} ({reads[1] / reads[0]:.1f}×) and compute {scores[1]:,} attention scores instead of "
        f"{scores[0]:,} ({scores[1] / scores[0]:.1f}×).{same}"
    )


def time_sentence(trace: KVCacheTrace) -> str:
    """What the timed runs show, and only that: a speed-up only when every run without the cache took longer."""
    with_cache, without = (1000 * totals for totals in run_totals(trace))
    runs = len(with_cache)
    medians = (
        f"Measured here over {runs} runs: the whole decoding took {np.median(with_cache):.1f} ms with the cache and "
        f"{np.median(without):.1f} ms without (medians)"
    )
    order = measured_order(trace)
    if order > 0:
        return f"{medians}, {speedup(trace):.1f}× the time without it; every run without the cache took longer."
    ranges = (
        f"runs {with_cache.min():.1f}–{with_cache.max():.1f} ms with, {without.min():.1f}–{without.max():.1f} ms "
        "without"
    )
    if order < 0:
        return f"{medians}: every run with the cache took longer here ({ranges}), though it computes less."
    return f"{medians}; the runs overlap ({ranges}), so these times show no speed-up either way."


def summary(trace: KVCacheTrace) -> str:
    scores = [int(counts.sum()) for counts in attention_scores(trace)]
    return (
        f"KVCacheTrace: {trace.model_name}, a prefill and {trace.steps} steps; the cache ends at "
        f"{kib(int(trace.total_bytes[-1]))} ({kib(trace.bytes_per_token)} per token, {trace.dtype}); "
        f"{scores[1]:,} attention scores without it against {scores[0]:,} with it (counted); largest logit "
        f"difference {float(trace.logit_difference.max()):.1e}"
    )
