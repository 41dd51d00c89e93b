"""Decoding views: greedy search's candidates at each step, beam search's tree, strategies compared by the
log-probability of their continuations, and the attention a decoding recorded as it generated."""

from __future__ import annotations

from dataclasses import dataclass, field

from explorer import gateway
from explorer.data import DecodeTrace
from explorer.render.decoding import (
    beam_tree_figure,
    candidates_figure,
    chain_rule_figure,
    logprob_figure,
    products_figure,
)
from explorer.render.heatmap import colorbar_title, masked_weights, token_matrix, verification_caption
from explorer.render.style import FigureInfo, snippet
from explorer.views import Builder, builder

STRATEGY_TITLES = {
    "greedy": "Greedy search",
    "sample": "Sampling, seed {seed}",
    "beam": "Beam search, {num_beams} beams",
}


@dataclass(frozen=True)
class Greedy:
    """Each step's candidates, the chosen token outlined. ``settings``: ``explorer.decode``'s, as (name, value)
    pairs (hashable, so a view stays a value); a branch's ``force`` among them."""

    model: str
    prompt: str
    settings: tuple = ()

    title = "Greedy search"

    @classmethod
    def for_result(cls, trace: DecodeTrace) -> Greedy:
        return cls(trace.model_name, trace.prompt)

    def result(self, progress=None) -> DecodeTrace:
        return gateway.run("decode", self.model, self.prompt, progress=progress, **dict(self.settings))

    def info(self, trace: DecodeTrace) -> FigureInfo:
        return FigureInfo(self.title, model=self.model, text=self.prompt, where=(f"{trace.num_steps} steps",))

    def figure(self, trace: DecodeTrace) -> Builder:
        return builder(candidates_figure, trace, info=self.info(trace))


@dataclass(frozen=True)
class Sampled(Greedy):
    """A sampled continuation, drawn as the greedy page draws its steps (the sampling page shows a table)."""

    title = "Sampling"

    def info(self, trace: DecodeTrace) -> FigureInfo:
        where = (f"seed {trace.settings.seed}", f"{trace.num_steps} steps")
        return FigureInfo(self.title, model=self.model, text=self.prompt, where=where)


@dataclass(frozen=True)
class ChainRule(Greedy):
    """A greedy decoding's chain rule: each token's log-probability given the tokens before it, and their running
    sum, the continuation's log-probability (its page is greedy search's)."""

    title = "The chain rule, in logs"

    def figure(self, trace: DecodeTrace) -> Builder:
        return builder(chain_rule_figure, trace, info=self.info(trace))


@dataclass(frozen=True)
class Products(Greedy):
    """The same decoding's probabilities multiplied, beside their logs added, token by token."""

    title = "Product of probabilities, sum of logs"

    def figure(self, trace: DecodeTrace) -> Builder:
        return builder(products_figure, trace, info=self.info(trace))


@dataclass(frozen=True)
class BeamTree(Greedy):
    """The whole search tree as it stood after ``upto_step`` (None: the last step, as the page opens)."""

    upto_step: int | None = None

    def upto(self, trace: DecodeTrace) -> int:
        return trace.num_steps - 1 if self.upto_step is None else self.upto_step

    def info(self, trace: DecodeTrace) -> FigureInfo:
        where = (f"{trace.settings.num_beams} beams", f"step {self.upto(trace) + 1} of {trace.num_steps}")
        return FigureInfo("Beam search tree", model=self.model, text=self.prompt, where=where)

    def figure(self, trace: DecodeTrace) -> Builder:
        return builder(beam_tree_figure, trace, info=self.info(trace), upto_step=self.upto(trace))


# A decoding's view in a notebook is its strategy's page.
STRATEGY_VIEWS = {"greedy": Greedy, "sample": Sampled, "beam": BeamTree}


def for_trace(trace: DecodeTrace) -> Greedy:
    return STRATEGY_VIEWS[trace.settings.strategy].for_result(trace)


def summary(trace: DecodeTrace) -> str:
    settings = trace.settings
    title = STRATEGY_TITLES[settings.strategy].format(seed=settings.seed, num_beams=settings.num_beams)
    return (
        f"DecodeTrace: {trace.model_name}, {title.lower()}, {trace.num_steps} steps: "
        f"“{snippet(trace.prompt, 40)}” → “{snippet(trace.continuations[0], 60)}” "
        f"(log-probability {float(trace.sequence_logprobs[0]):.2f})"
    )


@dataclass(frozen=True)
class Comparison:
    """Decodings of one prompt side by side by the log-probability of their continuations. ``decodings``: (label,
    settings as (name, value) pairs) for each; the result is {label: trace}, in that order."""

    model: str
    prompt: str
    decodings: tuple
    title: str = "Strategies compared"
    where: tuple = field(default=())

    def result(self, progress=None) -> dict[str, DecodeTrace]:
        return {
            label: gateway.run("decode", self.model, self.prompt, progress=progress, **dict(settings))
            for label, settings in self.decodings
        }

    def info(self, traces=None) -> FigureInfo:
        return FigureInfo(self.title, model=self.model, text=self.prompt, where=self.where)

    def figure(self, traces: dict[str, DecodeTrace]) -> Builder:
        logprobs = [float(trace.sequence_logprobs[0]) for trace in traces.values()]
        texts = [trace.continuations[0] for trace in traces.values()]
        return builder(logprob_figure, list(traces), logprobs, texts, info=self.info())


@dataclass(frozen=True)
class GenerationAttention:
    """One head's weights in the passes that chose the generated tokens up to ``step`` (0: the first), from the
    attention the decoding recorded (``record_attention``): the prompt's rows (its pass chose the first token),
    then one row per token fed back. The last generated token is never fed back, so it has no row."""

    model: str
    prompt: str
    settings: tuple = ()
    stack: str = "decoder"
    layer: int = 0
    head: int = 0
    step: int = 0

    def result(self, progress=None) -> DecodeTrace:
        settings = {**dict(self.settings), "record_attention": True}
        return gateway.run("decode", self.model, self.prompt, progress=progress, **settings)

    def info(self, trace: DecodeTrace) -> FigureInfo:
        generated = len(trace.generated_tokens[0])
        where = (f"layer {self.layer}", f"head {self.head}", f"step {self.step + 1} of {generated}")
        return FigureInfo("Attention while generating", model=self.model, text=self.prompt, where=where)

    def rows(self, trace: DecodeTrace) -> int:
        """The query rows drawn: the prompt's, then one per pass after it, up to the pass that chose token
        ``step`` (the passes that ran: the stack has no row for the last token)."""
        return min(trace.prompt_length + self.step, len(trace.attention[self.stack].query_tokens))

    def figure(self, trace: DecodeTrace) -> Builder:
        stack = trace.attention[self.stack]
        rows = self.rows(trace)
        columns = rows if self.stack == "decoder" else len(stack.key_tokens)
        return builder(
            token_matrix,
            masked_weights(stack, self.layer, self.head)[:rows, :columns],
            stack.query_tokens[:rows],
            stack.key_tokens[:columns],
            info=self.info(trace),
            row_title="query (the prompt, then each token fed back)",
            colorbar_title=colorbar_title(1.0, stretched=False),
            boundaries=(trace.prompt_length,) if self.stack == "decoder" else (),
        )

    def caption(self, trace: DecodeTrace) -> str:
        """The recorded weights checked against a recomputation from the recorded queries and keys."""
        stack = trace.attention[self.stack]
        return verification_caption(stack.verify(), tolerance=stack.tolerance)
