"""Values and hidden states: each equals an independent computation from the model's own weights or outputs."""

from __future__ import annotations

from pathlib import Path

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
    folder = tiny_models[request.param]
    return request.param, explorer.load_model(folder, device=DEVICE), eager_reference(request.param, folder)


def _capture(name, lm):
    return explorer.capture(lm, TEXT, target=TARGET if name == "t5" else None)


def test_hidden_states_equal_output_hidden_states(tiny):
    name, lm, reference = tiny
    cap = _capture(name, lm)
    ids = torch.tensor(cap.token_ids, device=DEVICE)[None]
    with torch.no_grad():
        if name == "t5":
            states = reference.get_encoder()(input_ids=ids, output_hidden_states=True).hidden_states
        else:
            states = reference(input_ids=ids, output_hidden_states=True).hidden_states
    expected = torch.stack([state[0] for state in states]).cpu().numpy()
    assert cap.hidden_states.shape == (lm.num_layers + 1, len(cap.tokens), expected.shape[-1])
    np.testing.assert_allclose(cap.hidden_states, expected, atol=1e-5)
    assert not cap.hidden_states.flags.writeable


def _values_by_projection(name, model, ids):
    """[layer, kv_head, token, head_dim] from each layer's own value projection, fed the layer's input."""
    with torch.no_grad():
        return _project_values(name, model, ids)


def _project_values(name, model, ids):
    states = model(input_ids=ids, output_hidden_states=True).hidden_states
    if name == "gpt2":
        blocks = model.transformer.h
        inputs = [block.ln_1(states[i]) for i, block in enumerate(blocks)]
        heads = model.config.n_head
        projected = [
            block.attn.c_attn(x).split(model.config.n_embd, dim=2)[2] for block, x in zip(blocks, inputs, strict=True)
        ]
    elif name == "bert":
        layers = model.encoder.layer
        projected = [layer.attention.self.value(states[i]) for i, layer in enumerate(layers)]
        heads = model.config.num_attention_heads
    else:  # llama, qwen3, gemma2: v_proj after the input norm
        layers = model.model.layers
        projected = [layer.self_attn.v_proj(layer.input_layernorm(states[i])) for i, layer in enumerate(layers)]
        heads = model.config.num_key_value_heads
    return [v[0].detach().reshape(v.shape[1], heads, -1).transpose(0, 1).cpu().numpy() for v in projected]


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "qwen3", "gemma2"])
def test_values_equal_an_independent_projection(tiny_models, name):
    lm = explorer.load_model(tiny_models[name], device=DEVICE)
    cap = explorer.capture(lm, TEXT)
    reference = eager_reference(name, Path(tiny_models[name]))
    by_layer = _values_by_projection(name, reference, torch.tensor(cap.token_ids, device=DEVICE)[None])
    stack = cap.main
    for layer, values in enumerate(by_layer):
        expected = values[stack.kv_head_of_query]  # each query head reads the value head it shares
        np.testing.assert_allclose(stack.values[layer], expected, atol=1e-5)


def test_t5_values_are_the_v_projection(tiny_models):
    lm = explorer.load_model(tiny_models["t5"], device=DEVICE)
    cap = explorer.capture(lm, TEXT)
    reference = eager_reference("t5", Path(tiny_models["t5"]))
    ids = torch.tensor(cap.token_ids, device=DEVICE)[None]
    with torch.no_grad():
        states = reference.get_encoder()(input_ids=ids, output_hidden_states=True).hidden_states
        for layer, block in enumerate(reference.encoder.block):
            normed = block.layer[0].layer_norm(states[layer])
            v = block.layer[0].SelfAttention.v(normed)[0]
            expected = v.reshape(v.shape[0], reference.config.num_heads, -1).transpose(0, 1).cpu().numpy()
            np.testing.assert_allclose(cap.main.values[layer], expected, atol=1e-5)


def test_load_model_accepts_a_path(tiny_models):
    lm = explorer.load_model(Path(tiny_models["gpt2"]), device=DEVICE)
    assert lm.kind == "decoder" and lm.name == tiny_models["gpt2"]
