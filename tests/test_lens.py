"""The logit lens against a reference written from transformers' own outputs: each hidden state that
``output_hidden_states`` reports put in place of the last layer's output (a plain forward hook on the model's own
last layer), so that the model's own forward reads it through its final norm, head and whatever it does around
them (T5's rescaling, Cohere's ``logit_scale``, Granite's ``logits_scaling``, Gemma's softcap); the last layer is
the model's own logits."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from transformers import AutoModelForMaskedLM, BertForMaskedLM

import explorer
from tests.devices import DEVICE
from tests.families import FAMILIES, model_class, tiny_config, tokenizer_for

TEXT = "the cat sat on the mat and the dog ran to the park"
TARGET = "a dog ran to the park"
PROSE = "It is a truth universally acknowledged, that a single man in possession of a good fortune"


def reference_logprobs(lm, text: str, target: str | None = None, model=None) -> tuple[np.ndarray, np.ndarray]:
    """([layer + 1, position, vocabulary], [position, vocabulary]): each hidden state read by the model's own
    forward from its last layer on, and the model's own log-probabilities."""
    model = lm.model if model is None else model
    inputs = {"input_ids": lm.tokenizer(text, return_tensors="pt")["input_ids"].to(DEVICE)}
    if target is not None:
        labels = lm.tokenizer(text_target=target, return_tensors="pt")["input_ids"].to(DEVICE)
        inputs["decoder_input_ids"] = model.prepare_decoder_input_ids_from_labels(labels=labels)
    with torch.inference_mode():
        out = model(**inputs, output_hidden_states=True)
        states = out.decoder_hidden_states if target is not None else out.hidden_states
        last = last_layer(model.get_decoder() if target is not None else model, len(states) - 1)
        readings = [read_as_last_layer(model, inputs, last, state) for state in states[:-1]]
        own = torch.log_softmax(out.logits[0].float(), dim=-1)
    return torch.stack([*readings, own]).cpu().numpy(), own.cpu().numpy()


def last_layer(scope: torch.nn.Module, layers: int) -> tuple[torch.nn.Module, int]:
    """(module, calls): the module that runs the last of ``layers`` layers, and how many times the forward calls
    it (ALBERT calls its one shared layer group every time)."""
    lists = [m for m in scope.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == layers]
    if lists:
        return lists[-1][-1], 1
    shared = next(m for m in scope.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == 1)
    return shared[0], layers


def read_as_last_layer(model, inputs: dict, last: tuple[torch.nn.Module, int], state) -> torch.Tensor:
    module, calls = last
    count = [0]

    def replace(module, args, output):
        count[0] += 1
        if count[0] == calls:
            return (state, *output[1:]) if isinstance(output, tuple) else state

    handle = module.register_forward_hook(replace)
    try:
        return torch.log_softmax(model(**inputs).logits[0].float(), dim=-1)
    finally:
        handle.remove()


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


def test_a_latent_array_model_says_its_predictions_cannot_be_read_token_by_token(tmp_path):
    """Perceiver's masked LM predicts from its latents, through a decoder whose queries attend to them: no head reads
    a token's hidden state, so the lens, attribution and patching (which read an encoder through that head) say the
    features do not apply, rather than failing inside its base model (which reads no token ids)."""
    from tests.tiny_models import save_tiny_perceiver

    save_tiny_perceiver(tmp_path)
    lm = explorer.load_model(tmp_path, device=DEVICE)
    said = r"predicts its masked tokens from 4 positions of its own \(a latent array\).*cannot be read token by token"
    masked, other = "the cat sat on the [MASK]", "the dog sat on the [MASK]"
    for feature in (
        lambda: explorer.logit_lens(lm, masked),
        lambda: explorer.attribute(lm, masked),
        lambda: explorer.patch(lm, masked, other),
    ):
        with pytest.raises(explorer.NotApplicable, match=said):
            feature()


def test_an_encoder_is_read_through_its_masked_lm_head(tmp_path):
    """A BERT saved with its masked-LM head: every hidden state through the model's own ``cls`` head, the last
    equal to its own masked-LM logits (the reading at a position guesses the token there)."""
    save_bert_with_head(tmp_path, seed=0)
    lm = explorer.load_model(tmp_path, device=DEVICE)
    assert lm.kind == "encoder"
    lens = explorer.logit_lens(lm, TEXT)
    assert_equal_to_reference(lens, *masked_lm_reference(tmp_path, lm))


def test_the_masked_lm_head_is_the_loaded_models_own(tmp_path):
    """The head read beside an encoder belongs to that loaded model, not to its name: the same folder loaded
    again in bfloat16, then retrained and loaded again, is read through its own head each time (a head kept
    by name gave a dtype error, then the old weights' predictions)."""
    save_bert_with_head(tmp_path, seed=0)
    explorer.logit_lens(explorer.load_model(tmp_path, device=DEVICE), TEXT)
    half = explorer.load_model(tmp_path, device=DEVICE, dtype="bfloat16")
    _, own = masked_lm_reference(tmp_path, half, dtype=torch.bfloat16)
    lens = explorer.logit_lens(half, TEXT)
    np.testing.assert_array_equal(lens.final_ids, own.argmax(axis=-1))
    np.testing.assert_allclose(lens.final_logprobs[-1], own.max(axis=-1), atol=1e-6)
    save_bert_with_head(tmp_path, seed=1)
    retrained = explorer.load_model(tmp_path, device=DEVICE)
    assert_equal_to_reference(explorer.logit_lens(retrained, TEXT), *masked_lm_reference(tmp_path, retrained))


def save_bert_with_head(folder, seed: int) -> None:
    from tests.tiny_models import TINY

    _, make_config, make_tokenizer = TINY["bert"]
    torch.manual_seed(seed)
    BertForMaskedLM(make_config()).save_pretrained(folder)
    make_tokenizer().save_pretrained(folder)


def masked_lm_reference(folder, lm, dtype=torch.float32) -> tuple[np.ndarray, np.ndarray]:
    """Every hidden state through the checkpoint's own ``cls`` head, and its own masked-LM log-probabilities."""
    reference = BertForMaskedLM.from_pretrained(folder, dtype=dtype).to(DEVICE).eval()
    ids = torch.tensor([lens_ids(lm, TEXT)], device=DEVICE)
    with torch.inference_mode():
        out = reference(input_ids=ids, output_hidden_states=True)
        expected = torch.stack([torch.log_softmax(reference.cls(h)[0].float(), -1) for h in out.hidden_states])
        own = torch.log_softmax(out.logits[0].float(), -1)
    return expected.cpu().numpy(), own.cpu().numpy()


def lens_ids(lm, text: str) -> list[int]:
    return lm.tokenizer(text)["input_ids"]


def test_a_norm_whose_id_a_freed_one_had_still_gets_its_hook():
    """Hooks are remembered by module, not by id: CPython gives a new object the address of one just freed,
    and a norm taken for hooked by its id recorded nothing (the lens then failed with an IndexError)."""
    from explorer.models import lens as lens_module

    norm = torch.nn.LayerNorm(8)
    lens_module._hook(norm)
    freed = id(norm)
    del norm
    for _ in range(1000):  # the allocator hands the freed slot to the next object of its size, almost always
        candidate = torch.nn.LayerNorm(8)
        if id(candidate) == freed:
            break
    else:
        pytest.skip("no new module took the freed module's address")
    lens_module._hook(candidate)
    assert len(candidate._forward_hooks) == 1


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


# name -> (model_type, config values on top of tests/families.py's tiny config): the ways a forward reads its last
# layer's output that the lens must repeat, beyond the matrix's (tests/families.py: each family with its defaults).
# Weights drawn 10x wider, so that a factor left out shows in the numbers.
LENS_FAMILIES = {
    "opt": ("opt", {}),  # final norm, then project_out (word embeddings narrower than the hidden states)
    "opt-350m": ("opt", {"do_layer_norm_before": False}),  # post-norm layers: project_out alone
    "cohere": ("cohere", {"logit_scale": 0.25}),
    "cohere2": ("cohere2", {"logit_scale": 0.25}),
    "granite": ("granite", {"logits_scaling": 4.0}),  # 1.0 by default: a division left out would not show
    "granitemoe": ("granitemoe", {"logits_scaling": 4.0}),
    "gemma2": ("gemma2", {"final_logit_softcapping": 3.0}),  # 30 by default: barely bends tiny logits
    "electra": ("electra", {}),  # its masked-LM head is two modules: generator_predictions, generator_lm_head
    "albert": ("albert", {}),  # one layer group called for every layer
    # attention in their own code; T5's decoder output rescaled by d_model ** -0.5 before the tied head
    "gpt_neo": ("gpt_neo", {}),
    "bloom": ("bloom", {}),
    "falcon": ("falcon", {}),
    "t5": ("t5", {"decoder_start_token_id": 0}),
}


def save_family(name: str, folder) -> str:
    """The tiny family ``name`` (of ``LENS_FAMILIES``, or a model type of tests/families.py as it is there), with
    weights 10x wider, saved with its tokenizer: the folder."""
    model_type, values = LENS_FAMILIES.get(name, (name, {}))
    config = tiny_config(model_type)
    for key, value in values.items():
        setattr(config, key, value)
    for scale in ("initializer_range", "init_std", "initializer_factor"):  # OPT calls it init_std, T5 a factor
        if hasattr(config, scale):
            setattr(config, scale, getattr(config, scale) * 10)
    torch.manual_seed(0)
    model_class(model_type)._from_config(config, attn_implementation="eager").save_pretrained(folder)
    tokenizer_for(FAMILIES[model_type].kind).save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize("name", list(LENS_FAMILIES))
def test_the_lens_reads_each_layer_as_the_model_reads_its_last(tmp_path, name):
    """Every layer through what the model's forward does to its last layer's output: the final norm found in
    the module graph (none, or OPT's norm and project_out), the head, and the factors, caps and rescalings the
    forward applies in plain code; an encoder through the head its masked-LM checkpoint adds."""
    folder = save_family(name, tmp_path)
    lm = explorer.load_model(folder, device=DEVICE)
    target = TARGET if lm.kind == "encoder-decoder" else None
    lens = explorer.logit_lens(lm, TEXT, top_n=3, target=target)
    reference = AutoModelForMaskedLM.from_pretrained(folder).to(DEVICE).eval() if lm.kind == "encoder" else None
    expected, own = reference_logprobs(lm, TEXT, target, model=reference)
    assert_equal_to_reference(lens, expected, own)


def test_a_model_whose_logits_the_lens_cannot_repeat_says_so(tiny_models):
    """Logits the model changes after its head in a way the lens does not repeat (here squared, by a hook on the
    whole model) are refused with the reason, never read wrongly."""
    lm = explorer.load_model(tiny_models["llama"], device=DEVICE)

    def squared(module, args, kwargs, output):
        output.logits = output.logits**2
        return output

    handle = lm.model.register_forward_hook(squared, with_kwargs=True)
    try:
        with pytest.raises(explorer.InputError, match=r"logit lens does not apply.*not its head's scores"):
            explorer.logit_lens(lm, TEXT)
    finally:
        handle.remove()


@pytest.mark.parametrize("family", ["mamba", "longformer"])
def test_the_lens_reads_the_layers_inputs_where_hidden_states_are_not_them(tmp_path, family):
    """Mamba reports each layer's output (from the first on) as its hidden states, Longformer's layers read the
    text padded to a window multiple: the lens reads the stream at each layer's input, the text's positions only,
    as the matrix's reference does with forward hooks on the model's own layers."""
    from tests import families

    subject = families.subject_for(family, tmp_path)
    assert families.check_lens(subject) == families.Cell(families.Y)


def test_the_lens_reads_layers_that_return_a_list(tmp_path):
    """OpenAI-GPT's layers return a list ([hidden states, attention maps]), not a tuple: the lens reads each layer's
    stream through the model's own head as the matrix's reference does (that stream in place of the last layer's
    output, the list rebuilt), and its last layer's top tokens are the model's own."""
    from tests import families

    subject = families.subject_for("openai-gpt", tmp_path)
    assert families.check_lens(subject) == families.Cell(families.Y)


def test_the_lens_reads_the_rows_the_head_reads(tmp_path):
    """ProphetNet's head reads its first predicting stream, the rows after its main stream: the lens reads those rows
    at every layer, as the matrix's reference does by putting each layer's whole input in place of the last layer's
    output."""
    from tests import families

    subject = families.subject_for("prophetnet", tmp_path)
    assert families.check_lens(subject) == families.Cell(families.Y)


def test_xlnet_is_read_where_its_first_generation_pass_predicts(tmp_path):
    """XLNet predicts the next token at a position generate() appends after the text, reading its query stream
    there (a plain pass's last position has another top token on the tiny XLNet): the lens reads that stream at the
    target, after every layer, through the model's own head, as the matrix's reference does with hooks on the
    model's own layers; its last reading is generate()'s own first logits, and its one row is labelled with the
    text's last token, after which it predicts."""
    import explorer
    from tests import families

    subject = families.subject_for("xlnet", tmp_path)
    lm, prompt = subject.lm, families.PROMPT
    with torch.inference_mode():
        plain = subject.reference(input_ids=subject.ids(prompt)).logits[0, -1]
    generated = torch.log_softmax(torch.tensor(families._first_generated_logits(subject)), -1).numpy()
    assert int(plain.argmax()) != int(generated.argmax())
    lens = explorer.logit_lens(lm, prompt, top_n=3)
    assert lens.tokens == ("mat",) and lens.top_logprobs.shape == (3, 1, 3)
    np.testing.assert_allclose(lens.top_logprobs[-1, 0], np.sort(generated)[::-1][:3], atol=1e-5)
    assert lens.final_ids.tolist() == [int(generated.argmax())]
    assert "appends after the text" in lens.read_at and "query stream" in lens.read_at
    assert families.check_lens(subject) == families.Cell(families.Y)
