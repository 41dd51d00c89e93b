"""The sampling pipeline on a cached logits vector, in NumPy: what a slider shows without running the model.

``distribution_from_logits`` applies transformers' sampling warpers in transformers' order
(temperature -> top-k -> top-p -> min-p), each exactly as ``transformers.generation.logits_process``
defines it (same comparisons, same float32 arithmetic), and keeps every stage so a page can show what
each one removed. Tests check the final stage against transformers' own warpers.

Shapes: ``[vocab]`` is one probability or logit per token id.
"""

from __future__ import annotations

import numpy as np

from explorer.data.decoding import TokenDistribution


def softmax(scores: np.ndarray) -> np.ndarray:
    """[vocab] float32 probabilities of float32 scores; -inf scores get probability 0."""
    scores = np.asarray(scores, dtype=np.float32)
    peak = np.max(scores)
    weights = np.exp(scores - peak)
    return (weights / weights.sum(dtype=np.float32)).astype(np.float32)


def log_softmax(scores: np.ndarray) -> np.ndarray:
    scores = np.asarray(scores, dtype=np.float64)
    peak = np.max(scores)
    return scores - peak - np.log(np.exp(scores - peak).sum())


def apply_temperature(scores: np.ndarray, temperature: float) -> np.ndarray:
    """TemperatureLogitsWarper: scores / T (T < 1 sharpens, T > 1 flattens)."""
    return (scores / np.float32(temperature)).astype(np.float32)


def apply_top_k(scores: np.ndarray, top_k: int, min_tokens_to_keep: int = 1) -> np.ndarray:
    """TopKLogitsWarper: -inf below the k-th highest score (ties with it are kept); 0 means off."""
    if top_k <= 0:
        return scores
    k = min(max(top_k, min_tokens_to_keep), scores.shape[-1])
    kth = np.partition(scores, -k)[-k]
    return np.where(scores < kth, -np.inf, scores).astype(np.float32)


def apply_top_p(scores: np.ndarray, top_p: float, min_tokens_to_keep: int = 1) -> np.ndarray:
    """TopPLogitsWarper: keep the smallest set of most likely tokens whose probability reaches ``top_p``.

    As in transformers: sort ascending, remove tokens whose cumulative probability is <= 1 - top_p,
    always keep the ``min_tokens_to_keep`` most likely.
    """
    if top_p >= 1.0:
        return scores
    order = np.argsort(scores, kind="stable")  # ascending
    cumulative = np.cumsum(softmax(scores[order]), dtype=np.float32)
    remove_sorted = cumulative <= np.float32(1 - top_p)
    remove_sorted[-min_tokens_to_keep:] = False
    remove = np.empty_like(remove_sorted)
    remove[order] = remove_sorted
    return np.where(remove, -np.inf, scores).astype(np.float32)


def apply_min_p(scores: np.ndarray, min_p: float, min_tokens_to_keep: int = 1) -> np.ndarray:
    """MinPLogitsWarper: remove tokens less likely than ``min_p`` times the most likely one; 0 means off."""
    if min_p <= 0.0:
        return scores
    probabilities = softmax(scores)
    remove = probabilities < np.float32(min_p) * probabilities.max()
    remove[np.argsort(-probabilities, kind="stable")[:min_tokens_to_keep]] = False
    return np.where(remove, -np.inf, scores).astype(np.float32)


def processed_scores(
    logits: np.ndarray, *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0
) -> list[tuple[str, np.ndarray]]:
    """[(stage, scores [vocab] float32), ...] after each warper, in transformers' order ("raw" first)."""
    scores = np.asarray(logits, dtype=np.float32)
    stages = [("raw", scores)]
    steps = (
        ("temperature", lambda s: apply_temperature(s, temperature) if temperature != 1.0 else s),
        ("top-k", lambda s: apply_top_k(s, top_k)),
        ("top-p", lambda s: apply_top_p(s, top_p)),
        ("min-p", lambda s: apply_min_p(s, min_p)),
    )
    for name, warp in steps:
        scores = warp(scores)
        stages.append((name, scores))
    return stages


def distribution_from_logits(
    logits: np.ndarray,
    tokens: tuple[str, ...] = (),
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
) -> TokenDistribution:
    """The distribution at every stage of the pipeline, the tokens each stage kept and the mass it removed."""
    check_sampling_settings(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    stages, kept, removed = [], {}, {}
    previous = None
    for name, scores in processed_scores(logits, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p):
        probabilities = softmax(scores)
        kept[name] = np.isfinite(scores)
        # Mass of the previous stage's distribution on the tokens this stage removed.
        removed[name] = 0.0 if previous is None else float(previous[~kept[name]].sum())
        stages.append((name, probabilities))
        previous = probabilities
    return TokenDistribution(
        stages=tuple(stages),
        kept=kept,
        removed_mass=removed,
        tokens=tokens,
        logits=np.asarray(logits, dtype=np.float32),
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        min_p=min_p,
    )


def check_sampling_settings(*, temperature: float, top_k: int, top_p: float, min_p: float) -> None:
    """Raise ``InputError`` for settings transformers would refuse (or that mean nothing)."""
    from explorer.errors import InputError

    if not np.isfinite(temperature) or temperature <= 0:
        raise InputError(f"Temperature must be above 0 (got {temperature}); temperature 0 is greedy search.")
    if top_k < 0:
        raise InputError(f"top-k must be 0 (off) or a positive number of tokens (got {top_k}).")
    if not 0 < top_p <= 1:
        raise InputError(f"top-p must be above 0 and at most 1 (got {top_p}).")
    if not 0 <= min_p <= 1:
        raise InputError(f"min-p must be between 0 and 1 (got {min_p}).")


def entropy(probabilities: np.ndarray) -> float:
    """Shannon entropy in nats of a [vocab] distribution (zero-probability tokens contribute nothing)."""
    p = np.asarray(probabilities, dtype=np.float64)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def sorted_cumulative(probabilities: np.ndarray, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(token ids by falling probability, cumulative probability along that order), the first ``limit``."""
    order = np.argsort(-np.asarray(probabilities), kind="stable")
    if limit is not None:
        order = order[:limit]
    return order, np.cumsum(np.asarray(probabilities, dtype=np.float64)[order])


def rank_of(probabilities: np.ndarray, token_id: int) -> int:
    """0 for the most likely token, 1 for the next... (ties share the better rank)."""
    return int((np.asarray(probabilities) > probabilities[token_id]).sum())


def top_n(probabilities: np.ndarray, n: int) -> np.ndarray:
    """Ids of the ``n`` most likely tokens, most likely first."""
    n = min(n, probabilities.shape[-1])
    best = np.argpartition(-probabilities, n - 1)[:n]
    return best[np.argsort(-probabilities[best], kind="stable")]
