"""Results shown in Jupyter as the app's figures: what ``_repr_mimebundle_`` of the data classes returns.

Each bundle has three representations; a frontend shows the richest it can:

- ``application/vnd.plotly.v1+json``: the figure as data (JupyterLab, VS Code and Colab draw it natively);
- ``text/html``: the figure drawn by plotly.js. The first figure a kernel displays carries plotly.js itself,
  from the installed plotly package (about 4.6 MB, once per notebook: no CDN, so it works offline); later
  figures use the ``Plotly`` that one defined in the page;
- ``text/plain``: a one-line summary, where nothing can draw.

Nothing here imports IPython: a bundle is a plain dict. The HTML is Plotly's own ``to_html``; its "notebook" renderer
is not used because it adds a MathJax script from a CDN to every figure and sends plotly.js as an output of its own.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import plotly.io as pio

from explorer.compute.ablation import ablation_summary
from explorer.compute.sampling import distribution_from_logits
from explorer.data import AttentionCapture, DecodeTrace, NextTokenLogits, TokenDistribution
from explorer.data.ablation import HeadAblationEffects
from explorer.data.lens import LogitLens
from explorer.data.probes import HeadProbes
from explorer.render.ablation import ablation_map
from explorer.render.decoding import beam_tree_figure, candidates_figure
from explorer.render.heatmap import attention_heatmap, masked_weights, weights_heatmap
from explorer.render.lens import lens_figure
from explorer.render.sampling import stages_figure
from explorer.render.style import FigureInfo, snippet

PLOTLY_MIME = "application/vnd.plotly.v1+json"
_plotly_js = {"sent": False}
_plotly_js_lock = threading.Lock()


def mimebundle(result, include=None, exclude=None) -> dict:
    """The bundle for any result that has a figure (see ``FIGURES``), with the mime types ``include`` names (all
    when None) less those ``exclude`` names, as IPython's ``_repr_mimebundle_`` is asked for them."""
    figure, summary = FIGURES[type(result)](result)
    bundle = {"text/plain": summary}
    if _wanted(PLOTLY_MIME, include, exclude):
        # Through Plotly's own JSON encoder: arrays become typed-array data that Jupyter can send as JSON.
        bundle[PLOTLY_MIME] = json.loads(pio.to_json(figure, validate=False))
    if _wanted("text/html", include, exclude):  # only then is plotly.js spent on this output
        bundle["text/html"] = _html(figure)
    return {mime: value for mime, value in bundle.items() if _wanted(mime, include, exclude)}


def _wanted(mime: str, include, exclude) -> bool:
    return (include is None or mime in include) and not (exclude and mime in exclude)


def _html(figure) -> str:
    with _plotly_js_lock:  # plotly.js goes into exactly one output, the first one
        first, _plotly_js["sent"] = not _plotly_js["sent"], True
    return pio.to_html(figure, include_plotlyjs=first, full_html=False, config={"displaylogo": False})


def reset_plotly_js() -> None:
    """Send plotly.js again with the next figure (a new notebook page, or a test)."""
    with _plotly_js_lock:
        _plotly_js["sent"] = False


def capture_figure(capture: AttentionCapture, layer: int = 0, head: int = 0):
    stack = capture.main
    text = " ".join(capture.tokens)
    info = FigureInfo(
        "Attention weights", model=capture.model_name, text=text, where=(f"layer {layer}", f"head {head}")
    )
    figure = attention_heatmap(stack, layer, head, info=info, segment_b_start=capture.segment_b_start)
    summary = (
        f"AttentionCapture: {capture.model_name}, {len(capture.tokens)} tokens, {stack.num_layers} layers × "
        f"{stack.num_heads} heads{_capture_remarks(capture)}, stacks {', '.join(capture.stacks)} (shown: layer "
        f"{layer}, head {head}; any other with explorer.render.attention_heatmap(capture.main, layer, head))"
    )
    return figure, summary


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


def trace_figure(trace: DecodeTrace):
    settings = trace.settings
    info = FigureInfo(_strategy_title(trace), model=trace.model_name, text=trace.prompt)
    beams = settings.strategy == "beam"
    figure = beam_tree_figure(trace, info=info) if beams else candidates_figure(trace, info=info)
    summary = (
        f"DecodeTrace: {trace.model_name}, {_strategy_title(trace).lower()}, {trace.num_steps} steps: "
        f"“{snippet(trace.prompt, 40)}” → “{snippet(trace.continuations[0], 60)}” "
        f"(log-probability {float(trace.sequence_logprobs[0]):.2f})"
    )
    return figure, summary


def _strategy_title(trace: DecodeTrace) -> str:
    settings = trace.settings
    if settings.strategy == "beam":
        return f"Beam search, {settings.num_beams} beams"
    if settings.strategy == "sample":  # the seed reproduces it
        return f"Sampling, seed {settings.seed}"
    return "Greedy search"


def distribution_figure(distribution: TokenDistribution, info: FigureInfo | None = None):
    info = info or FigureInfo("Next-token distribution, stage by stage")
    figure = stages_figure(distribution, info=info).figure()
    final = distribution.final
    best = int(final.argmax())
    summary = (
        f"TokenDistribution: {len(final):,} tokens, stages {' → '.join(name for name, _ in distribution.stages)}; "
        f"{int((final > 0).sum()):,} still possible; most likely {distribution.tokens[best]!r} "
        f"({100 * float(final[best]):.1f}%)"
    )
    return figure, summary


def logits_figure(logits: NextTokenLogits):
    distribution = distribution_from_logits(logits.logits, logits.tokens)
    figure, _ = distribution_figure(
        distribution, FigureInfo("Next-token distribution", model=logits.model_name, text=logits.prompt)
    )
    best = int(logits.logits.argmax())
    summary = (
        f"NextTokenLogits: {logits.model_name}, after “{snippet(logits.prompt, 40)}”: {len(logits.logits):,} logits; "
        f"most likely {logits.tokens[best]!r} ({100 * float(distribution.final[best]):.1f}%)"
    )
    return figure, summary


def lens_figure_of(lens: LogitLens):
    info = FigureInfo("Logit lens", model=lens.model_name, text=" ".join(lens.tokens))
    figure = lens_figure(lens.top_tokens, lens.top_logprobs, lens.tokens, info=info)
    settled = int(np.argmax(lens.final_ranks[:, -1] == 0))
    summary = (
        f"LogitLens: {lens.model_name}, {len(lens.tokens)} positions × {lens.num_layers + 1} readings (embeddings and "
        f"{lens.num_layers} layers); after the last token the model predicts {lens.final_tokens[-1]!r}, the lens's "
        f"top token from reading {settled} on"
    )
    return figure, summary


def effects_figure(effects: HeadAblationEffects):
    info = FigureInfo("Each head ablated alone", model=effects.model_name, text=effects.prompt)
    figure = ablation_map(
        effects.changes,
        effects.top_tokens,
        target_token=effects.target_token,
        baseline_logprob=effects.baseline_logprob,
        noise=effects.tolerance,
        info=info,
    )
    summary = f"HeadAblationEffects: {effects.model_name}, next token {effects.target_token!r}. " + ablation_summary(
        effects.changes, effects.baseline_logprob, tolerance=effects.tolerance, dtype=effects.dtype
    )
    return figure, summary


def probes_figure(probes: HeadProbes):
    layer, head = probes.best("induction")
    stack = probes.capture.main
    text = f"{probes.n} random tokens, twice (seed {probes.seed})"
    info = FigureInfo(
        "Attention weights",
        model=probes.model_name,
        text=text,
        where=(f"layer {layer}", f"head {head}", "best induction score"),
    )
    figure = weights_heatmap(
        masked_weights(stack, layer, head),
        stack.query_tokens,
        stack.key_tokens,
        color_max=None,
        info=info,
        boundaries=(probes.offset + probes.n,),
    )
    best = ", ".join(
        f"{name} L{lb}H{hb} {float(probes.scores[name][lb, hb]):.3f}"
        for name, (lb, hb) in ((name, probes.best(name)) for name in probes.scores)
    )
    return figure, f"HeadProbes: {probes.model_name}, n={probes.n}, seed {probes.seed}; best heads: {best}"


FIGURES = {
    AttentionCapture: capture_figure,
    DecodeTrace: trace_figure,
    TokenDistribution: distribution_figure,
    NextTokenLogits: logits_figure,
    LogitLens: lens_figure_of,
    HeadAblationEffects: effects_figure,
    HeadProbes: probes_figure,
}
