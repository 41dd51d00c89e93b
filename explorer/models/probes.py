"""Head-type probes on a model: the seeded random repeated sequence, captured, and scored per head."""

from __future__ import annotations

import numpy as np

from explorer.compute.probes import probe_scores, uniform_scores
from explorer.data.probes import HeadProbes
from explorer.errors import InputError
from explorer.models.capture import capture_token_ids
from explorer.models.first_layer import input_table

MIN_N = 2


def head_probes(lm, *, n: int = 20, seed: int = 0) -> HeadProbes:
    """Score every head of ``lm``'s main stack on n distinct random tokens repeated twice (drawn with ``seed``
    from the model's vocabulary, no special tokens), after the start tokens the model's tokenizer puts before any
    text ([CLS], <s>; none for GPT-2): ``offset`` of them, which every score's positions are shifted by."""
    _check_whole(n, seed)
    start = _start_tokens(lm)
    ordinary = _ordinary_ids(lm)
    longest = longest_n(lm, start, ordinary)
    if not MIN_N <= n <= longest:
        raise InputError(
            f"n must be from {MIN_N} to {longest} for {lm.name} (got {n}): the two copies"
            + (f" and {len(start)} start token{'s' * (len(start) > 1)}" if start else "")
            + f" must fit its {lm.max_tokens} positions, and a copy holds each of its {len(ordinary)} ordinary "
            "tokens at most once."
        )
    random_ids = np.random.default_rng(seed).choice(ordinary, size=n, replace=False).tolist()
    sequence = start + random_ids + random_ids  # no end token ([SEP]) after the copies: it would only dilute scores
    offset = len(start)
    captured = capture_token_ids(lm, sequence)
    weights = captured.main.attentions.astype(np.float64)
    scores = probe_scores(weights, n, offset)
    return HeadProbes(
        model_name=lm.name,
        n=n,
        seed=seed,
        offset=offset,
        token_ids=np.asarray(sequence),
        scores={name: values.astype(np.float32) for name, values in scores.items()},
        capture=captured,
        uniform=uniform_scores(captured.main.mask, n, offset),
    )


def longest_n(lm, start: list[int] | None = None, ordinary: np.ndarray | None = None) -> int:
    """The largest n ``head_probes`` takes for ``lm``: the start tokens and two copies fit the model's positions,
    and one copy's tokens are distinct ordinary tokens."""
    start = _start_tokens(lm) if start is None else start
    ordinary = _ordinary_ids(lm) if ordinary is None else ordinary
    return min((lm.max_tokens - len(start)) // 2, len(ordinary))


def _check_whole(n, seed) -> None:
    for name, value in (("n", n), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise InputError(f"{name} must be a whole number (got {value!r}).")
    if seed < 0:
        raise InputError(f"The seed must be 0 or more (got {seed}).")


def _ordinary_ids(lm) -> np.ndarray:
    """Every id of both the tokenizer and the model's embedding, except special tokens."""
    size = min(len(lm.tokenizer), input_table(lm).num_embeddings)
    special = set(lm.tokenizer.all_special_ids)
    return np.array([i for i in range(size) if i not in special])


def _start_tokens(lm) -> list[int]:
    """The special tokens the model's tokenizer puts before any text ([CLS], <s>), as the model was trained."""
    special = set(lm.tokenizer.all_special_ids)
    ids = lm.tokenizer("a")["input_ids"]
    return ids[: next((i for i, token in enumerate(ids) if token not in special), 0)]
