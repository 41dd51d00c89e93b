"""KV cache views: what the cache holds after each pass of a greedy decoding, and each pass's time with the cache
and without it. One measurement (``explorer.kv_cache`` to ``measured`` steps, a gateway job) serves every value of
the page's Steps slider: a view shows its first ``steps`` steps (each pass reads only what came before it)."""

from __future__ import annotations

from dataclasses import dataclass

from explorer import gateway
from explorer.compute.kv_cache import kib, speedup
from explorer.data.kv_cache import KVCacheTrace
from explorer.render.kv_cache import cache_size_figure, pass_times_figure
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
class PassTimes(CacheSize):
    """Each pass's measured time with the cache and without it."""

    title = "Each pass with the KV cache and without"

    def figure(self, trace: KVCacheTrace) -> Builder:
        times = (trace.cached_seconds, trace.uncached_seconds)
        return builder(pass_times_figure, *times, trace.cached_reads, trace.uncached_reads, info=self.info(trace))


def summary(trace: KVCacheTrace) -> str:
    return (
        f"KVCacheTrace: {trace.model_name}, a prefill and {trace.steps} steps; the cache ends at "
        f"{kib(int(trace.total_bytes[-1]))} ({kib(trace.bytes_per_token)} per token, {trace.dtype}); "
        f"{speedup(trace):.1f}x slower without it (measured); largest logit difference "
        f"{float(trace.logit_difference.max()):.1e}"
    )
