"""Attention views: one head of one stack as a heatmap (its weights, its scores before softmax, or its layer's
mask), from the capture of the text, and the capture's check against a recomputation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from explorer import gateway
from explorer.compute.attention import query_stages, score_stages, toy_stages
from explorer.compute.statistics import GREYED_COLUMN, NEGLIGIBLE_MASS, kept_mass, rollout, without_tokens
from explorer.data import AttentionCapture
from explorer.render.bertviz import (
    frame_height,
    head_view_html,
    head_view_slide,
    head_view_zoom,
    model_view_html,
    model_view_slide,
)
from explorer.render.grid import MAX_THUMBNAIL as MAX_THUMBNAIL  # the page says when a text is longer
from explorer.render.grid import tiled, tiles_figure
from explorer.render.heatmap import (
    agreement_caption,
    blank_masked,
    mask_heatmap,
    masked_weights,
    scores_heatmap,
    token_matrix,
    verification_caption,
    weights_heatmap,
)
from explorer.render.statistics import renormalised_matrix
from explorer.render.style import FigureInfo
from explorer.render.vectors import neuron_view_figure, step_by_step_figure
from explorer.views import Builder, builder

# What a heatmap can show: its title, and whether it is one head's (else the layer's: the mask is every head's).
SHOW = {
    "weights": ("Attention weights", True),
    "scores": ("Attention scores", True),
    "mask": ("Attention mask", False),
    "masked scores": ("Masked scores", True),  # the scores beside the mask: the same figure as "scores"
}
STACK_NAMES = {"encoder": "encoder self-attention", "decoder": "decoder self-attention", "cross": "cross-attention"}


@dataclass(frozen=True)
class Head:
    """One head's heatmap. ``stretch``: darkest colour = the head's largest weight; ``skip_first_row``: that
    largest weight read without the first row (a causal model's first token attends only to itself)."""

    model: str
    text: str
    text_pair: str | None = None
    target: str | None = None
    stack: str = "encoder"
    layer: int = 0
    head: int = 0
    show: str = "weights"
    stretch: bool = False
    skip_first_row: bool = False

    @classmethod
    def for_result(cls, capture: AttentionCapture) -> Head:
        """The page as it opens on this capture: the first stack, layer 0, head 0, its weights; the text as typed is
        not kept, its tokens joined stand for it."""
        return cls(capture.model_name, " ".join(capture.tokens), stack=next(iter(capture.stacks)))

    @property
    def shown_text(self) -> str:
        return " / ".join(part for part in (self.text, self.text_pair, self.target) if part)

    def result(self, progress=None) -> AttentionCapture:
        return gateway.run("capture", self.model, self.text, self.text_pair, self.target, progress=progress)

    def info(self, result: AttentionCapture) -> FigureInfo:
        title, one_head = SHOW[self.show]
        where = (STACK_NAMES[self.stack],) if len(result.stacks) > 1 else ()
        layer = f"layer {result.stacks[self.stack].layer_number(self.layer)}"  # the model's own number
        place = (layer, f"head {self.head}") if one_head else (layer,)
        return FigureInfo(title, model=self.model, text=self.shown_text, where=(*where, *place))

    def figure(self, result: AttentionCapture) -> Builder:
        # The builder keeps only the matrix it draws, not the capture: exports run later, and a class of forty
        # must not keep forty long captures alive through their download buttons.
        stack = result.stacks[self.stack]
        tokens = (stack.query_tokens, stack.key_tokens)
        info = self.info(result)
        boundary = result.segment_b_start if self.stack == "encoder" else None
        boundaries = () if boundary is None else (boundary,)
        if self.show == "weights":
            weights = masked_weights(stack, self.layer, self.head)
            return builder(
                weights_heatmap,
                weights,
                *tokens,
                color_max=None if self.stretch else 1.0,
                info=info,
                boundaries=boundaries,
                skip_first_row=self.skip_first_row,
            )
        if self.show == "mask":
            return builder(mask_heatmap, stack.masks_by_layer()[self.layer].copy(), *tokens, info=info)
        scores = score_stages(stack, self.layer, self.head)["masked"]
        return builder(scores_heatmap, scores, *tokens, info=info, boundaries=boundaries)

    def check(self, progress=None) -> float:
        """max |softmax(scale · q·k + bias) recomputed - the captured weights| over this stack's layers and heads."""
        return gateway.run("verification", self.model, self.text, self.text_pair, self.target, progress=progress)[
            self.stack
        ]

    def check_caption(self, result: AttentionCapture, error: float) -> str:
        return verification_caption(error, tolerance=result.stacks[self.stack].tolerance)


def summary(capture: AttentionCapture) -> str:
    shown = capture.main
    return (
        f"AttentionCapture: {capture.model_name}, {len(capture.tokens)} tokens, {shown.num_layers} layers × "
        f"{shown.num_heads} heads{_capture_remarks(capture)}, stacks {', '.join(capture.stacks)} (shown: layer 0, "
        "head 0; any other with explorer.render.attention_heatmap(capture.main, layer, head))"
    )


def _capture_remarks(capture: AttentionCapture) -> str:
    """What changes how the numbers read, from fields alone (nothing is recomputed: ``verify()`` is the check)."""
    main = capture.main  # layers may group heads differently (MiMo-V2-Flash): each count said
    kv_heads = sorted({len(set(main.kv_head_of(layer).tolist())) for layer in range(main.num_layers)})
    remarks = [
        f"{' or '.join(map(str, kv_heads))} KV heads" if min(kv_heads, default=main.num_heads) < main.num_heads else "",
        f"{capture.truncated} tokens cut to fit" if capture.truncated else "",
        capture.dtype if capture.dtype != "float32" else "",
        f"{len(capture.ablated)} head{'s' if len(capture.ablated) > 1 else ''} ablated" if capture.ablated else "",
        "weights only: no queries or keys" if capture.weights_only else "",
    ]
    present = [remark for remark in remarks if remark]
    return f" ({'; '.join(present)})" if present else ""


def allowed_weights(stack, layer: int, heads: int | slice = slice(None)) -> np.ndarray:
    """[head, query, key] of one layer (or [query, key] of one head): the weights, 0 where the mask forbids
    attending (a copy)."""
    return np.where(stack.masks_by_layer()[layer], stack.attentions[layer, heads], 0.0)


def shown_head(stack, layer: int, head: int, hidden=()) -> tuple[np.ndarray, tuple[str, ...]]:
    """One head's weights as the pages draw them, [query, key] with NaN where masked, and the key tokens;
    with ``hidden`` key positions dropped and each row renormalised over the rest (``without_tokens``)."""
    if not hidden:
        return masked_weights(stack, layer, head), stack.key_tokens
    weights, kept = without_tokens(allowed_weights(stack, layer, head), hidden)
    return blank_masked(weights, stack.masks_by_layer()[layer][:, kept]), tuple(stack.key_tokens[i] for i in kept)


def rollout_by_layer(stack) -> np.ndarray:
    """[layer, query, key] attention rollout of a (square) stack, up to each layer."""
    head_means = np.stack(
        [allowed_weights(stack, layer).mean(axis=0, dtype=np.float64) for layer in range(stack.num_layers)]
    )
    return rollout(head_means[:, None])  # one "head" per layer: rollout's own mean over heads is then exact


@dataclass(frozen=True)
class OnCapture:
    """What every view of one capture shares: its inputs and the stack it shows."""

    model: str
    text: str
    text_pair: str | None = None
    target: str | None = None
    stack: str = "encoder"

    @property
    def shown_text(self) -> str:
        return " / ".join(part for part in (self.text, self.text_pair, self.target) if part)

    def result(self, progress=None) -> AttentionCapture:
        return gateway.run("capture", self.model, self.text, self.text_pair, self.target, progress=progress)


@dataclass(frozen=True)
class Side(OnCapture):
    """One side of the comparison page: the main stack's head of one model on one text, no stack named."""

    layer: int = 0
    head: int = 0
    stretch: bool = False

    def info(self, result=None) -> FigureInfo:
        layer = self.layer if result is None else result.main.layer_number(self.layer)  # the model's own number
        where = (f"layer {layer}", f"head {self.head}")
        return FigureInfo("Attention weights", model=self.model, text=self.shown_text, where=where)

    def figure(self, capture: AttentionCapture) -> Builder:
        # Only the drawn matrix is kept for a later export, not the capture.
        stack, b = capture.main, capture.segment_b_start
        return builder(
            weights_heatmap,
            masked_weights(stack, self.layer, self.head),
            stack.query_tokens,
            stack.key_tokens,
            color_max=None if self.stretch else 1.0,
            info=self.info(capture),
            boundaries=() if b is None else (b,),
        )


@dataclass(frozen=True)
class StatisticsHead(OnCapture):
    """The head a row of the statistics table opens; ``hidden``: key positions dropped, rows renormalised."""

    layer: int = 0
    head: int = 0
    hidden: tuple = ()

    def info(self, result=None) -> FigureInfo:
        layer = self.layer if result is None else result.stacks[self.stack].layer_number(self.layer)
        where = (f"layer {layer}", f"head {self.head}") + (("special tokens hidden",) if self.hidden else ())
        return FigureInfo("Attention weights", model=self.model, text=self.shown_text, where=where)

    def figure(self, capture: AttentionCapture) -> Builder:
        stack = capture.stacks[self.stack]
        shown, keys = shown_head(stack, self.layer, self.head, self.hidden)
        if not self.hidden:
            return builder(token_matrix, shown, stack.query_tokens, keys, info=self.info(capture))
        kept, info = self.kept(capture), self.info(capture)
        return builder(renormalised_matrix, shown, kept, NEGLIGIBLE_MASS, stack.query_tokens, keys, info=info)

    def kept(self, capture: AttentionCapture) -> np.ndarray:
        """[query] the share of each row's weight left on the keys still shown (all of it when nothing is hidden)."""
        return kept_mass(allowed_weights(capture.stacks[self.stack], self.layer, self.head), self.hidden)

    def caption(self, capture: AttentionCapture) -> str:
        """Which rows are greyed and why, from this head's numbers ("" when nothing is hidden)."""
        return greyed_rows_caption(self.kept(capture), NEGLIGIBLE_MASS) if self.hidden else ""


def greyed_rows_caption(kept: np.ndarray, threshold: float) -> str:
    """The sentence beside a renormalised head: how many rows keep less than ``threshold`` of their weight (and
    are greyed), or that none does; ``kept`` [query] as ``StatisticsHead.kept``."""
    limit, least = f"{100 * threshold:g}%", f"{100 * float(kept.min()):.2g}%"
    greyed = int((kept < threshold).sum())
    if not greyed:
        return (
            f"Every row keeps at least {limit} of its weight once the special tokens are hidden (the least "
            f"{least}), so every row is drawn renormalised."
        )
    rows = f"{greyed} of {len(kept)} rows keep" if greyed > 1 else f"1 of {len(kept)} rows keeps"
    return (
        f"{rows} less than {limit} of {'their' if greyed > 1 else 'its'} weight once the special tokens are hidden "
        f"(the least {least}); renormalised from so little, {'they are' if greyed > 1 else 'it is'} greyed, "
        "not drawn as weights."
    )


def greyed_table_caption(statistics: list[dict], queries: int) -> str:
    """The sentence under the statistics table with special tokens hidden: how many rows of all heads were
    renormalised from less than ``NEGLIGIBLE_MASS`` of their weight (``statistics``: ``head_statistics`` rows
    with their ``GREYED_COLUMN``; ``queries``: rows per head)."""
    greyed = sum(int(row[GREYED_COLUMN]) for row in statistics)
    total, limit = queries * len(statistics), f"{100 * NEGLIGIBLE_MASS:g}%"
    if not greyed:
        return f"No row of any head keeps less than {limit} of its weight once the special tokens are hidden."
    heads = sum(1 for row in statistics if row[GREYED_COLUMN])
    some = f"{heads} heads have some" if heads > 1 else "1 head has some"
    return (
        f"{greyed} of the {total} rows of all {len(statistics)} heads keep less than {limit} of their weight once "
        f'the special tokens are hidden ({some}; the column "{GREYED_COLUMN}" counts them): '
        "their figure greys them, the statistics above still average them renormalised."
    )


def rollout_not_drawn(stack) -> str | None:
    """Why the rollout of ``stack`` is not drawn, in the visitor's words, else None: it needs square maps, and it
    multiplies every layer in turn, so a stack with layers left out (Funnel's pooled layers) would lack their mixing."""
    if stack.attentions.shape[-1] != stack.attentions.shape[-2]:
        return "Rollout needs self-attention (square matrices): pick the encoder or decoder stack."
    if stack.layer_numbers is None:
        return None
    kept = [int(number) for number in stack.layer_numbers]
    missing = [str(number) for number in range(kept[-1]) if number not in kept]
    which = (
        f"layer {missing[0]} of this model is"
        if len(missing) == 1
        else f"layers {', '.join(missing)} of this model are"
    )
    return (
        f"Rollout multiplies every layer in turn, and {which} left out of this stack (the note above says why): "
        "without their mixing it would not be this model's rollout, so it is not drawn."
    )


@dataclass(frozen=True)
class Rollout(OnCapture):
    """Attention rollout through layer ``upto``; the result is (capture, [layer, query, key] rollout up to each
    layer), the rollout cached by the page (``ui.attention.cached_rollout``)."""

    upto: int = 0

    def result(self, progress=None):
        capture = super().result(progress)
        return capture, rollout_by_layer(capture.stacks[self.stack])

    def info(self, result=None) -> FigureInfo:
        return FigureInfo("Attention rollout", model=self.model, text=self.shown_text, where=(f"layers 0–{self.upto}",))

    def figure(self, result) -> Builder:
        capture, rollouts = result
        stack, rolled = capture.stacks[self.stack], rollouts[self.upto]
        return builder(
            token_matrix,
            rolled,
            stack.query_tokens,
            stack.key_tokens,
            info=self.info(),
            colorbar_title=f"rollout<br>darkest = {float(rolled.max()):.2f}",
            zmax=float(rolled.max()),
        )


@dataclass(frozen=True)
class AllHeads(OnCapture):
    """Every layer and head as one figure of thumbnails (``selected``: the head outlined)."""

    selected: tuple[int, int] | None = None

    def info(self, capture: AttentionCapture) -> FigureInfo:
        stack = capture.stacks[self.stack]
        where = (f"{stack.num_layers} layers × {stack.num_heads} heads",)
        return FigureInfo("All heads", model=self.model, text=self.shown_text, where=where)

    def figure(self, capture: AttentionCapture) -> Builder:
        # The tiled image is all the figure (and a later export) needs: the capture itself is not kept.
        stack = capture.stacks[self.stack]
        image, rows, columns = tiled(stack.attentions, stack.masks_by_layer())
        shape = (rows, columns, stack.num_layers, stack.num_heads)
        options = {} if self.selected is None else {"selected": self.selected}
        if stack.layer_numbers is not None:  # layers left out: rows named by the model's own numbers
            options["layer_numbers"] = tuple(int(number) for number in stack.layer_numbers)
        return builder(tiles_figure, image, *shape, info=self.info(capture), **options)


@dataclass(frozen=True)
class OneQuery(OnCapture):
    """One query token of one head."""

    layer: int = 0
    head: int = 0
    query: int = 0

    title = "Attention step by step"

    def info(self, result=None) -> FigureInfo:
        where = (f"layer {self.layer}", f"head {self.head}", f"query #{self.query}")
        return FigureInfo(self.title, model=self.model, text=self.shown_text, where=where)


@dataclass(frozen=True)
class StepByStep(OneQuery):
    """Scaled dot-product attention for one query, stage by stage, with the model's own vectors."""

    def figure(self, capture: AttentionCapture) -> Builder:
        stack, layer, head = capture.stacks[self.stack], self.layer, self.head
        # Copies of what the figure draws, so a later export does not keep the whole capture alive.
        stages = score_stages(stack, layer, head)  # first: a weights-only stack has no vectors (InputError says so)
        queries, keys, values = stack.head_vectors(layer, head)  # at this layer's own width (Gemma 4's differ)
        query_vector, key_vectors = queries[self.query].copy(), keys.copy()
        values = None if values is None else values.copy()
        return builder(
            step_by_step_figure,
            stages,
            query_vector,
            key_vectors,
            values,
            stack.key_tokens,
            self.query,
            info=self.info(),
        )

    def caption(self, capture: AttentionCapture) -> str:
        """How far the recomputed softmax is from the model's own weights for this query."""
        stack = capture.stacks[self.stack]
        weights = score_stages(stack, self.layer, self.head)["weights"][self.query]
        difference = float(np.abs(weights - stack.attentions[self.layer, self.head, self.query]).max())
        return agreement_caption("recomputed softmax vs the model's own weights", difference)

    def formula(self, capture: AttentionCapture) -> str:
        """The formula this layer computes, in LaTeX (``step_formula``)."""
        stack = capture.stacks[self.stack]
        stages = score_stages(stack, self.layer, self.head)
        masks = not stack.masks_by_layer()[self.layer].all()
        return step_formula(stages, float(stack.scale[self.layer]), stack.head_dim(self.layer), masks=masks)

    def setting(self, capture: AttentionCapture, label: Callable[[str], str] = str) -> str:
        """The line under the formula: this query, its vectors' size, the scale, bias and mask as this head applies
        them (``step_setting``); ``label`` writes the token (the page's escapes it)."""
        stack = capture.stacks[self.stack]
        stages = score_stages(stack, self.layer, self.head)
        return step_setting(
            stages,
            float(stack.scale[self.layer]),
            stack.head_dim(self.layer),
            where=(self.query, label(stack.query_tokens[self.query]), self.layer, self.head),
            kv_head=int(stack.kv_head_of(self.layer)[self.head]),
        )


def _is_inverse_sqrt(scale: float, head_dim: int) -> bool:
    return abs(scale - head_dim**-0.5) < 1e-6


def step_formula(stages: dict[str, np.ndarray], scale: float, head_dim: int, *, masks: bool) -> str:
    """softmax(q Kᵀ · scale + b + m) V in LaTeX with only the terms this layer has: no scale where it is 1 (T5),
    ``b`` where a position bias is added (``score_stages``' ``biased``), ``m`` where the layer masks some key
    (``masks``), softcapping around the scaled scores (Gemma 2)."""
    scores = r"q K^\top"
    if scale != 1.0:
        factor = rf"\tfrac{{1}}{{\sqrt{{{head_dim}}}}}" if _is_inverse_sqrt(scale, head_dim) else f"{scale:g}"
        scores += rf" \cdot {factor}"
    if "capped" in stages:
        scores = rf"\mathrm{{softcap}}({scores})"
    scores += " + b" if "biased" in stages else ""
    scores += " + m" if masks else ""
    return r"\mathrm{Attention}(q, K, V) = \mathrm{softmax}\!\left(" + scores + r"\right) V"


def step_setting(
    stages: dict[str, np.ndarray], scale: float, head_dim: int, *, where: tuple[int, str, int, int], kv_head: int
) -> str:
    """The step-by-step page's line for one query (``where``: its index, its token as written, layer, head):
    the scale as the layer applies it, the bias where it is added, how many keys this query may not see."""
    query, token, layer, head = where
    if scale == 1.0:
        scaled = "no scale (q·k is not divided: T5 does not scale)"
    else:
        scaled = f"scale = {scale:.6g}" + (f" = 1/√{head_dim}" if _is_inverse_sqrt(scale, head_dim) else "")
    said = [f"Query #{query} “{token}”, layer {layer}, head {head}: q and each k have {head_dim} numbers; {scaled}"]
    if "capped" in stages:
        said.append("softcapping first (Gemma 2)")
    if "biased" in stages:
        said.append("its relative position bias b is added")
    if "sink" in stages:  # GPT-OSS: the row's softmax covers one more logit, whose weight no key gets
        share = 1 - float(stages["weights"][query].sum())
        said.append(f"an attention sink (logit {stages['sink'][query]:.4g}) joins the softmax and takes {share:.3f}")
    masked = int(np.isneginf(stages["masked"][query]).sum())
    keys = stages["masked"].shape[-1]
    if masked:
        said.append(f"{masked} of its {keys} keys {'are' if masked > 1 else 'is'} masked (m = −∞, weight 0)")
    else:
        said.append(f"it sees all {keys} keys (m = 0)")
    return "; ".join(said) + f". Query head {head} reads key/value head {kv_head}."


@dataclass(frozen=True)
class Neuron(OneQuery):
    """The query's and every key's components as coloured bands, their products, the dot product and softmax."""

    title = "Neuron view"

    def stages(self, capture: AttentionCapture) -> dict[str, np.ndarray]:
        """This query's row of each step the figure draws (``query_stages``), ending with ``weights``."""
        return query_stages(capture.stacks[self.stack], self.layer, self.head, self.query)

    def figure(self, capture: AttentionCapture) -> Builder:
        stack, layer, head, query = capture.stacks[self.stack], self.layer, self.head, self.query
        scores = {name: row for name, row in self.stages(capture).items() if name != "weights"}  # first: see above
        queries, keys, _ = stack.head_vectors(layer, head)  # at this layer's own width
        query_vector, key_vectors = queries[query].copy(), keys.copy()
        row, token = stack.attentions[layer, head, query].copy(), stack.query_tokens[query]
        return builder(
            neuron_view_figure, query_vector, key_vectors, scores, row, stack.key_tokens, token, info=self.info()
        )

    def caption(self, capture: AttentionCapture) -> str:
        """What the score columns are for this model and query, and the softmax of the last one checked against
        the model's own weights (the bars)."""
        stack, stages = capture.stacks[self.stack], self.stages(capture)
        own = stack.attentions[self.layer, self.head, self.query]
        checked = agreement_caption(
            "softmax of the last score column vs the model's own weights", float(np.abs(stages["weights"] - own).max())
        )
        return f"{neuron_caption(stages, float(stack.scale[self.layer]))} {checked}"


def neuron_caption(stages: dict[str, np.ndarray], scale: float) -> str:
    """The neuron view's steps in words, from the stages it draws (``query_stages``) and the layer's scale."""
    said = ["The bands are the vectors the model's own attention used (after rotary embeddings and q/k norms where "
            "it has them); the bars are its own weights."]  # fmt: skip
    if "scaled" in stages:
        said.append(f"q·k is multiplied by the scale {scale:.6g}.")
    else:
        said.append("This model does not scale q·k (scale 1, as in T5).")
    if "capped" in stages:
        said.append("The scores are softcapped (Gemma 2).")
    if "bias" in stages:
        said.append("Its relative position bias b (learnt per head, one number per bucket of query–key distances) "
                    "is added.")  # fmt: skip
    masked = int(np.isneginf(stages["masked"]).sum()) if "masked" in stages else 0
    if masked:
        said.append(f"{masked} masked key{'s get' if masked > 1 else ' gets'} −∞, so weight 0.")
    elif "masked" in stages:
        said.append("This query sees every key; other queries of this layer have masked keys (−∞).")
    return " ".join(said)


@dataclass(frozen=True)
class BertViz(OnCapture):
    """BertViz's head view (``which`` "head": one layer's lines, ``head`` selected) or model view ("model"), as the
    HTML of a frame; ``layers``: those drawn (None: every one)."""

    which: str = "head"
    layers: tuple[int, ...] | None = None
    head: int = 0

    def zoom(self, capture: AttentionCapture, height: float) -> float:
        """How much to enlarge the head view to fill ``height`` pixels (a projector)."""
        return head_view_zoom(capture, height) if self.which == "head" else 1.0

    def html(self, capture: AttentionCapture, zoom: float = 1.0, width: float | None = None) -> str:
        """The frame's HTML; ``width``: the head view's lines stretched to that many pixels (a projector)."""
        layers = list(self.layers) if self.layers else None
        if self.which == "head":
            return head_view_html(
                capture,
                layers=layers,
                heads=[self.head],
                layer=layers[0] if layers else None,
                zoom=zoom,
                width=width,
            )
        return model_view_html(capture, layers=layers)

    def height(self, capture: AttentionCapture, zoom: float = 1.0) -> int:
        shown = None if self.layers is None else len(self.layers)
        return frame_height(self.which, capture, layers=shown, zoom=zoom)

    def info(self, capture: AttentionCapture) -> FigureInfo:
        stack = capture.stacks[self.stack]
        first = stack.layer_number(self.layers[0] if self.layers else 0)  # the model's own number, as BertViz's
        if self.which == "head":
            return FigureInfo(
                "Head view", model=self.model, text=self.shown_text, where=(f"layer {first}", f"head {self.head}")
            )
        shown = (f"layer {first}",) if self.layers else (f"{stack.num_layers} layers × {stack.num_heads} heads",)
        return FigureInfo("Model view", model=self.model, text=self.shown_text, where=shown)

    def figure(self, capture: AttentionCapture) -> Builder:
        """The slide the exports draw (1920×1080, through the export worker's browser): BertViz cannot export."""
        layers = list(self.layers) if self.layers else None
        info = self.info(capture)
        if self.which == "head":
            first = layers[0] if layers else 0
            return builder(head_view_slide, capture, info=info, layers=layers, heads=[self.head], layer=first)
        return builder(model_view_slide, capture, info=info, layers=layers)


# The chapter toy's figures: (title, where).
TOY_FIGURES = {
    "steps": ("Chapter toy attention", None),
    "mask": ("Attention mask", ("chapter toy",)),
    "scores": ("Masked scores", ("chapter toy",)),
}


@dataclass(frozen=True)
class Toy:
    """The chapter's attention with no learnt weights (q = k = v = the tokens' embeddings, no positions): one
    query's stages (``show`` "steps"), or, causal, the mask and the scores it masks ("mask", "scores")."""

    model: str
    text: str  # as the page shows it
    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    query: int = 0
    causal: bool = False
    show: str = "steps"
    # "model": the model's own embedding rows; "random": the chapter's setting, seeded standard-normal vectors of
    # the model's width (entries of size 1, length about √d), so that each token's score with itself dominates
    embeddings: str = "model"
    seed: int = 0
    # whether the special tokens ([CLS], [SEP]) are among the tokens: the chapter's toy runs on the words alone
    specials: bool = True

    def result(self, progress=None):
        """The tokens' embeddings (``Embeddings``: the model's input embedding rows)."""
        return gateway.run("embeddings", self.model, self.token_ids, progress=progress)

    def vectors(self, found) -> np.ndarray:
        """[token, hidden] what serves as queries, keys and values: the model's rows or the seeded random ones."""
        if self.embeddings == "model":
            return found.token
        return np.random.default_rng(self.seed).standard_normal(found.token.shape).astype(np.float32)

    def setting(self) -> str:
        """Which embeddings are shown, in words."""
        return "the model's embeddings" if self.embeddings == "model" else f"random embeddings, seed {self.seed}"

    def stages(self, found) -> dict:
        return toy_stages(self.vectors(found), causal=self.causal)

    def info(self, found=None) -> FigureInfo:
        title, where = TOY_FIGURES[self.show]
        where = where or (f"query #{self.query}",)
        return FigureInfo(title, model=self.model, text=self.text, where=(*where, self.setting()))

    def figure(self, found) -> Builder:
        vectors, tokens, info = self.vectors(found), list(self.tokens), self.info()
        if self.show == "mask":
            mask = np.tril(np.ones((len(tokens), len(tokens)), dtype=bool))
            return builder(mask_heatmap, mask, tokens, tokens, info=info)
        stages = self.stages(found)
        if self.show == "scores":
            return builder(scores_heatmap, stages["masked"], tokens, tokens, info=info)
        vectors = (vectors[self.query].copy(), vectors, vectors)  # query, keys, values: the embeddings all three
        return builder(step_by_step_figure, stages, *vectors, tokens, self.query, info=info)

    def caption(self, found, reference: np.ndarray) -> str:
        """The toy's outputs checked against ``reference`` (torch's own scaled_dot_product_attention)."""
        difference = float(np.abs(self.stages(found)["output"] - reference).max())
        checked = "the outputs (weights × X) against torch's own scaled_dot_product_attention"
        return agreement_caption(checked, difference)
