"""Head type views: the weights of the head with the best probe score, on a text of random tokens repeated
twice (the second copy below a dashed line)."""

from __future__ import annotations

from dataclasses import dataclass

from explorer import gateway
from explorer.compute.probes import PATTERNS, SCORE_NAMES, STANDS_OUT_RATIO, STANDS_OUT_SCORE, stands_out
from explorer.data.probes import HeadProbes
from explorer.render.heatmap import masked_weights, weights_heatmap
from explorer.render.style import FigureInfo
from explorer.views import Builder, builder


@dataclass(frozen=True)
class BestHead:
    """The head with the best ``score`` (a key of ``SCORE_NAMES``) on ``n`` random tokens drawn with ``seed``."""

    model: str
    n: int
    seed: int
    score: str = "induction"

    @classmethod
    def for_result(cls, probes: HeadProbes) -> BestHead:
        return cls(probes.model_name, probes.n, probes.seed)

    def result(self, progress=None) -> HeadProbes:
        return gateway.run("probes", self.model, self.n, self.seed, progress=progress)

    def info(self, probes: HeadProbes) -> FigureInfo:
        layer, head = probes.best(self.score)
        return FigureInfo(
            "Attention weights",
            model=self.model,
            text=f"{self.n} random tokens, twice (seed {self.seed})",
            where=(f"layer {layer}", f"head {head}", *_best_where(probes, self.score)),
        )

    def figure(self, probes: HeadProbes) -> Builder:
        layer, head = probes.best(self.score)
        stack = probes.capture.main
        return builder(
            weights_heatmap,
            masked_weights(stack, layer, head),
            stack.query_tokens,
            stack.key_tokens,
            color_max=None,  # stretched to the head's largest weight: a weak stripe still shows
            info=self.info(probes),
            boundaries=(probes.offset + probes.n,),  # where the second copy starts: a dashed line
        )


def _best_where(probes: HeadProbes, score: str) -> tuple[str, ...]:
    """The title's words for the head drawn: its score, and that no head stands out where none does."""
    name, value = SCORE_NAMES[score].lower(), best_score(probes, score)
    if stands_out(value, probes.uniform[score]):
        return (f"best {name} score {value:.3f}",)
    return (f"highest {name} score {value:.3f}", "no head stands out")


def best_score(probes: HeadProbes, score: str) -> float:
    return float(probes.scores[score][probes.best(score)])


def _against(probes: HeadProbes, score: str) -> str:
    """The best head's score beside the even-spread baseline, in words, with their ratio."""
    value, uniform = best_score(probes, score), probes.uniform[score]
    ratio = f" ({value / uniform:.1f}×)" if uniform > 0 else ""
    return f"{value:.3f} against {uniform:.3f} for a head spreading its weight evenly{ratio}"


STANDING_OUT = f"at least {STANDS_OUT_SCORE} and {STANDS_OUT_RATIO:g}× the even spread"


def best_caption(probes: HeadProbes, score: str) -> str:
    """The sentence under the figure: whether the drawn head stands out as a ``score`` head, its score beside the
    even-spread baseline, and where its pattern lies in the figure only when it stands out."""
    layer, head = probes.best(score)
    name = SCORE_NAMES[score].lower()
    kind = f"{'an' if name[0] in 'aeiou' else 'a'} {name} head"
    if stands_out(best_score(probes, score), probes.uniform[score]):
        return (
            f"Layer {layer}, head {head} stands out as {kind} ({STANDING_OUT}): its score is "
            f"{_against(probes, score)}. In the figure: {PATTERNS[score]}."
        )
    return (
        f"No head stands out as {kind} on this probe ({STANDING_OUT}): the highest score, layer {layer}, head "
        f"{head}'s, is {_against(probes, score)}. The figure shows that head's weights."
    )


def types_caption(probes: HeadProbes) -> str:
    """One line over every score the page names: which types have a head that stands out, and which have none
    (each with its best score beside the even-spread baseline)."""
    found, missing = [], []
    for score, name in SCORE_NAMES.items():
        layer, head = probes.best(score)
        value, uniform = best_score(probes, score), probes.uniform[score]
        if stands_out(value, uniform):
            found.append(f"{name.lower()}: layer {layer}, head {head} ({value:.3f} vs {uniform:.3f})")
        else:
            missing.append(f"{name.lower()} (highest {value:.3f} vs {uniform:.3f})")
    said = [f"Best score vs even spread; standing out takes {STANDING_OUT}."]
    said += [f"Stands out: {'; '.join(found)}."] if found else []
    said += [f"No head stands out: {'; '.join(missing)}."] if missing else []
    return " ".join(said)


def summary(probes: HeadProbes) -> str:
    best = ", ".join(
        f"{name} L{lb}H{hb} {float(probes.scores[name][lb, hb]):.3f}"
        for name, (lb, hb) in ((name, probes.best(name)) for name in probes.scores)
    )
    return f"HeadProbes: {probes.model_name}, n={probes.n}, seed {probes.seed}; best heads: {best}"
