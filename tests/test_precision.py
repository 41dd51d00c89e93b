"""dtype and device_map: half-precision models say so and are checked against a looser, stated bound;
``verify()`` recomputes on the model's device and equals the NumPy recomputation; a capture's one transfer from
an accelerator gives the arrays the layer-by-layer copy gives; device_map="auto" loads the same model. Runs on
``EXPLORER_TEST_DEVICE``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.compute.attention import score_stages
from explorer.data.attention import TOLERANCE
from explorer.models.decoding import special_token_ids
from tests.devices import DEVICE
from tests.test_decoding import CASES, PROMPTS, _make_end_of_sequence_likely, assert_same_as_generate, fill_tokens
from tests.test_decoding import generate as reference_generate
from tests.tiny_models import TINY, eager_reference

TEXT = "the cat sat on the mat and the dog ran to the park"
TARGET = "a dog ran"
HALF = ["float16", "bfloat16"]


def _capture(name, lm):
    return explorer.capture(lm, TEXT, target=TARGET if name == "t5" else None)


def numpy_recompute_error(stack) -> float:
    """The step-by-step page's NumPy float64 recomputation, head by head, against the captured weights."""
    return max(
        float(np.abs(score_stages(stack, layer, head)["weights"] - stack.attentions[layer, head]).max())
        for layer in range(stack.num_layers)
        for head in range(stack.num_heads)
    )


@pytest.mark.parametrize("name", sorted(TINY))
def test_verify_on_the_device_equals_the_numpy_recomputation(tiny_models, name):
    """On every architecture: T5's position bias, Gemma 2's softcap and sliding windows, grouped KV heads."""
    lm = explorer.load_model(tiny_models[name], device=DEVICE)
    cap = _capture(name, lm)
    assert cap.device == str(next(lm.model.parameters()).device) and cap.dtype == "float32"
    assert torch.device(cap.device).type == torch.device(DEVICE).type
    for stack in cap.stacks.values():
        assert stack.device == cap.device and stack.dtype == "float32" and stack.tolerance == cap.tolerance
        reference = numpy_recompute_error(stack)
        assert 0 < reference <= stack.tolerance
        assert abs(stack.verify() - reference) <= 1e-12
        assert abs(stack.verify("cpu") - reference) <= 1e-12  # recomputed on the host, if asked
    assert cap.verify() <= cap.tolerance == TOLERANCE["float32"]


@pytest.mark.parametrize("name", sorted(TINY))
def test_one_transfer_from_the_device_gives_the_same_arrays(tiny_models, monkeypatch, name):
    """The accelerator path (every tensor packed into one buffer on the device, one copy to the host), taken here on
    the test device whatever it is, gives the arrays the layer-by-layer path gives, bit for bit."""
    from explorer.models import capture as capture_module
    from explorer.models import transfer

    lm = explorer.load_model(tiny_models[name], device=DEVICE)
    monkeypatch.setattr(
        capture_module, "to_host", lambda groups: {k: transfer.stack_on_host(v) for k, v in groups.items()}
    )
    expected = _capture(name, lm)
    monkeypatch.setattr(capture_module, "to_host", transfer._one_transfer)
    packed = _capture(name, lm)
    assert packed.hidden_states.tobytes() == expected.hidden_states.tobytes()
    for stack_name, stack in expected.stacks.items():
        for field in ("attentions", "queries", "keys", "values", "position_bias", "mask", "layer_mask", "softcap"):
            ours, theirs = getattr(packed.stacks[stack_name], field), getattr(stack, field)
            assert (ours is None) == (theirs is None), field
            if ours is not None:
                assert ours.dtype == theirs.dtype and ours.tobytes() == theirs.tobytes(), field


def test_the_default_dtype_is_float32_and_bad_dtypes_are_refused(tiny_models):
    assert next(explorer.load_model(tiny_models["gpt2"], device=DEVICE).model.parameters()).dtype == torch.float32
    for wrong in ("int8", "float64", "half-ish", torch.int8, ["bfloat16"]):
        with pytest.raises(explorer.ModelLoadError, match="dtype must be one of"):
            explorer.load_model(tiny_models["gpt2"], device=DEVICE, dtype=wrong)


@pytest.mark.parametrize("dtype", ["bfloat16", torch.bfloat16, "torch.bfloat16", "float16", torch.float16])
def test_a_dtype_may_be_named_or_given(tiny_models, dtype):
    lm = explorer.load_model(tiny_models["gpt2"], device=DEVICE, dtype=dtype)
    assert {p.dtype for p in lm.model.parameters()} == {torch.bfloat16 if "bfloat16" in str(dtype) else torch.float16}


def test_float32_even_when_the_checkpoint_is_half_precision(tmp_path):
    """transformers keeps a checkpoint's own dtype by default; load_model loads float32 unless asked."""
    from transformers import AutoModelForCausalLM

    from tests.tiny_models import save_tiny

    folder = save_tiny("gpt2", tmp_path)
    AutoModelForCausalLM.from_pretrained(folder).to(torch.bfloat16).save_pretrained(folder)
    assert AutoModelForCausalLM.from_pretrained(folder).dtype == torch.bfloat16
    assert {p.dtype for p in explorer.load_model(folder, device=DEVICE).model.parameters()} == {torch.float32}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(device_map="everywhere"), "device_map must be one of auto"),
        (dict(device_map=["auto"]), "device_map must be one of auto"),
        (dict(device="cpu", device_map="auto"), "Give either device"),
    ],
)
def test_bad_device_maps_are_refused_before_loading(tiny_models, monkeypatch, options, message):
    monkeypatch.setattr("explorer.models.loading._load_config", lambda *a, **k: pytest.fail("loaded anyway"))
    with pytest.raises(explorer.ModelLoadError, match=message):
        explorer.load_model(tiny_models["gpt2"], **options)


def test_a_device_map_without_accelerate_says_what_to_install(tiny_models, monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else real_find_spec(name, *a)
    )
    with pytest.raises(explorer.ModelLoadError, match="pip install accelerate"):
        explorer.load_model(tiny_models["gpt2"], device_map="auto")


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name", ["gpt2", "llama", "bert", "t5"])
def test_half_precision_captures_say_so_and_verify_within_their_bound(tiny_models, name, dtype):
    lm = explorer.load_model(tiny_models[name], device=DEVICE, dtype=dtype)
    assert next(lm.model.parameters()).dtype == getattr(torch, dtype)
    cap = _capture(name, lm)
    assert cap.dtype == dtype and any(f"runs in {dtype}" in note for note in cap.notes)
    assert cap.attentions.dtype == np.float32  # shown values converted, as the note says
    assert TOLERANCE["float32"] < cap.tolerance == TOLERANCE[dtype]
    assert cap.verify() <= cap.tolerance


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name", ["llama", "t5"])
def test_half_precision_weights_are_the_half_precision_models_own(tiny_models, name, dtype):
    """Bit for bit: the weights the half-precision eager model gives (converted to float32), every stack."""
    lm = explorer.load_model(tiny_models[name], device=DEVICE, dtype=dtype)
    reference = eager_reference(name, tiny_models[name], dtype=getattr(torch, dtype))
    cap = _capture(name, lm)
    ids = torch.tensor(cap.token_ids, device=DEVICE)[None]
    with torch.no_grad():
        if name == "t5":
            decoder_ids = torch.tensor(lm.tokenizer(text_target=TARGET)["input_ids"], device=DEVICE)[None]
            out = reference(
                input_ids=ids,
                decoder_input_ids=reference.prepare_decoder_input_ids_from_labels(labels=decoder_ids),
                output_attentions=True,
            )
            expected = {
                "encoder": out.encoder_attentions,
                "decoder": out.decoder_attentions,
                "cross": out.cross_attentions,
            }
        else:
            expected = {"decoder": reference(input_ids=ids, output_attentions=True).attentions}
    assert set(expected) == set(cap.stacks)
    for stack, layers in expected.items():
        weights = torch.stack([layer[0] for layer in layers]).float().cpu().numpy()
        np.testing.assert_array_equal(cap.stacks[stack].attentions, weights)
        assert cap.stacks[stack].dtype == dtype


@pytest.mark.parametrize("dtype", HALF)
def test_half_precision_real_models_verify_within_their_bound(minilm, dtype):
    for name, text in (
        (explorer.DEFAULT_ENCODER, "time flies like an arrow " * 20),
        (explorer.DEFAULT_DECODER, TEXT * 8),
    ):
        lm = explorer.load_model(name, device=DEVICE, dtype=dtype)
        cap = explorer.capture(lm, text)
        assert cap.verify() <= cap.tolerance, (name, dtype, cap.verify())


@pytest.mark.parametrize("dtype", HALF)
def test_half_precision_decoding_equals_generate_in_that_dtype(dtype):
    lm = explorer.load_model(explorer.DEFAULT_DECODER, device=DEVICE, dtype=dtype)
    prompt = "It is a truth universally acknowledged, that"
    ids = special_token_ids(lm)
    for strategy, extra in (("greedy", {}), ("beam", {"num_beams": 3})):
        trace = explorer.decode(lm, prompt, strategy=strategy, max_new_tokens=8, **extra)
        inputs = lm.tokenizer(prompt, return_tensors="pt").to(DEVICE)
        with torch.inference_mode():
            reference = lm.model.generate(
                **inputs,
                max_new_tokens=8,
                do_sample=False,
                num_beams=extra.get("num_beams", 1),
                pad_token_id=ids["pad"],
                eos_token_id=ids["eos"],
            )
        assert trace.sequences[0].tolist() == reference[0].tolist()[: len(trace.sequences[0])]


def test_device_map_auto_loads_the_same_model(tiny_models):
    placed = explorer.load_model(tiny_models["llama"], device_map="auto")
    plain = explorer.load_model(tiny_models["llama"], device=str(placed.device))
    assert placed.device == str(placed.model.get_input_embeddings().weight.device)  # where inputs go
    ours, theirs = explorer.capture(placed, TEXT), explorer.capture(plain, TEXT)
    np.testing.assert_array_equal(ours.attentions, theirs.attentions)
    assert ours.verify() <= ours.tolerance


@pytest.fixture(scope="module")
def bfloat16_models(tiny_models):
    loaded = {name: explorer.load_model(tiny_models[name], device=DEVICE, dtype="bfloat16") for name in ("llama", "t5")}
    for name, lm in loaded.items():
        _make_end_of_sequence_likely(lm, PROMPTS[name])
    return loaded


@pytest.mark.parametrize("case", ["greedy-penalties", "beam-4-lp-early", "sample-all-warpers"])
@pytest.mark.parametrize("name", ["llama", "t5"])
def test_bfloat16_decoding_equals_generate_with_penalties_beams_and_sampling(bfloat16_models, name, case):
    lm = bfloat16_models[name]
    trace = explorer.decode(lm, PROMPTS[name], **CASES[case])
    assert_same_as_generate(trace, reference_generate(lm, PROMPTS[name], CASES[case]), fill_tokens(lm))


def test_attention_while_generating_in_bfloat16_says_so_and_verifies(bfloat16_models):
    trace = explorer.decode(bfloat16_models["llama"], PROMPTS["llama"], strategy="greedy", record_attention=True)
    stack = trace.attention["decoder"]
    assert stack.dtype == "bfloat16" and torch.device(stack.device).type == torch.device(DEVICE).type
    assert 0 < stack.verify() <= stack.tolerance == TOLERANCE["bfloat16"]
