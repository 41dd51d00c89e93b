"""Head-type probes on a model: the seeded random repeated sequence, captured, and scored per head."""

from __future__ import annotations

import numpy as np

from explorer.compute.probes import probe_scores
from explorer.data.probes import HeadProbes
from explorer.errors import InputError
from explorer.models.capture import capture_token_ids

MIN_N = 2


def head_probes(lm, *, n: int = 20, seed: int = 0) -> HeadProbes:
    """Score every head of ``lm``'s main stack on n random tokens repeated twice (drawn with ``seed`` from the
    model's vocabulary, no special tokens), after the start tokens the model's tokenizer puts before any text."""
    _check(lm, n, seed)
    random_ids = np.random.default_rng(seed).choice(_ordinary_ids(lm), size=n, replace=False).tolist()
    start = _start_tokens(lm)
    sequence = start + random_ids + random_ids  # no end token ([SEP]) after the copies: it would only dilute scores
    offset = len(start)
    captured = capture_token_ids(lm, sequence)
    scores = probe_scores(captured.main.attentions.astype(np.float64), n, offset)
    return HeadProbes(
        model_name=lm.name,
        n=n,
        seed=seed,
        offset=offset,
        token_ids=np.asarray(sequence),
        scores={name: values.astype(np.float32) for name, values in scores.items()},
        capture=captured,
    )


def _check(lm, n, seed) -> None:
    for name, value in (("n", n), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise InputError(f"{name} must be a whole number (got {value!r}).")
    if seed < 0:
        raise InputError(f"The seed must be 0 or more (got {seed}).")
    longest = (lm.max_tokens - 2) // 2
    if not MIN_N <= n <= longest:
        raise InputError(f"n must be from {MIN_N} to {longest} for {lm.name} (twice n tokens must fit; got {n}).")


def _ordinary_ids(lm) -> np.ndarray:
    """Every id of both the tokenizer and the model's embedding, except special tokens."""
    size = min(len(lm.tokenizer), lm.model.get_input_embeddings().num_embeddings)
    special = set(lm.tokenizer.all_special_ids)
    return np.array([i for i in range(size) if i not in special])


def _start_tokens(lm) -> list[int]:
    """The special tokens the model's tokenizer puts before any text ([CLS], <s>), as the model was trained."""
    special = set(lm.tokenizer.all_special_ids)
    ids = lm.tokenizer("a")["input_ids"]
    return ids[: next((i for i, token in enumerate(ids) if token not in special), 0)]
