"""The lecture's parameter counts, as pure arithmetic on a model's sizes.

The chapter counts weight matrices and layer norms, not biases: an encoder layer is 4d² (Q, K, V, O) + 8d² (a
feed-forward block of width 4d) + 2·2d (two layer norms) = 12d² + 4d; a decoder layer with cross-attention adds
4d² and a third norm: 16d² + 6d. With tied embeddings the whole encoder-decoder is (|V| + l_c)·d + (28d² + 10d)·L.
Here the same sums use the model's own feed-forward width d_ff (2·d·d_ff instead of 8d²), so the formula stays
the chapter's when d_ff = 4d and stays right when it is not. ``lecture_count`` sets the formula beside the
model's real count; the difference is the biases (counted) and whatever the lecture's model does not have.

``layer_against_textbook`` sets one layer of a model beside the original Transformer's layer, biases included,
block by block, with every difference taken apart into reasons that add up to it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MIB = 2**20  # bytes in a MiB, what the lecture calls "MB": 61 M parameters × 4 bytes = 232.7 MiB (244 MB)
_LAYER_NAME = re.compile(r"\.(?:layer|layers|h|block|blocks)\.\d+\.")  # as ``explorer.models.anatomy`` reads it


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


def model_lecture_count(anatomy) -> LectureCount:
    """``lecture_count`` with a ``ModelAnatomy``'s sizes and real count (its width and d_ff must be known)."""
    return lecture_count(
        d=anatomy.width,
        d_ff=anatomy.ffn_size,
        layers=anatomy.layers,
        vocabulary=anatomy.vocabulary,
        positions=anatomy.position_rows,
        encoder_decoder=anatomy.kind == "encoder-decoder",
        actual=anatomy.total_parameters,
        biases=anatomy.bias_parameters,
    )


def textbook_layer(d: int, d_ff: int, *, cross: bool = False) -> dict[str, int]:
    """The original Transformer's layer (Vaswani et al., 2017), biases included: 4d² + 4d per attention block
    (Q, K, V and O, each with a bias), a feed-forward 2·d·d_ff + d_ff + d, and a LayerNorm (scale and bias, 2d)
    after each block. An encoder layer has one attention block; a decoder layer with cross-attention two."""
    blocks = 2 if cross else 1
    return {
        "attention": blocks * (4 * d * d + 4 * d),
        "feed-forward": 2 * d * d_ff + d_ff + d,
        "norms": (blocks + 1) * 2 * d,
    }


def textbook_formula(*, cross: bool = False) -> str:
    """``textbook_layer``'s formula in LaTeX."""
    attention = r"2\,(4d^2 + 4d)" if cross else r"4d^2 + 4d"
    return (
        rf"\text{{attention: }} {attention} \qquad \text{{feed-forward: }} 2\,d\,d_{{ff}} + d_{{ff}} + d \qquad "
        rf"\text{{norms: }} {3 if cross else 2} \cdot 2d"
    )


@dataclass(frozen=True)
class Term:
    """One reason a block of a model's layer differs from the textbook's, and by how many parameters."""

    reason: str
    parameters: int


@dataclass(frozen=True)
class BlockComparison:
    """One block of a layer (attention, feed-forward, norms, other) against the textbook's; ``terms`` add up
    to ``actual − textbook`` exactly (what no rule here explains is a term of its own, "not recognised")."""

    block: str
    textbook: int
    actual: int
    terms: tuple[Term, ...]

    @property
    def difference(self) -> int:
        return self.actual - self.textbook


# Which block each part of a layer (``explorer.models.anatomy.PARTS``) belongs to; anything else is "other".
_BLOCK_OF_PART = {
    "attention weights": "attention",
    "attention biases": "attention",
    "cross-attention weights": "attention",
    "cross-attention biases": "attention",
    "relative position bias": "attention",
    "feed-forward weights": "feed-forward",
    "feed-forward biases": "feed-forward",
    "norm scales": "norms",
    "norm biases": "norms",
    "query/key norm scales": "norms",
    "query/key norm biases": "norms",
}


def layer_against_textbook(
    parts: dict[str, int], *, d: int, d_ff: int, heads: int, kv_heads: int, head_dim: int, norm_kind: str
) -> tuple[BlockComparison, ...]:
    """A layer's parameters by part (``LayerCounts.parts``) against ``textbook_layer`` with the same d and d_ff
    (with cross-attention where the layer has it), block by block, each difference explained."""
    cross = parts.get("cross-attention weights", 0) > 0
    book = textbook_layer(d, d_ff, cross=cross)
    blocks = 2 if cross else 1
    terms = {
        "attention": _attention_terms(parts, d, heads, kv_heads, head_dim, blocks),
        "feed-forward": _feed_forward_terms(parts, d, d_ff),
        "norms": _norm_terms(parts, d, blocks, norm_kind, head_dim),
    }
    actual = dict.fromkeys([*book, "other"], 0)
    for part, count in parts.items():
        actual[_BLOCK_OF_PART.get(part, "other")] += count
    rows = [_comparison(block, book[block], actual[block], terms[block]) for block in book]
    if actual["other"]:
        rows.append(
            BlockComparison("other", 0, actual["other"], (Term("parts the textbook layer has not", actual["other"]),))
        )
    return tuple(rows)


def _comparison(block: str, textbook: int, actual: int, terms: list[Term]) -> BlockComparison:
    rest = actual - textbook - sum(term.parameters for term in terms)
    return BlockComparison(
        block, textbook, actual, tuple(terms) + ((Term("not recognised here", rest),) if rest else ())
    )


def _attention_terms(parts, d: int, heads: int, kv_heads: int, head_dim: int, blocks: int) -> list[Term]:
    inner, kv = heads * head_dim, kv_heads * head_dim
    each = " in each attention block" if blocks > 1 else ""
    terms = []
    if inner != d:
        terms.append(Term(f"Q and O are d × {inner:,} ({heads} heads × head_dim {head_dim}), not d × d{each}",
                          blocks * 2 * d * (inner - d)))  # fmt: skip
    if kv != d:
        why = (
            f"grouped-query attention: {heads} query heads share {kv_heads} key/value heads, so K and V are d × {kv:,}"
            if kv_heads < heads
            else f"K and V are d × {kv:,} ({kv_heads} heads × head_dim {head_dim})"
        )
        terms.append(Term(f"{why}, not d × d{each}", blocks * 2 * d * (kv - d)))
    biases = parts.get("attention biases", 0) + parts.get("cross-attention biases", 0)
    if biases != blocks * 4 * d:
        why = "no biases in Q, K, V and O" if biases == 0 else f"{biases:,} attention biases"
        terms.append(Term(f"{why}, where the textbook has 4d{each}", biases - blocks * 4 * d))
    table = parts.get("relative position bias", 0)
    if table:
        size = f"{table // heads} buckets × {heads} heads" if table % heads == 0 else f"{table:,} values"
        terms.append(Term(f"the relative position bias table ({size}): a stack's first layer holds it for all", table))
    return terms


def _feed_forward_terms(parts, d: int, d_ff: int) -> list[Term]:
    weights, biases = parts.get("feed-forward weights", 0), parts.get("feed-forward biases", 0)
    terms = []
    if weights == 3 * d * d_ff:
        terms.append(Term("a gated feed-forward (gate, up and down): three d × d_ff matrices, not two", d * d_ff))
    elif weights != 2 * d * d_ff:
        terms.append(Term(f"{weights:,} feed-forward weights, where the textbook has 2·d·d_ff", weights - 2 * d * d_ff))
    if biases != d_ff + d:
        why = "no biases in the feed-forward" if biases == 0 else f"{biases:,} feed-forward biases"
        terms.append(Term(f"{why}, where the textbook has d_ff + d", biases - d_ff - d))
    return terms


def _norm_terms(parts, d: int, blocks: int, norm_kind: str, head_dim: int) -> list[Term]:
    expected = blocks + 1  # one after each block
    scales, biases = parts.get("norm scales", 0), parts.get("norm biases", 0)
    norms = scales // d
    terms = []
    if norms != expected:
        terms.append(Term(f"{norms} norms of width d, where the textbook has {expected}", (norms - expected) * 2 * d))
    if biases != norms * d:
        why = f"{norm_kind} has a scale and no bias" if biases == 0 else f"{biases:,} norm biases"
        terms.append(Term(f"{why}: {norms} × {d:,} values, not {norms} × 2 × {d:,}", biases - norms * d))
    inside = parts.get("query/key norm scales", 0) + parts.get("query/key norm biases", 0)
    if inside:
        terms.append(Term(f"norms of the queries and keys inside attention (width head_dim {head_dim})", inside))
    return terms


def memory_mb(parameters: int, bits: int) -> float:
    """The weights' size at ``bits`` per parameter in MiB (2²⁰ bytes: what the lecture calls "MB")."""
    return parameters * bits / 8 / MIB


def memory_text(parameters: int, bits: int) -> str:
    """The weights' size at ``bits`` per parameter in both units, named: "244.0 MB (232.7 MiB)"
    (MB = 10⁶ bytes, MiB = 2²⁰ bytes)."""
    size = parameters * bits / 8
    return f"{size / 1e6:,.1f} MB ({size / MIB:,.1f} MiB)"


def formula_gap(anatomy, count: LectureCount) -> tuple[Term, ...]:
    """What ``count.actual_total − count.formula_total`` is made of, read from the model's own parameters: the
    layers' parts the formula leaves out or counts otherwise (biases, a relative position table, norms without
    biases, weights of other shapes), and each module outside the layers beyond the token and position tables
    (a pooler, token-type embeddings, an embedding norm, a final norm, an untied output layer). The terms add up
    to the gap exactly; what no rule names is a term of its own ("not itemised")."""
    terms = [*_layer_gap(anatomy), *_outside_gap(anatomy)]
    rest = count.actual_total - count.formula_total - sum(term.parameters for term in terms)
    return tuple(term for term in (*terms, Term("not itemised", rest)) if term.parameters)


_LAYER_BIASES = ("attention biases", "cross-attention biases", "feed-forward biases")
_LAYER_WEIGHTS = ("attention weights", "cross-attention weights", "feed-forward weights")
_LAYER_NORMS = ("norm scales", "norm biases", "query/key norm scales", "query/key norm biases")


def _layer_gap(anatomy) -> list[Term]:
    d, d_ff = anatomy.width, anatomy.ffn_size
    rows = [row for row in anatomy.layer_counts if row.layer is not None]
    crossed = [row.parts.get("cross-attention weights", 0) > 0 for row in rows]
    part = lambda names: sum(row.parts.get(name, 0) for row in rows for name in names)  # noqa: E731
    weights = part(_LAYER_WEIGHTS) - sum((8 if cross else 4) * d * d + 2 * d * d_ff for cross in crossed)
    norms = part(_LAYER_NORMS) - sum((6 if cross else 4) * d for cross in crossed)
    other = sum(count for row in rows for kind, count in row.counts.items()) - sum(
        part(names) for names in (_LAYER_BIASES, _LAYER_WEIGHTS, _LAYER_NORMS, ("relative position bias",))
    )
    return [
        Term(f"biases of attention and feed-forward in the {len(rows)} layers", part(_LAYER_BIASES)),
        Term("relative position bias tables", part(("relative position bias",))),
        Term(f"layer norms' {'extra' if norms > 0 else 'missing'} values ({anatomy.norm_kind})", norms),
        Term("layer weights beyond 4d² + 2·d·d_ff (8d² with cross-attention)", weights),
        Term("other parameters in the layers", other),
    ]


def _outside_gap(anatomy) -> list[Term]:
    """Each module outside the layers, less the formula's token table (|V|·d) and position table (l_c·d)."""
    d, vocabulary = anatomy.width, anatomy.vocabulary
    outside = sum(sum(row.counts.values()) for row in anatomy.layer_counts if row.layer is None)
    modules = [
        (row.name, sum(math.prod(shape) for _, shape in row.parameters), row.parameters)
        for row in anatomy.modules
        if row.parameters and not _LAYER_NAME.search(f".{row.name}.")
    ]
    tables = [name for name, _, shapes in modules if _only_shape(shapes, (vocabulary, d))]
    positions = [name for name, _, shapes in modules if _only_shape(shapes, (anatomy.position_rows, d))][:1]
    others = [(name, count) for name, count, _ in modules if name not in tables and name not in positions]
    # Tied tables appear under each module that shares them; the distinct ones are what the count holds.
    distinct = (outside - sum(count for _, count in others) - anatomy.position_rows * d) // (vocabulary * d)
    untied = tables[len(tables) - distinct + 1 :] if distinct > 1 else []  # an output layer comes last
    return [Term(name, count) for name, count in others] + [
        Term(f"{name} (an output layer not tied to the embeddings)", vocabulary * d) for name in untied
    ]


def _only_shape(shapes, shape: tuple[int, int]) -> bool:
    return len(shapes) == 1 and tuple(shapes[0][1]) == shape


def lecture_rows(count: LectureCount, gap: tuple[Term, ...] | None = None) -> list[dict]:
    """The formula's terms, then what it leaves out, adding up to the model's real count: each part of ``gap``
    (``formula_gap``: named from the model's own parameters) where given, else the biases and the rest."""
    if gap is None:
        gap = (
            Term("biases (the formula leaves them out)", count.biases),
            Term("other parts (pooler, final norm, untied head, …; − parts it lacks)", count.other_difference),
        )
    return [
        {"term": "embeddings (|V| + l_c)·d", "parameters": count.embeddings},
        {"term": f"layers: {count.layers} × {count.per_layer:,}", "parameters": count.per_layer * count.layers},
        {"term": "the lecture's total", "parameters": count.formula_total},
        *({"term": f"+ {term.reason}", "parameters": term.parameters} for term in gap),
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
    position_offset: int = 0,
    token_projection: str | None = None,
    projection: str | None = None,
    hidden: int | None = None,
    trigram: bool = False,
    token_scale: float = 1.0,
    received: tuple[int, ...] | None = None,
    copied: bool = False,
) -> list[dict]:
    """From token ids to the first layer's input, each step with its shape ([token] is the input's length n,
    [hidden] the model width d). ``position_rows`` is the learned position table's length, None without one;
    ``position_offset`` the row position 0 reads. ``width`` is the embedding matrix's; a model whose layers are wider
    (``hidden``) maps its token rows (``token_projection``, each beside its neighbours' with ``trigram``) or its
    normalised sum (``projection``) to it. ``token_scale``: what the embedding module multiplies its rows by.
    ``received``: the first layer's input's shape where it is not [token, hidden] (several vectors per token, or
    rows of the model's own), ``copied`` where those are the sum copied into each stream."""
    n, d = tokens, width
    rows = [
        {"step": "token ids", "shape": f"[{n}]", "how": "the tokenizer's ids, one per token"},
        {
            "step": "token embeddings",
            "shape": f"[{n}, {d}]",
            "how": f"row id of the [{vocabulary:,}, {d}] embedding matrix"
            + (f", × {token_scale:.4g} (the model's embed_scale)" if token_scale != 1 else ""),
        },
    ]
    hidden = hidden or d
    if trigram:
        how = "each row beside the next and the previous token's (zeros past the ends): MobileBERT's trigram input"
        rows.append({"step": "+ neighbours", "shape": f"[{n}, {3 * d}]", "how": how})
    if token_projection:
        rows.append({"step": "projection", "shape": f"[{n}, {hidden}]", "how": f"the model's {token_projection}"})
        d = hidden
    if position_rows:
        first = f"rows {position_offset}–{position_offset + n - 1}"
        reserved = f" (positions 0–{n - 1}: the rows before are not positions)" if position_offset else ""
        rows.append(
            {
                "step": "+ position embeddings",
                "shape": f"[{n}, {d}]",
                "how": f"{first} of the learned [{position_rows:,}, {d}] position table{reserved}",
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
    if projection:
        rows.append({"step": "projection", "shape": f"[{n}, {hidden}]", "how": f"the model's {projection}"})
    last = {"step": "→ layer 1's input", "shape": f"[{n}, {hidden}]", "how": "what the first layer receives"}
    if received and tuple(received) != (n, hidden):
        how = "the sum copied into each of its streams" if copied else "more than the sum (the note below says why)"
        last |= {"shape": f"[{', '.join(map(str, received))}]", "how": f"what the first layer receives: {how}"}
    return [*rows, last]


def stack_layer_against_textbook(anatomy, row) -> tuple[BlockComparison, ...]:
    """``layer_against_textbook`` for one row of ``anatomy.layer_counts``, with the model's own sizes."""
    return layer_against_textbook(
        row.parts,
        d=anatomy.width,
        d_ff=anatomy.ffn_size,
        heads=anatomy.heads,
        kv_heads=anatomy.kv_heads,
        head_dim=anatomy.head_dim,
        norm_kind=anatomy.norm_kind,
    )
