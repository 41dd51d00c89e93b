"""Head ablation views: the change in the next token's log-probability when each head is ablated alone, and the
next-token probabilities with and without a set of heads."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer import gateway
from explorer.compute.sampling import softmax
from explorer.data.ablation import HeadAblationEffects
from explorer.render.ablation import ablation_map, before_after_figure
from explorer.render.style import FigureInfo
from explorer.views import Builder, builder

SHOWN_TOKENS = 12  # the bars: the likeliest 8 before and after, at most this many together


@dataclass(frozen=True)
class Map:
    """Each head ablated alone, the heads in ``ablated`` ((layer, head) pairs) outlined; ``seq2seq``: the map is the
    decoder's self-attention."""

    model: str
    prompt: str
    ablated: tuple = ()
    seq2seq: bool = False

    @classmethod
    def for_result(cls, effects: HeadAblationEffects) -> Map:
        return cls(effects.model_name, effects.prompt)

    def result(self, progress=None) -> HeadAblationEffects:
        return gateway.run("ablation effects", self.model, self.prompt, progress=progress)

    def info(self, effects=None) -> FigureInfo:
        where = ("decoder self-attention",) if self.seq2seq else ()
        return FigureInfo("Each head ablated alone", model=self.model, text=self.prompt, where=where)

    def figure(self, effects: HeadAblationEffects) -> Builder:
        return builder(
            ablation_map,
            effects.changes,
            effects.top_tokens,
            target_token=effects.target_token,
            baseline_logprob=effects.baseline_logprob,
            noise=effects.tolerance,
            ablated=self.ablated,
            layer_numbers=effects.layer_numbers,
            info=self.info(),
        )


@dataclass(frozen=True)
class BeforeAfter(Map):
    """The likeliest next tokens' probabilities, the model as it is and with the ``ablated`` heads; the result is
    (plain logits, ablated logits)."""

    @property
    def spec(self) -> tuple:
        """The heads as ``ablate=`` takes them: an encoder-decoder's name their stack."""
        return tuple(("decoder", layer, head) for layer, head in self.ablated) if self.seq2seq else self.ablated

    def result(self, progress=None):
        plain = gateway.run("logits", self.model, self.prompt, progress=progress)
        return plain, gateway.run("logits", self.model, self.prompt, ablate=self.spec, progress=progress)

    layer_numbers: tuple[int, ...] | None = None  # the model's own number of each layer the map counts (a hybrid's)

    def info(self, result=None) -> FigureInfo:
        shown = heads_named(self.ablated, self.layer_numbers)
        return FigureInfo("Next token, with and without the heads", model=self.model, text=self.prompt, where=(shown,))

    def figure(self, result) -> Builder:
        plain, ablated = result
        before, after = softmax(plain.logits.astype(np.float64)), softmax(ablated.logits.astype(np.float64))
        top = list(dict.fromkeys([*np.argsort(-before)[:8], *np.argsort(-after)[:8]]))[:SHOWN_TOKENS]
        count = len(self.ablated)
        return builder(
            before_after_figure,
            [plain.tokens[i] for i in top],
            before[top],
            after[top],
            ablated_label=f"{count} head{'s' if count > 1 else ''} ablated",
            info=self.info(),
        )


def method_caption(effects: HeadAblationEffects) -> str:
    """How the map was measured, from the run itself: how many batched passes, and that nothing checked them while
    the page ran (the tests compare the same code with a copy of the model whose output projection ignores the
    head)."""
    heads, passes = effects.logprobs.size, len(effects.batch_sizes)
    rows = max(effects.batch_sizes, default=0)
    batches = f"{passes} batched forward passes of up to {rows} rows" if passes > 1 else f"one batch of {rows} rows"
    ran = f"The {heads} heads were ablated one per row, in {batches}, after one plain pass."
    return (
        f"{ran} Not checked while the page runs: the test suite checks this code against a copy of the model whose "
        "output projection ignores the head, on small models of each architecture."
    )


def summary(effects: HeadAblationEffects) -> str:
    layer, head = np.unravel_index(int(np.argmin(effects.changes)), effects.changes.shape)
    return (
        f"HeadAblationEffects: {effects.model_name}, next token {effects.target_token!r} (log-probability "
        f"{effects.baseline_logprob:.2f}); ablating layer {layer}, head {head} alone costs it the most "
        f"({float(effects.changes[layer, head]):+.3f})"
    )


def numbering_caption(effects: HeadAblationEffects) -> str:
    """Which of the model's layers the map's rows are, where not all ("" where they are): a hybrid's layers without
    attention have no heads to ablate."""
    if effects.layer_numbers is None:
        return ""
    numbers = [int(number) for number in effects.layer_numbers]
    rows = f"layer{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))}"
    return (
        f"Only the model's layers with attention have heads to ablate: the map's rows are its {rows}, by the model's "
        "own numbers; its other layers form no attention weights (a state-space, recurrent or linear-attention layer)."
    )


def heads_named(heads, layer_numbers=None) -> str:
    """(layer, head) pairs of the map's rows as the page names them: by the model's own layer numbers."""
    named = (lambda layer: layer) if layer_numbers is None else (lambda layer: int(layer_numbers[layer]))
    return ", ".join(f"layer {named(layer)} · head {head}" for layer, head in heads)
