"""The lecture's parameter counts, as pure arithmetic on a model's sizes.

The chapter counts weight matrices and layer norms, not biases: an encoder layer is 4d² (Q, K, V, O) + 8d² (a
feed-forward block of width 4d) + 2·2d (two layer norms) = 12d² + 4d; a decoder layer with cross-attention adds
4d² and a third norm: 16d² + 6d. With tied embeddings the whole encoder-decoder is (|V| + l_c)·d + (28d² + 10d)·L.
Here the same sums use the model's own feed-forward width d_ff (2·d·d_ff instead of 8d²), so the formula stays
the chapter's when d_ff = 4d and stays right when it is not. ``lecture_count`` sets the formula beside the
model's real count; the difference is the biases (counted) and whatever the lecture's model does not have.
"""

from __future__ import annotations

from dataclasses import dataclass

MB = 2**20  # the lecture's "MB": 61 M parameters × 4 bytes = 232.7 MB


def encoder_layer(d: int, d_ff: int) -> int:
    """Self-attention 4d², feed-forward 2·d·d_ff, two layer norms 2·2d (12d² + 4d when d_ff = 4d)."""
    return 4 * d * d + 2 * d * d_ff + 4 * d


def decoder_layer(d: int, d_ff: int) -> int:
    """Self- and cross-attention 8d², feed-forward 2·d·d_ff, three layer norms 3·2d (16d² + 6d when d_ff = 4d)."""
    return 8 * d * d + 2 * d * d_ff + 6 * d


@dataclass(frozen=True)
class LectureCount:
    """The lecture's formula for a model, its value, and how the model's real count differs from it."""

    formula: str  # in LaTeX, with the symbols
    embeddings: int  # (|V| + l_c)·d
    per_layer: int  # one layer (encoder-decoder: one encoder plus one decoder layer)
    layers: int
    formula_total: int
    actual_total: int
    biases: int  # in the model, left out by the formula

    @property
    def other_difference(self) -> int:
        """What the formula and the biases do not account for (e.g. a pooler, an untied output layer, a final
        norm, token-type embeddings; negative where the model lacks a part the formula counts)."""
        return self.actual_total - self.formula_total - self.biases


def lecture_count(
    *, d: int, d_ff: int, layers: int, vocabulary: int, positions: int, encoder_decoder: bool, actual: int, biases: int
) -> LectureCount:
    """The lecture's whole-model count with these sizes. ``positions`` is l_c, the learned position table's
    length (0 for rotary or relative positions, which have no table); ``layers`` is L (per stack)."""
    per_layer = encoder_layer(d, d_ff) + (decoder_layer(d, d_ff) if encoder_decoder else 0)
    embeddings = (vocabulary + positions) * d
    formula = r"(|V| + l_c)\,d + (28d^2 + 10d)\,L" if encoder_decoder else r"(|V| + l_c)\,d + (12d^2 + 4d)\,L"
    return LectureCount(
        formula=formula,
        embeddings=embeddings,
        per_layer=per_layer,
        layers=layers,
        formula_total=embeddings + per_layer * layers,
        actual_total=actual,
        biases=biases,
    )


def memory_mb(parameters: int, bits: int) -> float:
    """The weights' size at ``bits`` per parameter, in the lecture's MB (2²⁰ bytes)."""
    return parameters * bits / 8 / MB


def lecture_rows(count: LectureCount) -> list[dict]:
    """The formula's terms, the biases it leaves out, and the rest, adding up to the model's real count."""
    return [
        {"term": "embeddings (|V| + l_c)·d", "parameters": count.embeddings},
        {"term": f"layers: {count.layers} × {count.per_layer:,}", "parameters": count.per_layer * count.layers},
        {"term": "the lecture's total", "parameters": count.formula_total},
        {"term": "+ biases (the formula leaves them out)", "parameters": count.biases},
        {
            "term": "+ other parts (pooler, final norm, untied head, …; − parts it lacks)",
            "parameters": count.other_difference,
        },
        {"term": "this model's real count", "parameters": count.actual_total},
    ]


def shape_trail(
    *,
    tokens: int,
    width: int,
    vocabulary: int,
    position_rows: int | None,
    token_types: bool,
    norm: str | None,
    position_scheme: str,
) -> list[dict]:
    """From token ids to the first layer's input, each step with its shape ([token] is the input's length n,
    [hidden] the model width d). ``position_rows`` is the learned position table's length, None without one."""
    n, d = tokens, width
    rows = [
        {"step": "token ids", "shape": f"[{n}]", "how": "the tokenizer's ids, one per token"},
        {
            "step": "token embeddings",
            "shape": f"[{n}, {d}]",
            "how": f"row id of the [{vocabulary:,}, {d}] embedding matrix",
        },
    ]
    if position_rows:
        rows.append(
            {
                "step": "+ position embeddings",
                "shape": f"[{n}, {d}]",
                "how": f"rows 0–{n - 1} of the learned [{position_rows:,}, {d}] position table",
            }
        )
    else:
        rows.append(
            {
                "step": "(positions)",
                "shape": "–",
                "how": f"{position_scheme}: applied inside attention, nothing is added here",
            }
        )
    if token_types:
        rows.append({"step": "+ token type embeddings", "shape": f"[{n}, {d}]", "how": "segment A or B, one row each"})
    rows.append({"step": "= sum", "shape": f"[{n}, {d}]", "how": "added element by element"})
    if norm:
        rows.append({"step": "LayerNorm", "shape": f"[{n}, {d}]", "how": f"the model's {norm}, per token"})
    rows.append({"step": "→ layer 1's input", "shape": f"[{n}, {d}]", "how": "what the first layer receives"})
    return rows
