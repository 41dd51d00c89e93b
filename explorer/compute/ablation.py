"""Head ablation's effects in words: which head the prediction leans on most, or that none matters.

A change in log-probability smaller than the model's numerical tolerance (``explorer.data.TOLERANCE``, by the
dtype it ran in) is indistinguishable from rounding: when every head's is, no single head matters, and the
page says so rather than name the largest of the noise. Numbers keep three significant digits: a confident
prediction's log-probability (−1.2e−06) and its changes (±2e−05) are not "−0.00".
"""

from __future__ import annotations

import numpy as np


def significant(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits (−2.35, −0.0123, −1.2e−06): never rounded to a bare 0."""
    return f"{value:.{digits}g}"


def probability(logprob: float) -> str:
    """exp(``logprob``) as a percentage, or written so that it stays true near 1 ("1 − 1.2e-06") and near 0."""
    p = float(np.exp(logprob))
    if p > 0.999:
        return f"1 − {significant(-float(np.expm1(logprob)), 2)}"
    return f"{p:.1%}" if p >= 0.001 else significant(p, 2)


def strongest_head(changes: np.ndarray) -> tuple[int, int]:
    """(layer, head) whose ablation lowers the target's log-probability the most (changes [layer, head])."""
    layer, head = np.unravel_index(int(np.argmin(changes)), changes.shape)
    return int(layer), int(head)


def ablation_summary(
    changes: np.ndarray, baseline_logprob: float, *, tolerance: float, dtype: str, layer_numbers=None
) -> str:
    """What ablating each head alone does to the predicted token, in one or two sentences (changes [layer,
    head]: the change in its log-probability; ``tolerance``: the smallest change that is more than rounding
    for ``dtype``; ``layer_numbers``: the model's own number of each row, where the rows are only some layers)."""
    largest = float(np.abs(changes).max()) if changes.size else 0.0
    if largest < tolerance:
        return (
            f"No single head matters here: ablating any one of them changes its log-probability "
            f"({significant(baseline_logprob)}) by at most {significant(largest, 2)}, less than {tolerance:.0e}, what "
            f"rounding alone can do in {dtype}."
        )
    layer, head = strongest_head(changes)
    change = float(changes[layer, head])
    if change >= 0:
        return (
            f"No head helps it: ablating any one of them leaves its log-probability ({significant(baseline_logprob)}) "
            f"as it is or raises it (by up to {significant(largest)})."
        )
    return (
        f"Ablating layer {layer if layer_numbers is None else int(layer_numbers[layer])}, head {head} alone costs it "
        "the most: log-probability "
        f"{significant(baseline_logprob)} → {significant(baseline_logprob + change)} ({significant(change)})."
    )
