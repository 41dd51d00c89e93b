"""Head-type probes: scores that name what a head does, measured on a random sequence repeated twice.

The sequence is ``offset`` leading tokens (the model's own start tokens, if any), then n random tokens A, then
A again; positions use the axis names of ``explorer.data`` ([layer, head, query, key] weights). On the second
copy, an **induction head** (Olsson et al., 2022) attends from a token to the token that followed that
token's previous occurrence (i - n + 1); a **duplicate-token head** to the previous occurrence itself (i - n);
a **previous-token head** to the token just before (i - 1); and a **sink** puts its weight on the first token.
"""

from __future__ import annotations

import numpy as np

# Each score in words, as the head types page and its figure titles name it.
SCORE_NAMES = {
    "induction": "Induction",
    "duplicate": "Duplicate token",
    "previous": "Previous token",
    "sink": "First token",
}
MEANINGS = {
    "induction": "Mean weight, over the second copy, from each token to the token that followed its previous "
    "occurrence: such a head can copy what came next last time (the core of in-context learning).",
    "duplicate": "Mean weight, over the second copy, from each token to its own previous occurrence: the head "
    "finds repeated tokens.",
    "previous": "Mean weight from each token to the one just before it: the head passes each token its "
    "neighbour (induction heads read what such heads wrote).",
    "sink": "Mean weight on the first token, over every later token: a resting place for heads with nothing to do.",
}


# A head "stands out" as a type when its score is at least this high and this many times what a head spreading
# its weight evenly scores (issue 41's bar): near the even-spread level a score says nothing about the head.
STANDS_OUT_SCORE = 0.3
STANDS_OUT_RATIO = 5.0
# Where each type's weights lie in the figure (query rows, key columns), said only of a head that stands out.
PATTERNS = {
    "induction": "below the dashed line, a stripe one step right of the diagonal n tokens back",
    "duplicate": "below the dashed line, a stripe n tokens back, parallel to the diagonal",
    "previous": "a stripe just left of the diagonal",
    "sink": "a column at the first key",
}


def stands_out(score: float, uniform: float) -> bool:
    """Whether ``score`` is at least ``STANDS_OUT_SCORE`` and ``STANDS_OUT_RATIO`` × the even-spread ``uniform``."""
    return score >= STANDS_OUT_SCORE and score >= STANDS_OUT_RATIO * uniform


def probe_scores(weights: np.ndarray, n: int, offset: int = 0) -> dict[str, np.ndarray]:
    """{score: [layer, head]} for weights [layer, head, query, key] over offset + 2n positions."""
    if weights.shape[-1] != offset + 2 * n:
        raise ValueError(f"expected {offset + 2 * n} positions, got {weights.shape[-1]}")
    second = np.arange(offset + n, offset + 2 * n)  # queries of the second copy
    later = np.arange(1, weights.shape[-1])
    return {
        "induction": weights[..., second, second - n + 1].mean(axis=-1),
        "duplicate": weights[..., second, second - n].mean(axis=-1),
        "previous": weights[..., later, later - 1].mean(axis=-1),
        "sink": weights[..., later, 0].mean(axis=-1),
    }


def uniform_scores(mask: np.ndarray, n: int, offset: int = 0) -> dict[str, float]:
    """{score: what a head scores that spreads each query's weight evenly over the keys ``mask`` [query, key] lets
    it see}: the level a score must rise above to say anything (for a causal model's induction score about
    ln 2 / n, not 0)."""
    allowed = mask.astype(np.float64)
    even = allowed / allowed.sum(axis=-1, keepdims=True)
    return {name: float(values[0, 0]) for name, values in probe_scores(even[None, None], n, offset).items()}
