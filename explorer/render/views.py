"""One view per result type: the figure a page draws for a result, with the page's own render function and
arguments, and a one-line summary of the result.

A ``View`` holds what the figure shows (``info``, for titles and file names), how to draw it at a size
(``build(look=...)``: the page's render function with the page's arguments, the shape ``ui.show_figure`` and the
exports take) and a summary (what Jupyter prints where nothing can draw). Each view function takes the result
and the page's settings, defaulting to what the page shows first; ``VIEWS`` names the one view of each result
type, which ``explorer.render.notebook`` draws when Jupyter displays a result. So a result in a notebook is the
figure its page draws, by construction: tests/test_notebook.py compares both for every type.

The inputs a result does not keep (the text as typed, for a capture or a lens) default to what it does keep
(its tokens, joined).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from explorer.compute.ablation import ablation_summary
from explorer.compute.probes import SCORE_NAMES
from explorer.compute.sampling import distribution_from_logits
from explorer.data import AttentionCapture, DecodeTrace, NextTokenLogits, TokenDistribution
from explorer.data.ablation import HeadAblationEffects
from explorer.data.attention import STACK_ENCODER, STACK_LABELS
from explorer.data.lens import LogitLens
from explorer.data.probes import HeadProbes
from explorer.render.ablation import ablation_map
from explorer.render.decoding import beam_tree_figure, candidates_figure
from explorer.render.heatmap import masked_weights, weights_heatmap
from explorer.render.lens import lens_figure
from explorer.render.sampling import stages_figure
from explorer.render.style import FigureInfo, snippet


@dataclass(frozen=True)
class View:
    """One figure of one result: ``build(look=...)`` draws it (``look`` defaults to the screen's)."""

    info: FigureInfo
    build: Callable[..., object]
    summary: str


# -- attention heatmaps ---------------------------------------------------------------------------------------


def attention_view(
    capture: AttentionCapture,
    *,
    text: str | None = None,
    stack: str | None = None,
    layer: int = 0,
    head: int = 0,
    stretch: bool = False,
    skip_first_row: bool = False,
) -> View:
    """The attention heatmaps page showing weights: one head of one stack (the first, as the page's choice
    starts), on the 0-1 colour scale unless ``stretch``."""
    stack_name = stack or next(iter(capture.stacks))
    shown = capture.stacks[stack_name]
    where = (STACK_LABELS[stack_name].lower(),) if len(capture.stacks) > 1 else ()
    info = FigureInfo(
        "Attention weights",
        model=capture.model_name,
        text=text or " ".join(capture.tokens),
        where=(*where, f"layer {layer}", f"head {head}"),
    )
    boundary = capture.segment_b_start if stack_name == STACK_ENCODER else None
    build = functools.partial(
        weights_heatmap,
        masked_weights(shown, layer, head),
        shown.query_tokens,
        shown.key_tokens,
        color_max=None if stretch else 1.0,
        info=info,
        boundaries=() if boundary is None else (boundary,),
        skip_first_row=bool(skip_first_row),
    )
    summary = (
        f"AttentionCapture: {capture.model_name}, {len(capture.tokens)} tokens, {shown.num_layers} layers × "
        f"{shown.num_heads} heads{_capture_remarks(capture)}, stacks {', '.join(capture.stacks)} (shown: layer "
        f"{layer}, head {head}; any other with explorer.render.attention_heatmap(capture.main, layer, head))"
    )
    return View(info, build, summary)


def _capture_remarks(capture: AttentionCapture) -> str:
    """What changes how the numbers read, from fields alone (nothing is recomputed: ``verify()`` is the check)."""
    kv_heads = len(set(capture.main.kv_head_of_query.tolist()))
    remarks = [
        f"{kv_heads} KV heads" if kv_heads < capture.main.num_heads else "",
        f"{capture.truncated} tokens cut to fit" if capture.truncated else "",
        capture.dtype if capture.dtype != "float32" else "",
        f"{len(capture.ablated)} head{'s' if len(capture.ablated) > 1 else ''} ablated" if capture.ablated else "",
    ]
    present = [remark for remark in remarks if remark]
    return f" ({'; '.join(present)})" if present else ""


# -- decoding ---------------------------------------------------------------------------------------------------


def greedy_view(trace: DecodeTrace) -> View:
    """The greedy search page: each step's candidates, the chosen token outlined."""
    info = FigureInfo("Greedy search", model=trace.model_name, text=trace.prompt, where=(f"{trace.num_steps} steps",))
    return View(info, functools.partial(candidates_figure, trace, info=info), _trace_summary(trace))


def sampled_view(trace: DecodeTrace) -> View:
    """A sampled continuation, drawn as the greedy page draws its steps (the sampling page shows a table)."""
    where = (f"seed {trace.settings.seed}", f"{trace.num_steps} steps")
    info = FigureInfo("Sampling", model=trace.model_name, text=trace.prompt, where=where)
    return View(info, functools.partial(candidates_figure, trace, info=info), _trace_summary(trace))


def beam_view(trace: DecodeTrace, *, upto_step: int | None = None) -> View:
    """The beam search page: the whole search tree as it stood after ``upto_step`` (the page starts at the last)."""
    upto = trace.num_steps - 1 if upto_step is None else upto_step
    where = (f"{trace.settings.num_beams} beams", f"step {upto + 1} of {trace.num_steps}")
    info = FigureInfo("Beam search tree", model=trace.model_name, text=trace.prompt, where=where)
    return View(info, functools.partial(beam_tree_figure, trace, info=info, upto_step=upto), _trace_summary(trace))


# A decoding's view is its strategy's page.
TRACE_VIEWS = {"greedy": greedy_view, "sample": sampled_view, "beam": beam_view}
STRATEGY_TITLES = {
    "greedy": "Greedy search",
    "sample": "Sampling, seed {seed}",
    "beam": "Beam search, {num_beams} beams",
}


def decoding_view(trace: DecodeTrace) -> View:
    return TRACE_VIEWS[trace.settings.strategy](trace)


def _trace_summary(trace: DecodeTrace) -> str:
    settings = trace.settings
    title = STRATEGY_TITLES[settings.strategy].format(seed=settings.seed, num_beams=settings.num_beams)
    return (
        f"DecodeTrace: {trace.model_name}, {title.lower()}, {trace.num_steps} steps: "
        f"“{snippet(trace.prompt, 40)}” → “{snippet(trace.continuations[0], 60)}” "
        f"(log-probability {float(trace.sequence_logprobs[0]):.2f})"
    )


# -- the next-token distribution --------------------------------------------------------------------------------


def pipeline_settings(distribution: TokenDistribution) -> str:
    """The sampling settings of a distribution, as the sampling page writes them."""
    d = distribution
    return f"T = {d.temperature:g}, top-k = {d.top_k}, top-p = {d.top_p:g}, min-p = {d.min_p:g}"


def distribution_view(distribution: TokenDistribution, *, model: str = "", prompt: str = "") -> View:
    """The sampling page's pipeline figure: the likeliest tokens' probability after each stage."""
    info = FigureInfo("Sampling pipeline", model=model, text=prompt, where=(pipeline_settings(distribution),))
    final = distribution.final
    best = int(final.argmax())
    summary = (
        f"TokenDistribution: {len(final):,} tokens, stages {' → '.join(name for name, _ in distribution.stages)}; "
        f"{int((final > 0).sum()):,} still possible; most likely {distribution.tokens[best]!r} "
        f"({100 * float(final[best]):.1f}%)"
    )
    return View(info, functools.partial(stages_figure, distribution, info=info), summary)


def logits_view(logits: NextTokenLogits) -> View:
    """The sampling page as it opens: every stage off, the model's own softmax."""
    distribution = distribution_from_logits(logits.logits, logits.tokens)
    shown = distribution_view(distribution, model=logits.model_name, prompt=logits.prompt)
    best = int(logits.logits.argmax())
    summary = (
        f"NextTokenLogits: {logits.model_name}, after “{snippet(logits.prompt, 40)}”: {len(logits.logits):,} logits; "
        f"most likely {logits.tokens[best]!r} ({100 * float(distribution.final[best]):.1f}%)"
    )
    return View(shown.info, shown.build, summary)


# -- what the layers predict, and which heads matter ------------------------------------------------------------


def lens_view(lens: LogitLens, *, text: str | None = None, target: str | None = None) -> View:
    """The logit lens page: the top token read after every layer at every position."""
    shown = " / ".join(part for part in (text or " ".join(lens.tokens), target) if part)
    info = FigureInfo("Logit lens", model=lens.model_name, text=shown, where=("decoder",) if target else ())
    build = functools.partial(
        lens_figure, lens.top_tokens, lens.top_logprobs, lens.tokens, info=info, masked=lens.masked
    )
    settled = int(np.argmax(lens.final_ranks[:, -1] == 0))
    summary = (
        f"LogitLens: {lens.model_name}, {len(lens.tokens)} positions × {lens.num_layers + 1} readings (embeddings and "
        f"{lens.num_layers} layers); after the last token the model predicts {lens.final_tokens[-1]!r}, the lens's "
        f"top token from reading {settled} on"
    )
    return View(info, build, summary)


def ablation_view(effects: HeadAblationEffects, *, ablated=(), seq2seq: bool = False) -> View:
    """The head ablation page's map: each head ablated alone, ``ablated`` outlined (none as the page opens)."""
    where = ("decoder self-attention",) if seq2seq else ()
    info = FigureInfo("Each head ablated alone", model=effects.model_name, text=effects.prompt, where=where)
    build = functools.partial(
        ablation_map,
        effects.changes,
        effects.top_tokens,
        target_token=effects.target_token,
        baseline_logprob=effects.baseline_logprob,
        noise=effects.tolerance,
        ablated=ablated,
        info=info,
    )
    summary = f"HeadAblationEffects: {effects.model_name}, next token {effects.target_token!r}. " + ablation_summary(
        effects.changes, effects.baseline_logprob, tolerance=effects.tolerance, dtype=effects.dtype
    )
    return View(info, build, summary)


def probes_view(probes: HeadProbes, *, score: str = "induction") -> View:
    """The head types page: the weights of the head with the best ``score``, the second copy below a dashed line."""
    layer, head = probes.best(score)
    stack = probes.capture.main
    info = FigureInfo(
        "Attention weights",
        model=probes.model_name,
        text=f"{probes.n} random tokens, twice (seed {probes.seed})",
        where=(f"layer {layer}", f"head {head}", f"best {SCORE_NAMES[score].lower()} score"),
    )
    build = functools.partial(
        weights_heatmap,
        masked_weights(stack, layer, head),
        stack.query_tokens,
        stack.key_tokens,
        color_max=None,  # stretched to the head's largest weight: a weak stripe still shows
        info=info,
        boundaries=(probes.offset + probes.n,),
    )
    best = ", ".join(
        f"{name} L{lb}H{hb} {float(probes.scores[name][lb, hb]):.3f}"
        for name, (lb, hb) in ((name, probes.best(name)) for name in probes.scores)
    )
    return View(info, build, f"HeadProbes: {probes.model_name}, n={probes.n}, seed {probes.seed}; best heads: {best}")


# The one view of each result type: what Jupyter draws for it (explorer.render.notebook).
VIEWS: dict[type, Callable[..., View]] = {
    AttentionCapture: attention_view,
    DecodeTrace: decoding_view,
    TokenDistribution: distribution_view,
    NextTokenLogits: logits_view,
    LogitLens: lens_view,
    HeadAblationEffects: ablation_view,
    HeadProbes: probes_view,
}
