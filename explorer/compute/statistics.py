"""Head statistics and view transforms on attention weights: pure NumPy, checked on hand-computed matrices.

Shapes use the axis names of ``explorer.data``; ``weights`` is [layer, head, query, key] with rows summing to 1
over the keys a query may see.
"""

from __future__ import annotations

import numpy as np


def entropy(weights: np.ndarray) -> np.ndarray:
    """Mean over queries of each row's entropy in nats (natural logarithms, the unit of every entropy and
    log-probability the app shows): 0 when a head looks at one token, ln(n) when spread evenly over n. [layer, head]"""
    p = weights.astype(np.float64)
    terms = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return terms.sum(axis=-1).mean(axis=-1)


def mean_distance(weights: np.ndarray, key_positions=None) -> np.ndarray:
    """Mean over queries of the attention-weighted |query − key| distance, in tokens. [layer, head]

    ``key_positions`` gives the original position of each key column (after a view hid some tokens).
    """
    queries, keys = weights.shape[-2:]
    positions = np.arange(keys) if key_positions is None else np.asarray(key_positions)
    distance = np.abs(np.arange(queries)[:, None] - positions[None, :])
    return (weights.astype(np.float64) * distance).sum(axis=-1).mean(axis=-1)


def share_on(weights: np.ndarray, positions, key_positions=None) -> np.ndarray:
    """Mean over queries of the weight on the keys at the given (original) positions. [layer, head]"""
    columns = _columns(weights.shape[-1], positions, key_positions)
    if columns.size == 0:
        return np.zeros(weights.shape[:2])
    return weights[..., columns].astype(np.float64).sum(axis=-1).mean(axis=-1)


def previous_token_score(weights: np.ndarray, key_positions=None) -> np.ndarray:
    """Mean over queries 1.. of the weight on the token just before (a previous-token head scores near 1)."""
    queries, keys = weights.shape[-2:]
    if queries < 2:
        return np.zeros(weights.shape[:2])
    positions = list(range(keys)) if key_positions is None else [int(p) for p in key_positions]
    column_of = {position: column for column, position in enumerate(positions)}
    scores = [
        weights[..., q, column_of[q - 1]] if q - 1 in column_of else np.zeros(weights.shape[:2])
        for q in range(1, queries)
    ]
    return np.mean(np.stack(scores, axis=-1).astype(np.float64), axis=-1)


def _columns(keys: int, positions, key_positions) -> np.ndarray:
    wanted = {int(p) for p in positions}
    originals = range(keys) if key_positions is None else key_positions
    return np.array([column for column, p in enumerate(originals) if int(p) in wanted], dtype=int)


def max_weight(weights: np.ndarray) -> np.ndarray:
    """The largest single weight of each head. [layer, head]"""
    return weights.reshape(*weights.shape[:2], -1).max(axis=-1).astype(np.float64)


def head_statistics(weights: np.ndarray, special_positions=(), key_positions=None, kept=None) -> list[dict]:
    """One row per (layer, head) with every statistic, for a sortable table (``key_positions``: see above).
    ``kept`` [layer, head, query]: the weight rows kept before hiding tokens (``kept_mass``), for a column that
    counts the rows renormalised from a negligible share (``NEGLIGIBLE_MASS``)."""
    columns = {
        "entropy (nats)": entropy(weights),
        "mean distance": mean_distance(weights, key_positions),
        "first-token share": share_on(weights, [0], key_positions),
        "special-token share": share_on(weights, special_positions, key_positions),
        "previous-token score": previous_token_score(weights, key_positions),
        "max weight": max_weight(weights),
    }
    if kept is not None:
        columns[GREYED_COLUMN] = (np.asarray(kept) < NEGLIGIBLE_MASS).sum(axis=-1)
    layers, heads = weights.shape[:2]
    return [
        {"layer": layer, "head": head, **{name: float(values[layer, head]) for name, values in columns.items()}}
        for layer in range(layers)
        for head in range(heads)
    ]


def without_tokens(weights: np.ndarray, hidden_positions) -> tuple[np.ndarray, np.ndarray]:
    """A view transform: drop some key positions (special tokens) and renormalise each row over the rest.

    Returns (weights [..., query, kept key], kept key positions). Rows that only attended to dropped keys
    become 0 rather than 0/0. The hidden queries stay (their rows are renormalised too).
    """
    hidden = set(int(p) for p in hidden_positions)
    kept = np.array([k for k in range(weights.shape[-1]) if k not in hidden], dtype=int)
    kept_weights = weights[..., kept].astype(np.float64)
    totals = kept_weights.sum(axis=-1, keepdims=True)
    return np.where(totals > 0, kept_weights / np.where(totals > 0, totals, 1.0), 0.0), kept


# A row that keeps less than this share of its weight once some tokens are hidden is renormalised from almost
# nothing (2.7e-6 of it would be drawn as a strong cell): the views grey it instead.
NEGLIGIBLE_MASS = 0.01
GREYED_COLUMN = f"rows keeping < {100 * NEGLIGIBLE_MASS:g}%"


def kept_mass(weights: np.ndarray, hidden_positions) -> np.ndarray:
    """The share of each row's weight left on the keys that stay when ``hidden_positions`` are dropped: what
    ``without_tokens`` divides by. [..., query]"""
    hidden = set(int(p) for p in hidden_positions)
    kept = [k for k in range(weights.shape[-1]) if k not in hidden]
    return weights[..., kept].astype(np.float64).sum(axis=-1)


def rollout(weights: np.ndarray, *, residual: float = 0.5) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema, 2020): how much each token's information reaches each position
    through all layers. Per layer, average the heads, add the identity for the residual path
    (``residual`` · I + (1 − residual) · A), renormalise rows, and multiply the layers in order.

    weights [layer, head, query, key] of a square self-attention stack; returns [layer, query, key]: the
    rollout up to and including each layer (the last is the whole stack's).
    """
    mean = weights.astype(np.float64).mean(axis=1)
    size = mean.shape[-1]
    mixed = residual * np.eye(size) + (1 - residual) * mean
    mixed /= mixed.sum(axis=-1, keepdims=True)
    result = np.empty_like(mixed)
    running = np.eye(size)
    for layer in range(mixed.shape[0]):
        running = mixed[layer] @ running
        result[layer] = running
    return result
