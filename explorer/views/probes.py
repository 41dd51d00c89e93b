"""Head type views: the weights of the head with the best probe score, on a text of random tokens repeated
twice (the second copy below a dashed line)."""

from __future__ import annotations

from dataclasses import dataclass

from explorer import gateway
from explorer.compute.probes import SCORE_NAMES
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
            where=(f"layer {layer}", f"head {head}", f"best {SCORE_NAMES[self.score].lower()} score"),
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


def summary(probes: HeadProbes) -> str:
    best = ", ".join(
        f"{name} L{lb}H{hb} {float(probes.scores[name][lb, hb]):.3f}"
        for name, (lb, hb) in ((name, probes.best(name)) for name in probes.scores)
    )
    return f"HeadProbes: {probes.model_name}, n={probes.n}, seed {probes.seed}; best heads: {best}"
