"""Capture equals the model's own eager attention, and q/k recompute it, on every architecture."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from tests.devices import DEVICE, host, on_device
from tests.tiny_models import TINY, eager_reference

TEXT = "the cat sat on the mat and the dog ran to the park"
TARGET = "a dog ran"


@pytest.fixture(scope="module", params=sorted(TINY))
def tiny(request, tiny_models):
    """(name, LoadedModel, eager reference model) for each tiny architecture."""
    folder = tiny_models[request.param]
    return request.param, explorer.load_model(folder, device=DEVICE), eager_reference(request.param, folder)


def _reference_attentions(name, reference, lm, cap):
    """The eager model's own output_attentions, per stack, as [layer, head, query, key] arrays."""
    ids = on_device(cap.token_ids)[None]
    with torch.no_grad():
        if name == "t5":
            decoder_ids = lm.model.prepare_decoder_input_ids_from_labels(
                labels=lm.tokenizer(text_target=TARGET, return_tensors="pt")["input_ids"].to(DEVICE)
            )
            out = reference(input_ids=ids, decoder_input_ids=decoder_ids, output_attentions=True)
            stacks = {
                "encoder": out.encoder_attentions,
                "decoder": out.decoder_attentions,
                "cross": out.cross_attentions,
            }
        else:
            out = reference(input_ids=ids, output_attentions=True)
            stacks = {"encoder" if lm.kind == "encoder" else "decoder": out.attentions}
    return {stack: host(torch.stack([a[0] for a in layers]).float()) for stack, layers in stacks.items()}


def _capture(name, lm):
    return explorer.capture(lm, TEXT, target=TARGET if name == "t5" else None)


def test_kind_and_shape(tiny):
    name, lm, _ = tiny
    expected = {"bert": "encoder", "t5": "encoder-decoder"}.get(name, "decoder")
    assert lm.kind == expected
    cap = _capture(name, lm)
    assert cap.attentions.shape == (lm.num_layers, lm.num_heads, len(cap.tokens), len(cap.tokens))
    assert cap.queries.shape[:3] == cap.attentions.shape[:3]
    assert cap.keys.shape[:3] == (lm.num_layers, lm.num_heads, len(cap.tokens))
    assert all(a.dtype == np.float32 for a in (cap.attentions, cap.queries, cap.keys))


def test_attentions_equal_eager_output_attentions(tiny):
    name, lm, reference = tiny
    cap = _capture(name, lm)
    expected = _reference_attentions(name, reference, lm, cap)
    assert set(expected) == set(cap.stacks)
    for stack, weights in expected.items():
        np.testing.assert_allclose(cap.stacks[stack].attentions, weights, rtol=0, atol=1e-6)


def test_recomputation_from_queries_and_keys(tiny):
    name, lm, _ = tiny
    cap = _capture(name, lm)
    assert cap.verify() <= 1e-5
    for stack in cap.stacks.values():
        np.testing.assert_allclose(stack.attentions.sum(-1), 1.0, atol=1e-5)


def test_causal_stacks_have_empty_upper_triangle(tiny):
    name, lm, _ = tiny
    cap = _capture(name, lm)
    causal = {"bert": [], "t5": ["decoder"]}.get(name, ["decoder"])
    for stack_name, stack in cap.stacks.items():
        upper = np.triu(stack.attentions, k=1)
        if stack_name in causal:
            assert stack.is_causal
            assert np.abs(upper).max() == 0.0
        elif stack_name == "encoder":
            assert not stack.is_causal
            assert stack.mask.all()


def test_verify_detects_wrong_vectors(tiny):
    """verify() must fail when the vectors are not the ones that produced the weights."""
    name, lm, _ = tiny
    stack = _capture(name, lm).main
    from dataclasses import replace

    shuffled = replace(stack, keys=stack.keys[:, :, ::-1].copy())
    assert shuffled.verify() > 1e-3


def test_grouped_kv_heads_are_shared_honestly(tiny_models):
    lm = explorer.load_model(tiny_models["llama"], device=DEVICE)
    stack = explorer.capture(lm, TEXT).main
    assert stack.kv_head_of_query.tolist() == [0, 0, 1, 1]
    np.testing.assert_array_equal(stack.keys[:, 0], stack.keys[:, 1])
    assert not np.array_equal(stack.keys[:, 0], stack.keys[:, 2])


def test_llama_keys_are_after_rotary_embedding(tiny_models):
    """Independent check: k_proj output rotated by the model's own rotary embedding equals our keys."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    lm = explorer.load_model(tiny_models["llama"], device=DEVICE)
    cap = explorer.capture(lm, TEXT)
    seen = {}
    attn = lm.model.model.layers[1].self_attn
    handle = attn.register_forward_hook(lambda m, args, kwargs, out: seen.update(kwargs), with_kwargs=True)
    try:
        with torch.no_grad():
            lm.model(on_device(cap.token_ids)[None], use_cache=False)
    finally:
        handle.remove()
    hidden = seen["hidden_states"]
    head_dim = attn.head_dim
    q = attn.q_proj(hidden).view(1, -1, lm.num_heads, head_dim).transpose(1, 2)
    k = attn.k_proj(hidden).view(1, -1, lm.model.config.num_key_value_heads, head_dim).transpose(1, 2)
    cos, sin = seen["position_embeddings"]
    q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
    np.testing.assert_allclose(cap.queries[1], host(q_rot[0]), atol=1e-6)
    np.testing.assert_allclose(cap.keys[1], host(k_rot[0, cap.main.kv_head_of_query.tolist()]), atol=1e-6)
    # Before RoPE the vectors differ: a capture of q_proj outputs would be wrong.
    assert np.abs(cap.keys[1, 0] - host(k[0, 0])).max() > 1e-3


def test_gpt2_queries_are_the_fused_projection_split(tiny_models):
    lm = explorer.load_model(tiny_models["gpt2"], device=DEVICE)
    cap = explorer.capture(lm, TEXT)
    seen = {}
    block = lm.model.transformer.h[0]
    handle = block.attn.c_attn.register_forward_hook(lambda m, args, out: seen.update(out=out))
    try:
        with torch.no_grad():
            lm.model(on_device(cap.token_ids)[None], use_cache=False)
    finally:
        handle.remove()
    q, k, _ = seen["out"][0].split(16, dim=-1)
    np.testing.assert_allclose(cap.queries[0], host(q.view(-1, 2, 8).transpose(0, 1)), atol=1e-6)
    np.testing.assert_allclose(cap.keys[0], host(k.view(-1, 2, 8).transpose(0, 1)), atol=1e-6)
    np.testing.assert_allclose(cap.main.scale, 8**-0.5)


def test_t5_bias_and_no_scaling(tiny_models):
    lm = explorer.load_model(tiny_models["t5"], device=DEVICE)
    cap = explorer.capture(lm, TEXT, target=TARGET)
    encoder, cross = cap.stacks["encoder"], cap.stacks["cross"]
    assert encoder.scale.tolist() == [1.0, 1.0]
    assert encoder.position_bias is not None and np.abs(encoder.position_bias).max() > 0
    # The bias is computed in layer 0 and reused by every later layer of the stack.
    np.testing.assert_array_equal(encoder.position_bias[0], encoder.position_bias[1])
    assert cross.query_tokens == cap.target_tokens and cross.key_tokens == cap.tokens
    assert cross.attentions.shape[2:] == (len(cap.target_tokens), len(cap.tokens))


def test_t5_without_target_captures_encoder_only(tiny_models):
    lm = explorer.load_model(tiny_models["t5"], device=DEVICE)
    assert set(explorer.capture(lm, TEXT).stacks) == {"encoder"}


def test_gemma2_sliding_window_and_softcap(tiny_models):
    lm = explorer.load_model(tiny_models["gemma2"], device=DEVICE)
    stack = explorer.capture(lm, TEXT).main
    assert stack.softcap is not None and stack.softcap.tolist() == [5.0, 5.0]
    assert stack.layer_mask is not None  # the sliding layer sees fewer keys than the full one
    assert stack.layer_mask[0].sum() < stack.layer_mask[1].sum()
    assert np.abs(np.where(stack.layer_mask[0], 0, stack.attentions[0])).max() == 0.0


def test_sentence_pair_segments(tiny_models):
    lm = explorer.load_model(tiny_models["bert"], device=DEVICE)
    cap = explorer.capture(lm, "time flies like an arrow", text_pair="fruit flies like a banana")
    assert cap.tokens[cap.segment_b_start] == "fruit"
    assert cap.tokens[cap.segment_b_start - 1] == "[SEP]"


def test_captured_model_stays_eager_equivalent_for_plain_calls(tiny):
    """Outside a capture the shared model computes exactly what eager computes, and records nothing."""
    name, lm, reference = tiny
    if name == "t5":
        pytest.skip("encoder-decoder logits are covered by the stack comparison")
    ids = on_device(_capture(name, lm).token_ids)[None]
    with torch.no_grad():
        ours = lm.model(ids).last_hidden_state if name == "bert" else lm.model(ids).logits
        theirs = reference(ids).last_hidden_state if name == "bert" else reference(ids).logits
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


def test_verify_on_the_device_equals_numpys_recomputation(tiny):
    """verify() (torch, on the capture's device) against the step-by-step page's NumPy float64 recomputation,
    head by head: equal to 1e-12 on every architecture (T5's position bias, Gemma 2's softcap and windows)."""
    from explorer.compute.attention import score_stages

    name, lm, _ = tiny
    for stack in _capture(name, lm).stacks.values():
        numpy_error = max(
            float(np.abs(score_stages(stack, layer, head)["weights"] - stack.attentions[layer, head]).max())
            for layer in range(stack.num_layers)
            for head in range(stack.num_heads)
        )
        assert abs(stack.verify() - numpy_error) <= 1e-12
        assert 0 < numpy_error <= stack.tolerance


def test_a_capture_says_where_and_in_what_it_ran(tiny):
    name, lm, _ = tiny
    cap = _capture(name, lm)
    assert torch.device(cap.device).type == torch.device(DEVICE).type
    assert cap.model_dtype == "float32" and cap.notes == () and cap.tolerance == 1e-4
    assert all(stack.device == cap.device and stack.model_dtype == "float32" for stack in cap.stacks.values())


def test_one_transfer_from_the_device_gives_the_same_arrays(tiny, monkeypatch):
    """The accelerator path (every tensor packed into one buffer, one copy to the host), taken here on the test
    device whatever it is, gives the arrays the layer-by-layer path gives, bit for bit."""
    from explorer.models import capture as capture_module
    from explorer.models import transfer

    name, lm, _ = tiny
    expected = _capture(name, lm)
    monkeypatch.setattr(capture_module, "to_host", transfer._one_transfer)
    packed = _capture(name, lm)
    np.testing.assert_array_equal(packed.hidden_states, expected.hidden_states)
    for stack_name, stack in expected.stacks.items():
        for field in ("attentions", "queries", "keys", "values", "position_bias", "mask", "layer_mask", "softcap"):
            ours, theirs = getattr(packed.stacks[stack_name], field), getattr(stack, field)
            assert (ours is None) == (theirs is None)
            if ours is not None:
                assert ours.dtype == theirs.dtype and ours.tobytes() == theirs.tobytes()


@pytest.mark.parametrize("name", ["llama", "t5"])
def test_a_bfloat16_model_is_captured_as_it_computed(tiny_models, name):
    """In bfloat16 the weights equal the bfloat16 eager model's own, the capture says it is reduced precision,
    and verify() stays within the dtype's tolerance."""
    lm = explorer.load_model(tiny_models[name], device=DEVICE, dtype="bfloat16")
    reference = eager_reference(name, tiny_models[name], dtype=torch.bfloat16)
    cap = _capture(name, lm)
    assert next(lm.model.parameters()).dtype == torch.bfloat16
    assert cap.model_dtype == "bfloat16" and all(s.model_dtype == "bfloat16" for s in cap.stacks.values())
    assert any("bfloat16" in note and "float32" in note for note in cap.notes)
    from explorer.data.attention import VERIFY_TOLERANCE

    assert cap.tolerance == VERIFY_TOLERANCE["bfloat16"] > VERIFY_TOLERANCE["float32"]
    for stack, weights in _reference_attentions(name, reference, lm, cap).items():
        np.testing.assert_array_equal(cap.stacks[stack].attentions, weights)
    assert 0 < cap.verify() <= cap.tolerance
    assert all(a.dtype == np.float32 for a in (cap.attentions, cap.queries, cap.keys, cap.hidden_states))


def test_device_map_auto_captures_what_a_plain_load_captures(tiny_models):
    plain = explorer.load_model(tiny_models["llama"], device=DEVICE)
    mapped = explorer.load_model(tiny_models["llama"], device_map="auto")
    ours, theirs = explorer.capture(mapped, TEXT), explorer.capture(plain, TEXT)
    if torch.device(mapped.device).type != torch.device(DEVICE).type:
        pytest.skip(f"accelerate placed the model on {mapped.device}, the test device is {DEVICE}")
    for field in ("attentions", "queries", "keys", "values"):
        np.testing.assert_array_equal(getattr(ours.main, field), getattr(theirs.main, field))
    np.testing.assert_array_equal(ours.hidden_states, theirs.hidden_states)
    assert ours.verify() == theirs.verify()
