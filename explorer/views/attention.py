"""Attention views: one head of one stack as a heatmap (its weights, its scores before softmax, or its layer's
mask), from the capture of the text, and the capture's check against a recomputation."""

from __future__ import annotations

from dataclasses import dataclass

from explorer import gateway
from explorer.compute.attention import score_stages
from explorer.data import AttentionCapture
from explorer.render.heatmap import mask_heatmap, masked_weights, scores_heatmap, verification_caption, weights_heatmap
from explorer.render.style import FigureInfo
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
        place = (f"layer {self.layer}", f"head {self.head}") if one_head else (f"layer {self.layer}",)
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
    kv_heads = len(set(capture.main.kv_head_of_query.tolist()))
    remarks = [
        f"{kv_heads} KV heads" if kv_heads < capture.main.num_heads else "",
        f"{capture.truncated} tokens cut to fit" if capture.truncated else "",
        capture.dtype if capture.dtype != "float32" else "",
        f"{len(capture.ablated)} head{'s' if len(capture.ablated) > 1 else ''} ablated" if capture.ablated else "",
    ]
    present = [remark for remark in remarks if remark]
    return f" ({'; '.join(present)})" if present else ""
