"""Capture equals the model's own eager attention, and q/k recompute it, on every architecture."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from tests.devices import DEVICE
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
    ids = torch.tensor(cap.token_ids, device=DEVICE)[None]
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
    return {stack: torch.stack([a[0] for a in layers]).cpu().numpy() for stack, layers in stacks.items()}


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
            lm.model(torch.tensor(cap.token_ids, device=DEVICE)[None], use_cache=False)
    finally:
        handle.remove()
    hidden = seen["hidden_states"]
    head_dim = attn.head_dim
    q = attn.q_proj(hidden).view(1, -1, lm.num_heads, head_dim).transpose(1, 2)
    k = attn.k_proj(hidden).view(1, -1, lm.model.config.num_key_value_heads, head_dim).transpose(1, 2)
    cos, sin = seen["position_embeddings"]
    q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
    np.testing.assert_allclose(cap.queries[1], q_rot[0].detach().cpu().numpy(), atol=1e-6)
    np.testing.assert_allclose(
        cap.keys[1], k_rot[0, cap.main.kv_head_of_query.tolist()].detach().cpu().numpy(), atol=1e-6
    )
    # Before RoPE the vectors differ: a capture of q_proj outputs would be wrong.
    assert np.abs(cap.keys[1, 0] - k[0, 0].detach().cpu().numpy()).max() > 1e-3


def test_gpt2_queries_are_the_fused_projection_split(tiny_models):
    lm = explorer.load_model(tiny_models["gpt2"], device=DEVICE)
    cap = explorer.capture(lm, TEXT)
    seen = {}
    block = lm.model.transformer.h[0]
    handle = block.attn.c_attn.register_forward_hook(lambda m, args, out: seen.update(out=out))
    try:
        with torch.no_grad():
            lm.model(torch.tensor(cap.token_ids, device=DEVICE)[None], use_cache=False)
    finally:
        handle.remove()
    q, k, _ = seen["out"][0].split(16, dim=-1)
    np.testing.assert_allclose(cap.queries[0], q.view(-1, 2, 8).transpose(0, 1).cpu().numpy(), atol=1e-6)
    np.testing.assert_allclose(cap.keys[0], k.view(-1, 2, 8).transpose(0, 1).cpu().numpy(), atol=1e-6)
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
    ids = torch.tensor(_capture(name, lm).token_ids, device=DEVICE)[None]
    with torch.no_grad():
        ours = lm.model(ids).last_hidden_state if name == "bert" else lm.model(ids).logits
        theirs = reference(ids).last_hidden_state if name == "bert" else reference(ids).logits
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
