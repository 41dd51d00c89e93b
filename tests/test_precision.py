"""dtype and device_map: half-precision models say so and are checked against a looser, stated bound;
``verify()`` recomputes on the model's device and equals the NumPy recomputation; device_map="auto" loads the
same model. Runs on ``EXPLORER_TEST_DEVICE``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.compute.attention import max_recompute_error as numpy_recompute_error
from explorer.data.attention import TOLERANCE
from explorer.models.decoding import special_token_ids
from tests.devices import DEVICE
from tests.tiny_models import TINY

TEXT = "the cat sat on the mat and the dog ran to the park"
TARGET = "a dog ran"
HALF = ["float16", "bfloat16"]


def _capture(name, lm):
    return explorer.capture(lm, TEXT, target=TARGET if name == "t5" else None)


@pytest.mark.parametrize("name", sorted(TINY))
def test_verify_on_the_device_equals_the_numpy_recomputation(tiny_models, name):
    lm = explorer.load_model(tiny_models[name], device=DEVICE)
    cap = _capture(name, lm)
    assert cap.device == str(lm.device) and cap.dtype == "float32"
    for stack in cap.stacks.values():
        reference = numpy_recompute_error(
            stack.queries,
            stack.keys,
            stack.scale,
            stack.masks_by_layer(),
            stack.attentions,
            position_bias=stack.position_bias,
            softcap=stack.softcap,
        )
        assert abs(stack.verify(cap.device) - reference) <= 1e-12
    assert cap.verify() <= cap.tolerance == TOLERANCE["float32"]


def test_the_default_dtype_is_float32_and_bad_dtypes_are_refused(tiny_models):
    assert next(explorer.load_model(tiny_models["gpt2"], device=DEVICE).model.parameters()).dtype == torch.float32
    for wrong in ("int8", "float64", "half-ish"):
        with pytest.raises(explorer.ModelLoadError, match="dtype must be one of"):
            explorer.load_model(tiny_models["gpt2"], device=DEVICE, dtype=wrong)


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
