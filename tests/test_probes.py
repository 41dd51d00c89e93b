"""Head-type probes: the scores recomputed by hand, position by position, from the model's own eager attention
on the same sequence (an independent path: the reference model's ``output_attentions``, not the capture)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.compute.probes import MEANINGS, probe_scores
from tests.devices import DEVICE
from tests.tiny_models import eager_reference


def scores_by_hand(weights: np.ndarray, n: int, offset: int) -> dict[str, np.ndarray]:
    """The issue's definitions, written as loops over query positions i."""
    layers, heads, length, _ = weights.shape
    out = {name: np.zeros((layers, heads)) for name in MEANINGS}
    for layer in range(layers):
        for head in range(heads):
            w = weights[layer, head]
            second = range(offset + n, offset + 2 * n)
            out["induction"][layer, head] = sum(w[i, i - n + 1] for i in second) / n
            out["duplicate"][layer, head] = sum(w[i, i - n] for i in second) / n
            out["previous"][layer, head] = sum(w[i, i - 1] for i in range(1, length)) / (length - 1)
            out["sink"][layer, head] = sum(w[i, 0] for i in range(1, length)) / (length - 1)
    return out


def eager_weights(name: str, folder, token_ids) -> np.ndarray:
    reference = eager_reference(name, folder)
    with torch.inference_mode():
        out = reference(input_ids=torch.tensor([token_ids.tolist()], device=DEVICE), output_attentions=True)
    return torch.stack([layer[0] for layer in out.attentions]).double().cpu().numpy()


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])
def test_scores_equal_the_definitions_on_the_models_own_attention(tiny_models, name):
    lm = explorer.load_model(tiny_models[name], device=DEVICE)
    probes = explorer.head_probes(lm, n=12, seed=3)
    assert len(probes.token_ids) == probes.offset + 24
    random_part = probes.token_ids[probes.offset :]
    np.testing.assert_array_equal(random_part[:12], random_part[12:])
    assert not set(random_part.tolist()) & set(lm.tokenizer.all_special_ids)
    expected = scores_by_hand(eager_weights(name, tiny_models[name], probes.token_ids), 12, probes.offset)
    for score, values in expected.items():
        np.testing.assert_allclose(probes.scores[score], values, atol=1e-6)


def test_the_start_token_comes_first_where_the_tokenizer_adds_one(minilm, tiny_models):
    bert = explorer.head_probes(minilm, n=5)
    assert bert.offset == 1 and bert.token_ids[0] == minilm.tokenizer.cls_token_id
    gpt2 = explorer.head_probes(explorer.load_model(tiny_models["gpt2"], device=DEVICE), n=5)
    assert gpt2.offset == 0


def test_probes_are_seeded(tiny_models):
    lm = explorer.load_model(tiny_models["llama"], device=DEVICE)
    first, again, other = (explorer.head_probes(lm, n=8, seed=s) for s in (7, 7, 8))
    np.testing.assert_array_equal(first.token_ids, again.token_ids)
    np.testing.assert_array_equal(first.scores["induction"], again.scores["induction"])
    assert first.token_ids.tolist() != other.token_ids.tolist()


def test_a_perfect_induction_pattern_scores_one():
    n, offset = 4, 1
    length = offset + 2 * n
    weights = np.zeros((1, 1, length, length))
    for i in range(length):
        weights[0, 0, i, i - n + 1 if i >= offset + n else 0] = 1.0
    scores = probe_scores(weights, n, offset)
    assert scores["induction"][0, 0] == 1.0 and scores["duplicate"][0, 0] == 0.0


@pytest.mark.parametrize(("n", "seed"), [(1, 0), (10_000, 0), (5, -1), (2.5, 0), (True, 0)])
def test_absurd_settings_are_refused(tiny_models, n, seed):
    lm = explorer.load_model(tiny_models["gpt2"], device=DEVICE)
    with pytest.raises(explorer.InputError):
        explorer.head_probes(lm, n=n, seed=seed)


def test_the_bundled_models_heads(minilm, capsys):
    lines = []
    for lm in (explorer.load_model(explorer.DEFAULT_DECODER, device=DEVICE), minilm):
        probes = explorer.head_probes(lm, n=20, seed=0)
        best = {score: probes.best(score) for score in MEANINGS}
        lines.append(
            f"{lm.name}: "
            + ", ".join(f"{s} L{layer}H{head} {probes.scores[s][layer, head]:.3f}" for s, (layer, head) in best.items())
        )
        for values in probes.scores.values():
            assert ((values >= 0) & (values <= 1)).all()
    with capsys.disabled():
        print("\nhead-type probes, n=20, seed 0:\n  " + "\n  ".join(lines))
