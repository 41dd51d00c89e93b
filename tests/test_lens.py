"""The logit lens against a reference written from transformers' own outputs: ``output_hidden_states`` read
through the model's own final norm and ``lm_head`` (the last entry already normed, as transformers gives it),
and the model's own logits for the last layer."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from transformers import BertForMaskedLM

import explorer
from explorer.models.lens import final_norm
from tests.devices import DEVICE

TEXT = "the cat sat on the mat and the dog ran to the park"
TARGET = "a dog ran to the park"
PROSE = "It is a truth universally acknowledged, that a single man in possession of a good fortune"


def reference_logprobs(lm, text: str, target: str | None = None) -> np.ndarray:
    """[layer + 1, position, vocabulary]: each hidden state through the norm and head, written out per model."""
    model, config = lm.model, lm.model.config
    ids = lm.tokenizer(text, return_tensors="pt")["input_ids"].to(DEVICE)
    with torch.inference_mode():
        if target is None:
            out = model(input_ids=ids, output_hidden_states=True)
            states = out.hidden_states
        else:
            labels = lm.tokenizer(text_target=target, return_tensors="pt")["input_ids"].to(DEVICE)
            decoder_ids = model.prepare_decoder_input_ids_from_labels(labels=labels)
            out = model(input_ids=ids, decoder_input_ids=decoder_ids, output_hidden_states=True)
            states = out.decoder_hidden_states
        norm = final_norm(model)
        # transformers' last entry is the final norm's output already: normed once, not twice
        normed = [norm(state) for state in states[:-1]] + [states[-1]]
        readings = []
        for state in normed:
            if config.model_type == "t5" and config.scale_decoder_outputs:
                state = state * config.d_model**-0.5
            logits = model.lm_head(state)
            if getattr(config, "final_logit_softcapping", None):
                logits = torch.tanh(logits / config.final_logit_softcapping) * config.final_logit_softcapping
            readings.append(torch.log_softmax(logits[0].float(), dim=-1))
        own = torch.log_softmax(out.logits[0].float(), dim=-1)
    return torch.stack(readings).cpu().numpy(), own.cpu().numpy()


def assert_equal_to_reference(lens, expected: np.ndarray, own: np.ndarray, atol: float = 1e-5) -> float:
    top_n = lens.top_ids.shape[-1]
    order = np.argsort(-expected, axis=-1, kind="stable")[..., :top_n]
    np.testing.assert_allclose(lens.top_logprobs, np.take_along_axis(expected, order, axis=-1), atol=atol)
    final = own.argmax(axis=-1)
    np.testing.assert_array_equal(lens.final_ids, final)
    reading = np.take_along_axis(expected, final[None, :, None], axis=-1)[..., 0]
    np.testing.assert_allclose(lens.final_logprobs, reading, atol=atol)
    np.testing.assert_array_equal(lens.final_ranks, (expected > reading[..., None] + atol).sum(axis=-1))
    # the last layer is the model's own prediction
    np.testing.assert_allclose(lens.top_logprobs[-1], np.take_along_axis(own, order[-1], axis=-1), atol=atol)
    assert (lens.final_ranks[-1] == 0).all()
    return float(np.abs(lens.top_logprobs - np.take_along_axis(expected, order, axis=-1)).max())


@pytest.mark.parametrize("name", ["gpt2", "llama", "gemma2", "qwen3"])
def test_the_lens_equals_hidden_states_through_the_models_own_head(tiny_models, name):
    lm = explorer.load_model(tiny_models[name], device=DEVICE)
    lens = explorer.logit_lens(lm, TEXT, top_n=4)
    expected, own = reference_logprobs(lm, TEXT)
    assert lens.top_ids.shape == (lm.num_layers + 1, len(lens.tokens), 4)
    assert_equal_to_reference(lens, expected, own)


def test_the_lens_of_an_encoder_decoder_reads_the_decoder(tiny_models):
    lm = explorer.load_model(tiny_models["t5"], device=DEVICE)
    lens = explorer.logit_lens(lm, TEXT, target=TARGET)
    expected, own = reference_logprobs(lm, TEXT, TARGET)
    assert_equal_to_reference(lens, expected, own)
    with pytest.raises(explorer.InputError, match="give the decoder's text"):
        explorer.logit_lens(lm, TEXT)


def test_the_lens_of_the_bundled_decoder(capsys):
    lm = explorer.load_model(explorer.DEFAULT_DECODER, device=DEVICE)
    lens = explorer.logit_lens(lm, PROSE)
    expected, own = reference_logprobs(lm, PROSE)
    error = assert_equal_to_reference(lens, expected, own)
    settled = [int(np.argmax(lens.final_ranks[:, position] == 0)) for position in range(len(lens.tokens))]
    with capsys.disabled():
        print(f"\nlogit lens, bundled decoder: largest error {error:.1e}; layer where the final prediction becomes")
        print(f"the top token, per position: {settled}")


def test_an_encoder_without_a_masked_lm_head_says_why(minilm):
    with pytest.raises(explorer.InputError, match="checkpoint has none"):
        explorer.logit_lens(minilm, TEXT)


def test_an_encoder_is_read_through_its_masked_lm_head(tmp_path):
    """A BERT saved with its masked-LM head: every hidden state through the model's own ``cls`` head, the last
    equal to its own masked-LM logits (the reading at a position guesses the token there)."""
    from tests.tiny_models import TINY

    _, make_config, make_tokenizer = TINY["bert"]
    torch.manual_seed(0)
    mlm = BertForMaskedLM(make_config())
    mlm.save_pretrained(tmp_path)
    make_tokenizer().save_pretrained(tmp_path)
    lm = explorer.load_model(tmp_path, device=DEVICE)
    assert lm.kind == "encoder"
    lens = explorer.logit_lens(lm, TEXT)
    reference = BertForMaskedLM.from_pretrained(tmp_path).to(DEVICE).eval()
    ids = torch.tensor([lens_ids(lm, TEXT)], device=DEVICE)
    with torch.inference_mode():
        out = reference(input_ids=ids, output_hidden_states=True)
        expected = torch.stack([torch.log_softmax(reference.cls(h)[0].float(), -1) for h in out.hidden_states])
        own = torch.log_softmax(out.logits[0].float(), -1)
    assert_equal_to_reference(lens, expected.cpu().numpy(), own.cpu().numpy())


def lens_ids(lm, text: str) -> list[int]:
    return lm.tokenizer(text)["input_ids"]


@pytest.mark.parametrize("bad", [0, 51, 2.5, True])
def test_absurd_settings_are_refused(tiny_models, bad):
    lm = explorer.load_model(tiny_models["gpt2"], device=DEVICE)
    with pytest.raises(explorer.InputError, match="top_n"):
        explorer.logit_lens(lm, TEXT, top_n=bad)
    with pytest.raises(explorer.InputError, match="Type some text"):
        explorer.logit_lens(lm, "   ")


def test_concurrent_lenses_on_one_shared_model_each_get_their_own(tiny_models):
    lm = explorer.load_model(tiny_models["llama"], device=DEVICE)
    texts = [TEXT, "a dog ran", "the park and the mat", "cat " * 30]
    alone = {text: explorer.logit_lens(lm, text) for text in texts}
    results, start = {}, threading.Barrier(len(texts) * 2)

    def run(index: int, text: str) -> None:
        start.wait()
        results[index] = (text, explorer.logit_lens(lm, text))

    threads = [threading.Thread(target=run, args=(i, texts[i % len(texts)])) for i in range(len(texts) * 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for text, lens in results.values():
        np.testing.assert_array_equal(lens.top_logprobs, alone[text].top_logprobs)
