"""Sampling views: the next-token distribution after temperature, top-k, top-p and min-p, from logits computed
once per (model, prompt): a move of any of those sliders never runs the model again."""

from __future__ import annotations

from dataclasses import dataclass

from explorer import gateway
from explorer.compute.sampling import distribution_from_logits
from explorer.data import NextTokenLogits, TokenDistribution
from explorer.render.sampling import distribution_panels, stages_figure, stages_rows, temperature_figure
from explorer.render.style import FigureInfo, snippet
from explorer.views import Builder, builder


@dataclass(frozen=True)
class Distribution:
    """The distribution the sampler draws from: the chapter's two linked panels (``figure``) and the pipeline
    stage by stage (``stages_figure``)."""

    model: str
    prompt: str
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    band: tuple[float, float] | None = None  # the panels' highlighted band, log₁₀ p (a drag's, from the keyboard)

    @property
    def settings_text(self) -> str:
        return f"T = {self.temperature:g}, top-k = {self.top_k}, top-p = {self.top_p:g}, min-p = {self.min_p:g}"

    @classmethod
    def for_result(cls, result: TokenDistribution | NextTokenLogits) -> Distribution:
        """The page's view of a distribution (its settings; the prompt is not kept) or of logits (as the page
        opens: every stage off)."""
        if isinstance(result, NextTokenLogits):
            return cls(result.model_name, result.prompt)
        return cls("", "", result.temperature, result.top_k, result.top_p, result.min_p)

    def logits(self, progress=None) -> NextTokenLogits:
        return gateway.run("logits", self.model, self.prompt, progress=progress)

    def result(self, progress=None) -> TokenDistribution:
        return self.distribution(self.logits(progress))

    def distribution(self, logits: NextTokenLogits) -> TokenDistribution:
        """The distribution these settings make of ``logits`` (no model run)."""
        return distribution_from_logits(
            logits.logits,
            logits.tokens,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            min_p=self.min_p,
        )

    def info(self, result=None) -> FigureInfo:
        return FigureInfo("Next-token distribution", model=self.model, text=self.prompt, where=(self.settings_text,))

    def figure(self, result: TokenDistribution) -> Builder:
        return builder(distribution_panels, result, info=self.info(), band=self.band)

    def caption(self, result: TokenDistribution) -> str:
        kept = int(result.kept[result.stages[-1][0]].sum())
        total = len(result.tokens)
        return f"After the pipeline ({self.settings_text}), the sampler can draw {kept:,} of {total:,} tokens."


@dataclass(frozen=True)
class Stages(Distribution):
    """The likeliest tokens' probability after each stage of the pipeline."""

    def info(self, result=None) -> FigureInfo:
        return FigureInfo("Sampling pipeline", model=self.model, text=self.prompt, where=(self.settings_text,))

    def figure(self, result: TokenDistribution) -> Builder:
        return builder(stages_figure, result, info=self.info())

    def rows(self, result: TokenDistribution) -> list[dict]:
        """The figure as a table: one row per stage (tokens still possible, mass removed, the likeliest token)."""
        return stages_rows(result)


@dataclass(frozen=True)
class Temperatures:
    """The likeliest tokens' probabilities at T = 0.5, 1, 2 and the chosen temperature, side by side."""

    model: str
    prompt: str
    temperature: float = 1.0

    def result(self, progress=None) -> NextTokenLogits:
        return gateway.run("logits", self.model, self.prompt, progress=progress)

    def info(self, result=None) -> FigureInfo:
        return FigureInfo("Temperature", model=self.model, text=self.prompt, where=("T = 0.5, 1, 2",))

    def figure(self, result: NextTokenLogits) -> Builder:
        return builder(temperature_figure, result.logits, result.tokens, current=self.temperature, info=self.info())


def summary(distribution: TokenDistribution) -> str:
    final = distribution.final
    best = int(final.argmax())
    return (
        f"TokenDistribution: {len(final):,} tokens, stages {' → '.join(name for name, _ in distribution.stages)}; "
        f"{int((final > 0).sum()):,} still possible; most likely {distribution.tokens[best]!r} "
        f"({100 * float(final[best]):.1f}%)"
    )


def logits_summary(logits: NextTokenLogits) -> str:
    untouched = distribution_from_logits(logits.logits, logits.tokens)  # the page as it opens: every stage off
    best = int(logits.logits.argmax())
    return (
        f"NextTokenLogits: {logits.model_name}, after “{snippet(logits.prompt, 40)}”: {len(logits.logits):,} logits; "
        f"most likely {logits.tokens[best]!r} ({100 * float(untouched.final[best]):.1f}%)"
    )
