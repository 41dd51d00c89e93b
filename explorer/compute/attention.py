"""Attention recomputed from queries and keys, in NumPy: the steps one head's figures show.

Shapes use the axis names of ``explorer.data``. The check of whole captures (``verify()``) runs in torch on the
model's device, in ``explorer.models.verification``; tests hold the two to the same numbers.
"""

from __future__ import annotations

import numpy as np

from explorer.data.attention import WEIGHTS_ONLY_NOTE
from explorer.errors import InputError


def masked_softmax(scores: np.ndarray, allowed: np.ndarray, sinks: np.ndarray | None = None) -> np.ndarray:
    """Softmax over keys where ``allowed`` [layer, query, key]; disallowed keys get weight 0. ``sinks`` [layer,
    head, query] or None: an attention sink's logit, one more term of each row's softmax whose weight is dropped
    (GPT-OSS), so the row sums to less than 1."""
    allowed = allowed[:, None, :, :]
    scores = np.where(allowed, scores, -np.inf)
    sink = np.full((*scores.shape[:-1], 1), -np.inf) if sinks is None else np.asarray(sinks, np.float64)[..., None]
    peak = np.maximum(scores.max(axis=-1, keepdims=True), sink)
    # A query with no allowed key would give 0/0; the model gives it a flat row we do not show.
    peak = np.where(np.isfinite(peak), peak, 0.0)
    weights = np.exp(scores - peak)
    total = weights.sum(axis=-1, keepdims=True) + np.exp(sink - peak)
    return weights / np.maximum(total, np.finfo(np.float64).tiny)


def head_outputs(attentions: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each head's weighted sum of values, ``attentions @ values``: [layer, head, query, head_dim].

    Concatenating the heads of a layer and applying its output projection gives the attention module's
    output (tests check it against the model).
    """
    return np.matmul(attentions.astype(np.float32), values.astype(np.float32))


def score_stages(stack, layer: int, head: int) -> dict[str, np.ndarray]:
    """The steps from one head's queries and keys to its weights, each [query, key] float64.

    ``dot`` q·k, ``scaled`` × scale, ``capped`` through the softcap (if any), ``biased`` + position bias (if
    any, and not all zeros), ``masked`` with −inf where the mask forbids attending, ``weights`` its softmax
    (beside the head's sink logit, for a model with attention sinks: equal to the captured weights up to float
    rounding). With attention sinks, ``sink`` [query] is the logit each row's softmax also covers.
    """
    if stack.weights_only:  # the model returned its weights alone (explorer.data.attention.WEIGHTS_ONLY_NOTE)
        raise InputError(f"Scores need the queries and keys: {WEIGHTS_ONLY_NOTE}")
    one = slice(layer, layer + 1)
    q = stack.queries[layer, head].astype(np.float64)
    k = stack.keys[layer, head].astype(np.float64)
    stages = {"dot": q @ k.T}
    stages["scaled"] = stages["dot"] * float(stack.scale[layer])
    current = stages["scaled"]
    if stack.softcap is not None and np.isfinite(stack.softcap[layer]):
        cap = float(stack.softcap[layer])
        current = stages["capped"] = np.tanh(current / cap) * cap
    # T5's cross-attention is handed a bias of zeros: no stage, so no page says that a position bias is added.
    if stack.position_bias is not None and stack.position_bias.any():
        current = stages["biased"] = current + stack.position_bias[layer, head]
    allowed = stack.masks_by_layer()[one][0]
    stages["masked"] = np.where(allowed, current, -np.inf)
    sinks = None if stack.sinks is None else stack.sinks[layer, head][None, None]
    if sinks is not None:
        stages["sink"] = sinks[0, 0].astype(np.float64)  # [query]: the sink logit beside each row's scores
    stages["weights"] = masked_softmax(stages["masked"][None, None], allowed[None], sinks)[0, 0]
    return stages


def query_stages(stack, layer: int, head: int, query: int) -> dict[str, np.ndarray]:
    """One query's row [key] of each step a neuron view draws, those this model has, in order: ``dot`` q·k;
    ``scaled`` only where the scale is not 1 (T5 does not scale); ``capped``; ``bias`` the position bias itself
    and ``biased`` the scores with it (T5); ``masked`` (−inf on masked keys) wherever this layer masks any key,
    so the column stays as the query moves; then ``weights``, the softmax of the last of them."""
    stages = score_stages(stack, layer, head)
    shown = {"dot": stages["dot"][query]}
    if float(stack.scale[layer]) != 1.0:
        shown["scaled"] = stages["scaled"][query]
    if "capped" in stages:
        shown["capped"] = stages["capped"][query]
    if "biased" in stages:
        shown["bias"] = stack.position_bias[layer, head, query].astype(np.float64)
        shown["biased"] = stages["biased"][query]
    if not stack.masks_by_layer()[layer].all():
        shown["masked"] = stages["masked"][query]
    shown["weights"] = stages["weights"][query]
    return shown


def toy_stages(embeddings: np.ndarray, *, causal: bool = False) -> dict[str, np.ndarray]:
    """The chapter's first attention, before any weights are learnt: q = k = v = the token embeddings
    [token, hidden]. Stages as ``score_stages`` names them ([query, key] float64: ``dot``, ``scaled`` by
    1/√hidden, ``masked`` with −inf above the diagonal when ``causal``, ``weights``), plus ``output``
    [query, hidden], the weights times the values."""
    x = embeddings.astype(np.float64)
    stages = {"dot": x @ x.T}
    stages["scaled"] = stages["dot"] / np.sqrt(x.shape[-1])
    allowed = np.ones(stages["dot"].shape, dtype=bool)
    if causal:
        allowed = np.tril(allowed)
        stages["masked"] = np.where(allowed, stages["scaled"], -np.inf)
    stages["weights"] = masked_softmax(stages["scaled"][None, None], allowed[None])[0, 0]
    stages["output"] = stages["weights"] @ x
    return stages
