"""The sampling pipeline on cached logits equals transformers' own warpers, stage by stage."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import (
    LogitsProcessorList,
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

import explorer
from explorer.compute.sampling import distribution_from_logits, entropy, rank_of, sorted_cumulative, top_n
from tests.devices import DEVICE

GRID = [
    dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0),
    dict(temperature=0.5, top_k=0, top_p=1.0, min_p=0.0),
    dict(temperature=2.0, top_k=10, top_p=1.0, min_p=0.0),
    dict(temperature=1.0, top_k=0, top_p=0.9, min_p=0.0),
    dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.1),
    dict(temperature=0.7, top_k=40, top_p=0.92, min_p=0.05),  # all four together
    dict(temperature=1.3, top_k=100_000, top_p=0.5, min_p=0.2),  # top-k beyond the vocabulary
    dict(temperature=0.05, top_k=3, top_p=0.01, min_p=0.9),  # everything but one token removed
]


def transformers_final(logits: np.ndarray, temperature, top_k, top_p, min_p) -> np.ndarray:
    """softmax of what transformers' warpers give, in generate()'s order and conditions."""
    warpers = LogitsProcessorList()
    if temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(temperature))
    if top_k:
        warpers.append(TopKLogitsWarper(top_k))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    if min_p:
        warpers.append(MinPLogitsWarper(min_p))
    scores = warpers(torch.zeros((1, 1), dtype=torch.long), torch.tensor(logits)[None])
    return torch.softmax(scores, dim=-1)[0].cpu().numpy()


@pytest.mark.parametrize("settings", GRID, ids=[str(i) for i in range(len(GRID))])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_final_equals_transformers_warpers(settings, seed):
    logits = np.random.default_rng(seed).normal(scale=3.0, size=5000).astype(np.float32)
    distribution = distribution_from_logits(logits, **settings)
    np.testing.assert_allclose(distribution.final, transformers_final(logits, **settings), atol=1e-6)
    assert [name for name, _ in distribution.stages] == ["raw", "temperature", "top-k", "top-p", "min-p"]
    for name, probabilities in distribution.stages:
        assert probabilities.sum() == pytest.approx(1.0, abs=1e-5)
        assert not probabilities[~distribution.kept[name]].any()


def test_ties_at_the_top_k_boundary_are_kept_like_transformers():
    logits = np.array([3.0, 2.0, 2.0, 2.0, 1.0, 0.0], dtype=np.float32)
    distribution = distribution_from_logits(logits, top_k=2)
    np.testing.assert_allclose(distribution.final, transformers_final(logits, 1.0, 2, 1.0, 0.0), atol=1e-7)
    assert distribution.kept["top-k"].sum() == 4


@pytest.mark.parametrize(("top_p", "kept"), [(0.5, 2), (0.75, 3), (0.7, 3), (0.8, 4)])
def test_a_cumulative_probability_exactly_at_the_top_p_boundary_is_removed_like_transformers(top_p, kept):
    """Four equal tokens: the cumulative probabilities 0.25, 0.5, 0.75, 1 are exact in float32, so top-p 0.5 and
    0.75 land on a boundary, where transformers removes the token whose cumulative probability equals 1 - top_p."""
    logits = np.zeros(4, dtype=np.float32)
    distribution = distribution_from_logits(logits, top_p=top_p)
    reference = transformers_final(logits, 1.0, 0, top_p, 0.0)
    assert (reference > 0).sum() == kept
    assert distribution.kept["top-p"].sum() == kept
    np.testing.assert_allclose(np.sort(distribution.final), np.sort(reference), atol=1e-7)


def test_removed_mass_is_what_each_stage_cut():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], dtype=np.float32))
    distribution = distribution_from_logits(logits, top_k=3, top_p=0.7)
    assert distribution.removed_mass["raw"] == 0 and distribution.removed_mass["temperature"] == 0
    assert distribution.removed_mass["top-k"] == pytest.approx(0.05, abs=1e-6)
    # after top-k: 0.5/.95, .3/.95, .15/.95; top-p 0.7 keeps the first two (cumulative 0.84 >= 0.7)
    assert distribution.removed_mass["top-p"] == pytest.approx(0.15 / 0.95, abs=1e-6)
    np.testing.assert_allclose(distribution.final, [0.625, 0.375, 0, 0], atol=1e-6)


def test_helpers_for_the_pages():
    p = np.array([0.1, 0.6, 0.3])
    assert entropy(p) == pytest.approx(-(0.1 * np.log(0.1) + 0.6 * np.log(0.6) + 0.3 * np.log(0.3)))
    order, cumulative = sorted_cumulative(p)
    assert order.tolist() == [1, 2, 0] and cumulative[-1] == pytest.approx(1.0)
    assert rank_of(p, 2) == 1 and top_n(p, 2).tolist() == [1, 2]


def test_next_token_distribution_runs_the_model_once_per_prompt(monkeypatch):
    lm = explorer.load_model(explorer.DEFAULT_DECODER, device=DEVICE)
    cached = explorer.next_token_logits(lm, "It is a truth universally")
    ids = lm.tokenizer("It is a truth universally", return_tensors="pt")["input_ids"].to(DEVICE)
    with torch.inference_mode():
        expected = lm.model(input_ids=ids).logits[0, -1].cpu().numpy()
    np.testing.assert_allclose(cached.logits, expected, rtol=1e-6)
    assert len(cached.tokens) == cached.logits.shape[0] and cached.tokens[ids[0, 0]] == "It"
    full = explorer.next_token_distribution(lm, "It is a truth universally", temperature=0.8, top_p=0.9)
    np.testing.assert_allclose(full.final, transformers_final(cached.logits, 0.8, 0, 0.9, 0.0), atol=1e-6)


def test_an_encoder_has_no_next_token(minilm):
    with pytest.raises(explorer.InputError, match="encoder"):
        explorer.next_token_logits(minilm, "hello")
