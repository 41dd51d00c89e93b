"""verify() on the families whose attention has more than softmax(q·k): GPT-OSS's sinks and sliding windows; LongT5's
local encoder attention, returned in blocks, laid out as [query, key] maps; Granite SWA's sinks after the weights;
layers of different KV grouping (MiMo-V2-Flash) or head width (Gemma 4). Tiny random models, built here."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import (
    CONFIG_MAPPING,
    AutoModelForCausalLM,
    GptOssConfig,
    LongT5Config,
    LongT5ForConditionalGeneration,
)

import explorer
from explorer.compute.attention import score_stages
from explorer.views.attention import step_setting
from tests.devices import DEVICE
from tests.tiny_models import IDS, word_tokenizer

TEXT = "time flies like an arrow the cat sat on the mat"  # 11 tokens: past GPT-OSS's window of 3


# Two layers of four heads over two KV heads, 8 wide, a window of 3: the tiny models of this module.
_SMALL = dict(
    hidden_size=32,
    intermediate_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    max_position_embeddings=64,
    sliding_window=3,
    **IDS,
)


def _gpt_oss():
    return GptOssConfig(
        **_SMALL, num_local_experts=2, num_experts_per_tok=1, layer_types=["sliding_attention", "full_attention"]
    )


def _long_t5(attention: str):
    return LongT5Config(
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=2,
        relative_attention_num_buckets=8,
        local_radius=2,
        global_block_size=2,
        encoder_attention_type=attention,
        decoder_start_token_id=0,
        **IDS,
    )


def _saved(folder, model, eos: bool = False) -> str:
    model.save_pretrained(folder)
    word_tokenizer(eos=eos).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def gpt_oss(tmp_path_factory):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_gpt_oss(), attn_implementation="eager")
    with torch.no_grad():  # sinks large enough to take a visible share of each row (the init draws them near 0)
        for layer in model.model.layers:
            layer.self_attn.sinks.copy_(torch.linspace(-1.0, 2.0, 4))
    return explorer.load_model(_saved(tmp_path_factory.mktemp("gpt-oss"), model), device=DEVICE)


def test_gpt_oss_verifies_with_its_sinks_and_sliding_window(gpt_oss):
    """Its captured weights are eager's output_attentions (sinks and window included), and recomputing them from
    its queries and keys, each row's softmax beside the head's sink logit, gives them back."""
    capture = explorer.capture(gpt_oss, TEXT)
    stack = capture.main
    assert stack.sinks is not None and stack.sinks.shape == (2, 4, len(capture.tokens))
    sliding, full = stack.masks_by_layer()
    assert sliding[-1, -3:].all() and not sliding[-1, :-3].any() and full[-1].all()  # a window of 3 keys, then all
    assert stack.attentions.sum(axis=-1).max() < 0.99  # each sink takes a share of its row
    assert capture.verify() <= 1e-5
    for layer in range(2):
        np.testing.assert_allclose(score_stages(stack, layer, 3)["weights"], stack.attentions[layer, 3], atol=1e-6)
    said = step_setting(score_stages(stack, 1, 3), float(stack.scale[1]), 8, where=(5, "cat", 1, 3), kv_head=1)
    assert f"joins the softmax and takes {1 - stack.attentions[1, 3, 5].sum():.3f}" in said  # the page says so
    ids = gpt_oss.tokenizer(TEXT, return_tensors="pt")["input_ids"].to(gpt_oss.device)
    gpt_oss.model.set_attn_implementation("eager")
    try:
        with torch.inference_mode():
            eager = gpt_oss.model(ids, output_attentions=True).attentions
    finally:
        gpt_oss.model.set_attn_implementation(explorer.models.recorder.ATTN_IMPLEMENTATION)
    for layer, weights in enumerate(eager):
        np.testing.assert_allclose(stack.attentions[layer], weights[0].float().cpu().numpy(), atol=1e-6)


def _long_t5_lm(folder, attention: str):
    torch.manual_seed(0)
    return explorer.load_model(
        _saved(folder, LongT5ForConditionalGeneration(_long_t5(attention)), eos=True), device=DEVICE
    )


def _own_local_output(lm, layer: int):
    """(what LongT5's local attention module of ``layer`` returns, its input) on TEXT: the reference."""
    module = lm.model.encoder.block[layer].layer[0].LocalSelfAttention
    seen = {}
    hook = module.register_forward_hook(
        lambda m, args, kwargs, out: seen.update(x=kwargs.get("hidden_states", args[0] if args else None), out=out[0]),
        with_kwargs=True,
    )
    try:
        with torch.inference_mode():
            lm.model.get_encoder()(**lm.tokenizer(TEXT, return_tensors="pt").to(lm.device))
    finally:
        hook.remove()
    return module, seen["x"][0], seen["out"][0]


def test_long_t5_local_encoder_attention_is_captured_as_query_key_maps(tmp_path):
    """Its blocked output_attentions placed at their keys: the module's own output is o(weights @ values) with
    them, each row sums to 1, and verify() claims nothing (weights only: no queries or keys to recompute from)."""
    lm = _long_t5_lm(tmp_path, "local")
    capture = explorer.capture(lm, TEXT)
    encoder = capture.stacks["encoder"]
    n = len(capture.tokens)
    assert encoder.attentions.shape == (2, 2, n, n) and encoder.weights_only
    np.testing.assert_allclose(encoder.attentions.sum(axis=-1), 1.0, atol=1e-6)
    assert not encoder.attentions[0, 0, 0, 3:].any()  # local_radius 2: the first query sees keys 0-2 only
    for layer in range(2):
        module, x, out = _own_local_output(lm, layer)
        with torch.inference_mode():
            values = module.v(x).view(n, 2, 8).transpose(0, 1)  # [head, key, head_dim]
            mixed = torch.tensor(np.array(encoder.attentions[layer]), device=x.device) @ values
            again = module.o(mixed.transpose(0, 1).reshape(n, 16))
        torch.testing.assert_close(again, out, atol=1e-6, rtol=0)
    assert np.isnan(capture.verify()) and any("queries and keys are not available" in n for n in capture.notes)


def test_long_t5_transient_global_attention_is_named_not_drawn(tmp_path):
    lm = _long_t5_lm(tmp_path, "transient-global")
    with pytest.raises(explorer.InputError, match=r"transient-global: .* to 6 summaries of token blocks"):
        explorer.capture(lm, TEXT, target="the cat")


# -- issue 40: sinks after the weights, layers that group or size their heads differently ---------------------------


def _tiny(model_type: str, **settings):
    torch.manual_seed(0)
    config = CONFIG_MAPPING[model_type](**_SMALL, **settings)
    return AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()


def _with_sinks(model):
    """Sinks large enough to take a visible share of each row, in the layers that have them."""
    with torch.no_grad():
        for layer in model.model.layers:
            if getattr(layer.self_attn, "sinks", None) is not None:
                layer.self_attn.sinks.copy_(torch.linspace(-1.0, 2.0, 4))
    return model


def _captured_as_eager(lm):
    """The capture of TEXT, its weights checked against the model's own eager output_attentions."""
    capture = explorer.capture(lm, TEXT)
    ids = lm.tokenizer(TEXT, return_tensors="pt")["input_ids"].to(lm.device)
    lm.model.set_attn_implementation("eager")
    try:
        with torch.inference_mode():
            eager = lm.model(ids, output_attentions=True, use_cache=False).attentions
    finally:
        lm.model.set_attn_implementation(explorer.models.recorder.ATTN_IMPLEMENTATION)
    for layer, weights in enumerate(eager):
        np.testing.assert_allclose(capture.main.attentions[layer], weights[0].float().cpu().numpy(), atol=1e-6)
    return capture


def test_granite_swa_sinks_act_after_the_weights_it_returns(tmp_path):
    """Granite SWA returns a plain softmax and scales each head's output by sigmoid(lse - sink) after it: its weights
    are recomputed without the sinks (with them, verify() was 0.5 off), and the capture says so."""
    model = _with_sinks(_tiny("granite_swa", layer_types=["sliding_attention", "full_attention"]))
    capture = _captured_as_eager(explorer.load_model(_saved(tmp_path, model), device=DEVICE))
    np.testing.assert_allclose(capture.main.attentions.sum(axis=-1), 1.0, atol=1e-5)  # no share taken by a sink
    assert capture.main.sinks is None and capture.verify() <= 1e-5
    assert any("sigmoid(logsumexp(scores) - sink)" in note for note in capture.notes)


def test_layers_that_group_kv_heads_differently_verify_each_by_its_own(tmp_path):
    """MiMo-V2-Flash's sliding layer has twice the KV heads of its full one (and sinks, and values wider than its
    keys): each layer's keys are paired with its query heads by its own grouping (by the first layer's, verify()
    was 0.01 off)."""
    model = _tiny(
        "mimo_v2_flash",
        v_head_dim=16,
        n_routed_experts=2,
        moe_intermediate_size=16,
        num_experts_per_tok=1,
        mlp_layer_types=["dense", "dense"],
        layer_types=["full_attention", "sliding_attention"],
    )
    capture = _captured_as_eager(explorer.load_model(_saved(tmp_path, _with_sinks(model)), device=DEVICE))
    stack = capture.main
    assert stack.kv_head_of(0).tolist() == [0, 0, 1, 1] and stack.kv_head_of(1).tolist() == [0, 1, 2, 3]
    assert np.isinf(stack.sinks[0]).all() and np.isfinite(stack.sinks[1]).all()
    assert stack.head_dims is None and stack.values.shape[-1] == 16
    assert capture.verify() <= 1e-5


def test_layers_of_different_head_widths_are_padded_and_verify(tmp_path):
    """Gemma 4's global layers have wider heads than its sliding ones (16 and 8 here; 512 and 256 in its checkpoints)
    and one KV head used as keys and values: the capture (which crashed) pads the narrower layer's vectors with
    zeros, which add nothing to q . k, keeps each layer's width, and verify() recomputes every layer."""
    model = _tiny(
        "gemma4_text",
        global_head_dim=16,
        num_global_key_value_heads=1,
        attention_k_eq_v=True,
        vocab_size_per_layer_input=IDS["vocab_size"],
        hidden_size_per_layer_input=8,
        layer_types=["sliding_attention", "full_attention"],
    )
    capture = _captured_as_eager(explorer.load_model(_saved(tmp_path, model), device=DEVICE))
    stack = capture.main
    assert stack.head_dims.tolist() == [8, 16] and stack.queries.shape[-1] == 16
    assert not stack.queries[0, ..., 8:].any() and not stack.keys[0, ..., 8:].any()  # the padding
    assert [vector.shape[-1] for vector in stack.head_vectors(0, 3)] == [8, 8, 8]
    assert [vector.shape[-1] for vector in stack.head_vectors(1, 3)] == [16, 16, 16]
    assert stack.kv_head_of(0).tolist() == [0, 0, 1, 1] and stack.kv_head_of(1).tolist() == [0, 0, 0, 0]
    assert capture.verify() <= 1e-5
    for layer in range(2):
        np.testing.assert_allclose(score_stages(stack, layer, 3)["weights"], stack.attentions[layer, 3], atol=1e-6)
