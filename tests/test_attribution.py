"""Input attribution (issue 30, part 1) against references written here with torch's autograd and explicit
re-runs of the plain Hugging Face model (its own eager attention, not the explorer's loaded copy): gradient ×
input and occlusion equal theirs within 1e-5; integrated gradients equals a Gauss-Legendre integral written
here, and its completeness error stays under 1% of the change it explains at 64 steps. Tiny models built from
configs (GPT-2, Llama with grouped KV heads, T5, a BERT with its masked-LM head) and the bundled models."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertForMaskedLM

import explorer
from explorer.models.attribution import attribute
from tests.devices import DEVICE
from tests.tiny_models import TINY, eager_reference

TEXT = "the cat sat on the mat and the dog ran to"
METHODS = ("integrated_gradients", "gradient_x_input", "occlusion")


def reference_function(model, lm, text: str):
    """(input embeddings, f): the target's log-probabilities [batch, vocabulary] as a function of a batch of input
    embeddings, written per model kind with the plain model."""
    encoded = lm.tokenizer(text, return_tensors="pt").to(DEVICE)
    ids, mask = encoded["input_ids"], encoded["attention_mask"]
    embeddings = model.get_input_embeddings()(ids).detach().float()
    if lm.kind == "encoder-decoder":
        start = torch.tensor([[model.config.decoder_start_token_id]], device=DEVICE)
        return embeddings, lambda x: torch.log_softmax(
            model(inputs_embeds=x, attention_mask=mask.expand(len(x), -1), decoder_input_ids=start.expand(len(x), 1))
            .logits[:, -1]
            .float(),
            -1,
        )
    if lm.kind == "encoder":
        position = int((ids[0] == lm.tokenizer.mask_token_id).nonzero()[0])
        types = encoded["token_type_ids"] if "token_type_ids" in encoded else torch.zeros_like(ids)
        return embeddings, lambda x: torch.log_softmax(
            model(inputs_embeds=x, attention_mask=mask.expand(len(x), -1), token_type_ids=types.expand(len(x), -1))
            .logits[:, position]
            .float(),
            -1,
        )
    return embeddings, lambda x: torch.log_softmax(
        model(inputs_embeds=x, attention_mask=mask.expand(len(x), -1)).logits[:, -1].float(), -1
    )


def gradient(f, x, target: int) -> torch.Tensor:
    """∇ of f's target log-probability at each of a batch of inputs, each on its own (the batch's rows never mix)."""
    x = x.clone().requires_grad_()
    (grad,) = torch.autograd.grad(f(x)[:, target].sum(), x)
    return grad


def exact_path_integral(f, x, target: int) -> torch.Tensor:
    """∫₀¹ ∇f(α·x) dα, as near exact as the test can afford: 16 Gauss-Legendre points in α on each sixth of a
    decade from 10⁻³² to 1 (a stack of bias-free RMSNorms moves f far below α = 10⁻¹⁰)."""
    nodes, weights = np.polynomial.legendre.leggauss(16)
    edges = np.concatenate([[0.0], np.logspace(-32, 0, 193)])
    low, high = edges[:-1, None], edges[1:, None]
    alphas = (low + (nodes + 1) * (high - low) / 2).ravel()
    sizes = (weights * (high - low) / 2).ravel()
    total = torch.zeros_like(x)
    for start in range(0, len(alphas), 64):
        alpha = torch.tensor(alphas[start : start + 64], dtype=x.dtype, device=x.device).view(-1, 1, 1)
        size = torch.tensor(sizes[start : start + 64], dtype=x.dtype, device=x.device).view(-1, 1, 1)
        total += (size * gradient(f, alpha * x, target)).sum(0, keepdim=True)
    return total


def references(model, lm, text: str, target: int, exact: bool = True) -> dict:
    x, f = reference_function(model, lm, text)
    with torch.no_grad():
        full = f(x)[0, target]
        baseline = f(torch.zeros_like(x))[0, target]
        occluded = []
        for position in range(x.shape[1]):
            ablated = x.clone()
            ablated[0, position] = 0
            occluded.append(float(full - f(ablated)[0, target]))
    found = {
        "gradient_x_input": (gradient(f, x, target) * x).sum(-1)[0].cpu().numpy(),
        "occlusion": np.array(occluded),
        "logprob": float(full),
        "baseline": float(baseline),
    }
    if exact:
        found["integrated_gradients"] = (exact_path_integral(f, x, target) * x).sum(-1)[0].cpu().numpy()
    return found


def masked_bert(folder):
    _, make_config, make_tokenizer = TINY["bert"]
    torch.manual_seed(0)
    BertForMaskedLM(make_config()).save_pretrained(folder)
    tokenizer = make_tokenizer()
    tokenizer.mask_token = "?"  # a word of the tiny vocabulary stands for [MASK]
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def loaded(tiny_models, tmp_path_factory):
    """(explorer's loaded model, the plain model, the text) per tiny architecture."""
    made = {}
    for name in ("gpt2", "llama", "t5"):
        lm = explorer.load_model(tiny_models[name], device=DEVICE)
        made[name] = (lm, eager_reference(name, tiny_models[name]), TEXT)
    folder = masked_bert(tmp_path_factory.mktemp("masked-bert"))
    lm = explorer.load_model(folder, device=DEVICE)
    made["bert"] = (
        lm,
        BertForMaskedLM.from_pretrained(folder, attn_implementation="eager").to(DEVICE).eval(),
        "the cat ? on the mat",
    )
    return made


@pytest.mark.parametrize("name", ["gpt2", "llama", "t5", "bert"])
def test_gradient_x_input_and_occlusion_equal_their_references(loaded, name):
    lm, model, text = loaded[name]
    found = {method: attribute(lm, text, method=method) for method in METHODS}
    target = found["occlusion"].target_id
    expected = references(model, lm, text, target, exact=False)
    for method in ("gradient_x_input", "occlusion"):
        np.testing.assert_allclose(found[method].scores, expected[method], atol=1e-5, rtol=0, err_msg=method)
    for result in found.values():
        assert result.target_id == target and len(result.tokens) == len(result.scores)
        assert result.logprob == pytest.approx(expected["logprob"], abs=1e-5)
        assert result.baseline_logprob == pytest.approx(expected["baseline"], abs=1e-5)


# Integrated gradients at 64 steps against the test's own near-exact integral (3,088 points), each token's score,
# relative to the change: measured 3e-6 (GPT-2), 5e-4 (Llama), BERT below. T5 is left out: f' jumps wherever a
# feed-forward ReLU's input changes sign along the path (552 times on the tiny T5, 4,486 on dates-t5, counted at 200
# points a decade), and across jumps every polynomial rule converges at first order only: the test's integral misses
# its own completeness by 0.86% there (a sixth of a decade, [0.32, 0.46], misses 4e-4 with its 16 points, 4e-7 with
# a 8,192-point midpoint rule). Not float32: a float64 copy gives f within 6e-7 and α·f' within 2e-7 of it
# (bench/bench_ig_path.py). Its completeness is checked below instead.
@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])
def test_integrated_gradients_equal_the_path_integral(loaded, name):
    lm, model, text = loaded[name]
    found = attribute(lm, text)
    expected = references(model, lm, text, found.target_id)["integrated_gradients"]
    assert np.abs(found.scores - expected).max() <= 1e-3 * abs(found.change)


# Completeness errors measured, relative to the change they explain, at 64 / 256 steps: GPT-2 6e-6 / 5e-6, Llama
# (grouped KV heads) 4e-4 / 3e-6, BERT 4e-5 / 3e-6, the bundled decoder 4e-5 / 1e-6; the tiny T5 12% / 0.4% and the
# bundled dates-t5 2.2% / 0.2%. T5's path moves f from α = 10⁻²⁰ up to 1 (each bias-free RMSNorm scales a small
# input up by 1/√eps, layer after layer), and f' jumps at hundreds (tiny T5) to thousands (dates-t5) of ReLU kinks,
# so a rule's error is set by where its points fall among the jumps: 2-point Gauss-Legendre panels placed by the
# integrand's roughness and shifted at random miss by 7.9% rms at 64 points, 1.7% at 256, 0.5% at 1,024 on the tiny
# T5 (whose change, 0.054, is a fifteenth of its path's Σ|Δf|, 0.82), 0.8%, 0.2%, 0.07% on dates-t5
# (bench/bench_ig_path.py): no 64-point rule keeps the T5 family under 1% but by luck. 256 points do on this text
# and on four dates (0.02% to 0.2%), not on every text of the tiny T5 (“the dog sat on the cat” 1.6%, “a mat ran
# and the cat sat” 4.3%). The verification line shows the error to the user whatever it is.
STEPS_WITHIN_ONE_PERCENT = {"gpt2": 64, "llama": 64, "bert": 64, "t5": 256}


@pytest.mark.parametrize("name", ["gpt2", "llama", "t5", "bert"])
def test_integrated_gradients_add_up_to_the_change(loaded, name):
    lm, _, text = loaded[name]
    result = attribute(lm, text, steps=STEPS_WITHIN_ONE_PERCENT[name])
    assert result.delta == pytest.approx(float(result.scores.sum()) - result.change, abs=1e-6)
    assert abs(result.delta) <= 0.01 * abs(result.change), result.verification()


def test_the_panels_integrate_what_they_are_planned_on():
    """The quadrature alone, on a function with the shape of T5's path (a step over a few decades of α, far
    below 1): its points and weights give ∫₀¹ g'(α) dα = g(1) − g(0), measured within 8e-4 of it at 64 points and
    2e-5 at 128 (the tails' panels get one point each at first; the refinement then gives them more)."""
    from explorer.models.attribution import GRID, panel_points, quadrature

    def g(alpha):
        return np.tanh(np.log10(np.maximum(alpha, 1e-300)) + 15) + 0.3 * alpha**2

    def derivative(alpha):
        return (1 - np.tanh(np.log10(alpha) + 15) ** 2) / (alpha * np.log(10)) + 0.6 * alpha

    seen = []

    def integrate(panel):
        alphas, weights = panel_points(*panel)
        assert ((alphas > 0) & (alphas < 1)).all() and (weights > 0).all()
        seen.append(len(alphas))
        return np.array([weights @ derivative(alphas)])

    for steps, within in ((64, 1e-3), (128, 1e-4)):
        seen.clear()
        parts = quadrature(g(GRID), steps, integrate)
        assert sum(seen) <= steps
        assert float(sum(parts.values())[0]) == pytest.approx(g(1.0) - g(0.0), rel=within)


def test_the_bundled_models_and_a_chosen_target():
    decoder = explorer.load_model(explorer.DEFAULT_DECODER)
    top = attribute(decoder, "The cat sat on the")
    other = attribute(decoder, "The cat sat on the", target=" mat")
    assert other.target_token.strip() == "mat" and other.logprob < top.logprob
    assert abs(top.delta) <= 0.01 * abs(top.change)
    seq2seq = explorer.load_model(explorer.DEFAULT_SEQ2SEQ)
    dates = attribute(seq2seq, "Thursday, March 5, 2021", steps=256)
    assert abs(dates.delta) <= 0.01 * abs(dates.change), dates.verification()
    occluded = attribute(seq2seq, "Thursday, March 5, 2021", method="occlusion")
    assert len(occluded.scores) == len(occluded.tokens) and np.isfinite(occluded.scores).all()


def test_bad_input_gets_a_sentence(loaded, minilm):
    lm, _, _ = loaded["gpt2"]
    for kwargs, message in [
        ({"method": "saliency"}, "methods"),
        ({"steps": 1}, "steps"),
        ({"steps": 10_000}, "steps"),
        ({"target": "cat sat"}, "one token"),
        ({"target": 10**9}, "vocabulary"),
    ]:
        with pytest.raises(explorer.InputError, match=message):
            attribute(lm, TEXT, **kwargs)
    bert, _, _ = loaded["bert"]
    with pytest.raises(explorer.InputError, match="Put one"):
        attribute(bert, "the cat sat on the mat")
    with pytest.raises(explorer.InputError, match="checkpoint has none"):
        attribute(minilm, "the cat [MASK] on the mat")


def test_the_shared_model_keeps_no_gradients(loaded):
    lm, _, _ = loaded["llama"]
    for method in METHODS:
        attribute(lm, TEXT, method=method)
    assert all(parameter.grad is None for parameter in lm.model.parameters())


@pytest.mark.parametrize("name", ["gpt2", "t5", "bert"])
def test_the_top_targets_are_the_prediction_attribute_explains(loaded, name):
    """``top_targets``: the ten most likely tokens of the reference function's prediction, best first, the first
    attribute's default target."""
    from explorer.models.attribution import top_targets

    lm, model, text = loaded[name]
    x, f = reference_function(model, lm, text)
    with torch.no_grad():
        expected = torch.exp(f(x)[0]).cpu().numpy()
    found = top_targets(lm, text)
    np.testing.assert_array_equal(found.ids, np.argsort(-expected, kind="stable")[:10])
    np.testing.assert_allclose(found.probabilities, expected[found.ids], atol=1e-6)
    assert found.ids[0] == attribute(lm, text, method="occlusion").target_id and len(found.tokens) == 10


def test_only_an_encoder_without_its_masked_lm_head_is_unexplained(loaded, minilm):
    from explorer.models.attribution import unexplained

    assert [unexplained(loaded[name][0]) for name in ("gpt2", "t5", "bert")] == [None, None, None]
    assert "checkpoint has none" in unexplained(minilm)


def test_the_gateway_computes_each_attribution_once_for_every_session():
    """``gateway.run("attribution", ...)``: the library's result, kept for the next caller whatever way it names
    the same input; the other methods ignore ``steps``, so the page keys them by the default."""
    from contextlib import contextmanager

    from explorer import gateway

    labels = []

    @contextmanager
    def progress(label, waiting, unit):
        labels.append(label)
        yield None

    gateway.results_cache().clear()
    decoder = explorer.load_model(explorer.DEFAULT_DECODER)
    text = "Elizabeth knew that"
    result = gateway.run("attribution", explorer.DEFAULT_DECODER, text, progress=progress)
    again = gateway.run(
        "attribution", explorer.DEFAULT_DECODER, text, None, "integrated_gradients", 64, progress=progress
    )
    assert again is result and len(labels) == 1 and labels[0].startswith("Attributing")
    # The gateway's model is the app's (on the CPU), this one on the machine's own device: on CUDA they differ by
    # 2e-7 (an H200), on the CPU not at all.
    np.testing.assert_allclose(result.scores, attribute(decoder, text).scores, atol=1e-5, rtol=0)
    candidates = gateway.run("attribution targets", explorer.DEFAULT_DECODER, text, 10, progress=progress)
    assert candidates.ids[0] == result.target_id
    assert gateway.run("attribution targets", explorer.DEFAULT_DECODER, text, progress=progress) is candidates
    assert len(labels) == 2
