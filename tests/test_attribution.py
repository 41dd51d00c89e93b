"""Input attribution (issue 30, part 1) against references written here with torch's autograd and explicit
re-runs of the plain Hugging Face model (its own eager attention, not the explorer's loaded copy): gradient ×
input and occlusion equal theirs within 1e-5; integrated gradients equals a Gauss-Legendre integral written
here, and its completeness error stays under 1% of the change it explains at 64 steps. Tiny models built from
configs (GPT-2, Llama with grouped KV heads, T5, a BERT with its masked-LM head) and the bundled models."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
import torch
from captum.attr import IntegratedGradients
from transformers import AutoModelForCausalLM, BertForMaskedLM, MixtralConfig

import explorer
from explorer.models.attribution import GRID, attribute
from tests.devices import DEVICE
from tests.tiny_models import IDS, TINY, eager_reference, word_tokenizer

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


# Completeness errors measured, relative to the change they explain, at 64 / 256 steps: Llama (grouped KV heads) 4e-4 /
# 3e-6; at 64, by Captum's plain rule, GPT-2 7e-7, BERT 7e-6, the bundled decoder 4e-7 to 7e-7; the tiny T5 22% / 0.4%
# and the bundled dates-t5 1.3% / 0.1%. T5's path moves f from α = 10⁻²⁰ up to 1 (each bias-free RMSNorm scales a small
# input up by 1/√eps, layer after layer), and f' jumps at hundreds (tiny T5) to thousands (dates-t5) of ReLU kinks, so a
# rule's error is set by where its points fall among the jumps: 2-point Gauss-Legendre panels placed by the integrand's
# roughness and shifted at random miss by 7.9% rms at 64 points, 1.7% at 256, 0.5% at 1,024 on the tiny T5 (whose
# change, 0.054, is a fifteenth of its path's Σ|Δf|, 0.82), 0.8%, 0.2%, 0.07% on dates-t5 (bench/bench_ig_path.py): no
# 64-point rule keeps the T5 family under 1% but by luck. 256 points do on this text and on four dates (0.02% to 0.2%),
# not on every text of the tiny T5 (“the dog sat on the cat” 1.6%, “a mat ran and the cat sat” 4.3%). The verification
# line shows the error to the user whatever it is.
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

    def integrate(panels):
        parts = []
        for panel in panels:
            alphas, weights = panel_points(*panel)
            assert ((alphas > 0) & (alphas < 1)).all() and (weights > 0).all()
            seen.append(len(alphas))
            parts.append(np.array([weights @ derivative(alphas)]))
        return parts

    for steps, within in ((64, 1e-3), (128, 1e-4)):
        seen.clear()
        parts = quadrature(g(GRID), steps, integrate)
        assert sum(seen) <= steps
        assert float(sum(parts.values())[0]) == pytest.approx(g(1.0) - g(0.0), rel=within)


@contextmanager
def forward_rows(model):
    """The rows (batch sizes) of each forward call the model gets, in order."""
    rows = []
    hook = model.register_forward_pre_hook(
        lambda _, args, kwargs: rows.append(len(kwargs["inputs_embeds"])), with_kwargs=True
    )
    try:
        yield rows
    finally:
        hook.remove()


def captum_integrated_gradients(model, lm, text: str, target: int, steps: int):
    """Captum's own integrated gradients (its default, Gauss-Legendre points uniform in α) of the plain model's
    function: (scores per token, Captum's completeness delta)."""
    x, f = reference_function(model, lm, text)
    scores, delta = IntegratedGradients(f).attribute(
        x, torch.zeros_like(x), target=target, n_steps=steps, internal_batch_size=64, return_convergence_delta=True
    )
    return scores.sum(-1)[0].detach().cpu().numpy(), float(delta)


# Where the scan finds f smooth from α = 0 (GPT-2, BERT: positions and biases keep every LayerNorm's input off
# zero), the 64 points are Captum's own, equal within 4e-9; 82 rows in 7 calls (the prediction, the baseline, 16
# probes in one batch, 64 points in four), where the log-α panels took 158 rows in 35 calls. A Llama's bias-free
# RMSNorms move f far below α = 0.01: there it keeps the scan and the panels (158 rows, in 13 calls), and
# Captum's uniform points miss the change by 6.4% (ours: 0.04%, and within 1e-3 of the path integral above).
@pytest.mark.parametrize("name", ["gpt2", "bert", "llama"])
def test_a_plain_rule_where_f_is_smooth_from_zero_and_panels_where_not(loaded, name):
    lm, model, text = loaded[name]
    with forward_rows(lm.model) as rows:
        found = attribute(lm, text)
    captum, captum_delta = captum_integrated_gradients(model, lm, text, found.target_id, 64)
    if name == "llama":
        assert sum(rows) == 2 + len(GRID) + 64 and abs(captum_delta) > 0.05 * abs(found.change)
        return
    assert rows == [1, 1, 16, 16, 16, 16, 16]
    np.testing.assert_allclose(found.scores, captum, atol=1e-7, rtol=0)


@pytest.fixture(scope="module")
def mixture_of_experts(tmp_path_factory):
    """(explorer's loaded model, the plain model) of a tiny Mixtral: 4 experts, each token routed to 2."""
    folder = tmp_path_factory.mktemp("mixtral")
    torch.manual_seed(0)
    config = MixtralConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64, **IDS,
    )  # fmt: skip
    AutoModelForCausalLM.from_config(config, attn_implementation="eager").save_pretrained(folder)
    word_tokenizer().save_pretrained(folder)
    plain = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").to(DEVICE).eval()
    return explorer.load_model(folder, device=DEVICE), plain


def test_jumps_that_no_steps_close_are_found_and_said(loaded, mixture_of_experts):
    """A mixture of experts switches experts along the path: log p jumps there, which no gradient sees, so the
    completeness error stays whatever the steps (Captum's: 2.0% of the change at 64 points, 2.3% at 256, 2.4% at
    512). The result finds the jumps (+4.0e-3, Captum's error at 256 points within 3%) and the check line says steps do
    not close the gap. The tiny T5 at 64 steps misses by 22% too, but its log p is continuous (ReLU kinks): no
    jumps, and the line says more steps lower it (0.4% at 256)."""
    from explorer.views.attribution import Scores

    lm, plain = mixture_of_experts
    found = attribute(lm, TEXT)
    _, never_closed = captum_integrated_gradients(plain, lm, TEXT, found.target_id, 256)
    assert abs(found.delta) > 0.01 * abs(found.change)
    assert found.jumps == pytest.approx(-never_closed, rel=0.05)
    check = Scores(lm.name, TEXT).caption(found)
    assert check.startswith("Not verified") and "more steps do not close this gap" in check
    assert f"{found.jumps:+.2e}" in check and "More steps lower it" not in check
    t5 = attribute(loaded["t5"][0], TEXT)
    assert abs(t5.delta) > 0.01 * abs(t5.change) and t5.jumps == 0
    assert "More steps lower it" in Scores(t5.model_name, TEXT).caption(t5)


def coverage_family(model_type: str, folder):
    """explorer's loaded copy of the coverage matrix's tiny ``model_type`` (tests/families.py)."""
    from tests import families

    return explorer.load_model(families.build_family(model_type, folder), device=DEVICE)


def test_jumps_between_the_points_of_a_missing_panel_are_found(tmp_path):
    """The tiny Qwen3-MoE at 64 steps: no two sampled points disagree enough to flag a cell (the slopes search
    found nothing, and the line said more steps lower the 3.3% error), but the panel that misses its completeness
    holds the jumps: searched there too, they are found (+8.2e-3 of the −9.7e-3), and the line says that steps do
    not close the gap."""
    from explorer.views.attribution import Scores

    lm = coverage_family("qwen3_moe", tmp_path)
    found = attribute(lm, "the cat sat on the mat", steps=64)
    assert abs(found.delta) > 0.01 * abs(found.change)
    assert found.jumps * found.delta < 0 and abs(found.jumps) >= abs(found.delta) / 2
    assert "more steps do not close this gap" in Scores(lm.name, "the cat sat on the mat").caption(found)


@pytest.mark.parametrize("model_type", ["t5", "longt5"])
def test_relu_kinks_take_the_bisected_trapezoid(tmp_path, model_type):
    """The coverage matrix's tiny T5 and LongT5 at their page's 256 steps: Gauss-Legendre panels missed by 4.7% and
    1.3% (f' jumps at every ReLU kink), the trapezoid on cells split where they miss by 0.73% and 0.89%."""
    from explorer.models.attribution import kinked

    lm = coverage_family(model_type, tmp_path)
    assert kinked(lm.model)
    found = attribute(lm, "the cat sat on the mat", steps=lm.integrated_gradients_steps)
    assert lm.integrated_gradients_steps == 256 and abs(found.delta) <= 0.01 * abs(found.change), found.verification()


def test_the_page_steps_close_gemma2s_path(tmp_path):
    """Gemma 2's four bias-free RMSNorms a layer move f over 14 decades of α: 64 points miss by 3.8% on the tiny
    one, its page's 256 by 3e-5."""
    lm = coverage_family("gemma2", tmp_path)
    found = attribute(lm, "the cat sat on the mat", steps=lm.integrated_gradients_steps)
    assert abs(found.delta) <= 0.01 * abs(found.change), found.verification()


def test_the_bundled_models_and_a_chosen_target():
    decoder = explorer.load_model(explorer.DEFAULT_DECODER)
    top = attribute(decoder, "The cat sat on the", steps=decoder.integrated_gradients_steps)
    other = attribute(decoder, "The cat sat on the", target=" mat")
    assert other.target_token.strip() == "mat" and other.logprob < top.logprob
    assert abs(top.delta) <= 0.01 * abs(top.change), top.verification()
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


def first_pass_function(subject, text: str):
    """(the text's input embeddings, f) for a decoder whose first generation pass appends the position it
    predicts (XLNet): the model's own ``prepare_inputs_for_generation`` run on the text, the appended token's own
    embedding held after the path's, the permutation mask and target mapping it prepares; the plain model."""
    from tests import families

    text_ids = subject.ids(text)
    ids, extra = families.first_pass(subject, text_ids)
    assert ids.shape[1] > text_ids.shape[1], "the first pass reads nothing after the text"
    model = subject.reference
    embed = model.get_input_embeddings()
    appended = embed(ids[:, text_ids.shape[1] :]).detach()

    def f(x):
        rows = len(x)
        batch = {name: value.expand(rows, *value.shape[1:]) for name, value in extra.items()}
        whole = torch.cat([x, appended.expand(rows, -1, -1)], dim=1)
        return torch.log_softmax(model(inputs_embeds=whole, **batch).logits[:, -1].float(), -1)

    return embed(text_ids).detach().float(), f


def test_xlnet_explains_the_prediction_of_its_first_generation_pass(tmp_path):
    """XLNet predicts at a token its generate() appends after the text (its query stream there): every method reads
    that first pass, over the text's tokens only (the appended token held fixed), and equals autograd, occlusion and
    the near-exact path integral on the plain model's own first pass; its log-probability is generate()'s."""
    from tests import families

    subject = families.subject_for("xlnet", tmp_path)
    text = families.PROMPT
    found = {method: attribute(subject.lm, text, method=method) for method in METHODS}
    target = found["integrated_gradients"].target_id
    x, f = first_pass_function(subject, text)
    generated = torch.log_softmax(torch.tensor(families._first_generated_logits(subject)), -1)
    assert target == int(generated.argmax())
    with torch.no_grad():
        full, baseline = float(f(x)[0, target]), float(f(torch.zeros_like(x))[0, target])
        occluded = [full - float(f(x * (torch.arange(x.shape[1]) != p).view(1, -1, 1))[0, target]) for p in range(6)]
    assert full == pytest.approx(float(generated[target]), abs=1e-5)
    np.testing.assert_allclose(found["occlusion"].scores, occluded, atol=1e-6, rtol=0)
    np.testing.assert_allclose(
        found["gradient_x_input"].scores, (gradient(f, x, target) * x).sum(-1)[0].numpy(), atol=1e-6, rtol=0
    )
    integrated = found["integrated_gradients"]
    expected = (exact_path_integral(f, x, target) * x).sum(-1)[0].numpy()
    # The tiny XLNet's change is small (1.1e-3): within 1e-3 of it or 2e-6, ~8 float32 roundings of log p ≈ −3.16
    # (its ulp 2.4e-7), whichever is larger; the reference's own completeness error is printed on failure.
    bound = max(1e-3 * abs(integrated.change), 2e-6)
    missed = float(expected.sum()) - integrated.change
    assert np.abs(integrated.scores - expected).max() <= bound, f"the reference misses its completeness by {missed:.1e}"
    for result in found.values():
        assert result.tokens == tuple(text.split())  # the text's tokens: the appended one is no text
        assert result.logprob == pytest.approx(full, abs=1e-5)
        assert result.baseline_logprob == pytest.approx(baseline, abs=1e-5)
        assert "appends after the text" in result.held and "gets no score" in result.held
    assert families.check_attribution(subject) == families.Cell(families.Y)
