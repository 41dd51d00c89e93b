"""Model anatomy, the tokenization table and embeddings, checked against the models themselves."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.compute.anatomy import (
    decoder_layer,
    encoder_layer,
    lecture_count,
    lecture_rows,
    memory_mb,
    shape_trail,
    stack_layer_against_textbook,
    textbook_layer,
)
from explorer.models.anatomy import model_anatomy, parameter_counts
from explorer.models.inputs import embeddings, tokenize
from tests.devices import DEVICE
from tests.tiny_models import TINY


@pytest.mark.parametrize("name", sorted(TINY))
def test_counts_by_kind_add_up_to_the_model(tiny_models, name):
    lm = explorer.load_model(tiny_models[name], device=DEVICE)
    anatomy = model_anatomy(lm)
    assert sum(anatomy.by_kind.values()) == anatomy.total_parameters == sum(p.numel() for p in lm.model.parameters())
    assert anatomy.layers == lm.num_layers and anatomy.heads == lm.num_heads
    assert anatomy.by_kind["attention"] > 0 and anatomy.by_kind["feed-forward"] > 0
    assert anatomy.by_kind["other"] < 0.05 * anatomy.total_parameters  # nearly everything is classified
    assert anatomy.modules[0].count == anatomy.total_parameters


def test_minilm_anatomy(minilm):
    anatomy = model_anatomy(minilm)
    assert (anatomy.width, anatomy.heads, anatomy.head_dim, anatomy.ffn_size) == (384, 12, 32, 1536)
    assert anatomy.norm_placement == "post" and anatomy.position_scheme == "learned absolute"
    assert anatomy.norm_kind == "LayerNorm" and anatomy.vocabulary == 30522
    layer = next(row.counts for row in anatomy.layer_counts if row.layer == 0)
    book = textbook_layer(384, 1536)
    assert {k: layer[k] for k in book} == book  # a BERT layer is exactly the textbook layer
    assert all(not block.terms for block in first_layers_against_textbook(anatomy)["main"])


def first_layers_against_textbook(anatomy) -> dict:
    """{stack: layer 0 of that stack against the textbook}, as the anatomy page sets them side by side."""
    return {row.stack: stack_layer_against_textbook(anatomy, row) for row in anatomy.layer_counts if row.layer == 0}


# Each architecture's first layer of each stack, as the model's own modules name its blocks: what the
# comparison's "this model" column must equal (sum of numel() of their parameters).
OWN_MODULES = {
    "bert": {
        "main": ("encoder.layer.0", {
            "attention": ["attention.self", "attention.output.dense"],
            "feed-forward": ["intermediate", "output.dense"],
            "norms": ["attention.output.LayerNorm", "output.LayerNorm"],
        })
    },
    "gpt2": {"main": ("transformer.h.0", {"attention": ["attn"], "feed-forward": ["mlp"], "norms": ["ln_1", "ln_2"]})},
    "llama": {
        "main": ("model.layers.0", {
            "attention": ["self_attn"],
            "feed-forward": ["mlp"],
            "norms": ["input_layernorm", "post_attention_layernorm"],
        })
    },
    "qwen3": {
        "main": ("model.layers.0", {
            "attention": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"],
            "feed-forward": ["mlp"],
            "norms": ["input_layernorm", "post_attention_layernorm", "self_attn.q_norm", "self_attn.k_norm"],
        })
    },
    "gemma2": {
        "main": ("model.layers.0", {
            "attention": ["self_attn"],
            "feed-forward": ["mlp"],
            "norms": ["input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                      "post_feedforward_layernorm"],
        })
    },
    "t5": {
        "main": ("encoder.block.0", {
            "attention": ["layer.0.SelfAttention"],
            "feed-forward": ["layer.1.DenseReluDense"],
            "norms": ["layer.0.layer_norm", "layer.1.layer_norm"],
        }),
        "decoder": ("decoder.block.0", {
            "attention": ["layer.0.SelfAttention", "layer.1.EncDecAttention"],
            "feed-forward": ["layer.2.DenseReluDense"],
            "norms": ["layer.0.layer_norm", "layer.1.layer_norm", "layer.2.layer_norm"],
        }),
    },
}  # fmt: skip
ARCHITECTURES = {name: name for name in OWN_MODULES}
ARCHITECTURES |= {"prose-llama": "llama", "prose-gpt2": "gpt2", "dates-t5": "t5", "minilm": "bert"}
BUNDLED = {
    "prose-llama": explorer.DEFAULT_DECODER,
    "prose-gpt2": explorer.PROSE_GPT2,
    "dates-t5": explorer.DEFAULT_SEQ2SEQ,
}


def _load(name: str, tiny_models, minilm):
    if name == "minilm":
        return minilm
    path = BUNDLED.get(name)
    return explorer.load_model(path or tiny_models[name], device=DEVICE)


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_each_first_layer_against_the_textbook_is_the_models_own_and_fully_explained(tiny_models, minilm, name):
    """Every stack's layer 0: each block's count is the numel() of the model's own modules for it, and the reasons
    given for a difference add up to it exactly, none of them "not recognised"."""
    lm = _load(name, tiny_models, minilm)
    anatomy = model_anatomy(lm)
    compared = first_layers_against_textbook(anatomy)
    own = OWN_MODULES[ARCHITECTURES[name]]
    assert set(compared) == set(own)
    for stack, (layer_path, blocks) in own.items():
        layer = lm.model.get_submodule(layer_path)
        assert [block.block for block in compared[stack]] == ["attention", "feed-forward", "norms"]
        assert sum(block.actual for block in compared[stack]) == sum(p.numel() for p in layer.parameters())
        for block in compared[stack]:
            modules = [layer.get_submodule(path) for path in blocks[block.block]]
            assert block.actual == sum(p.numel() for module in modules for p in module.parameters()), block
            assert block.textbook + sum(term.parameters for term in block.terms) == block.actual, block
            assert "not recognised here" not in [term.reason for term in block.terms], block


def test_the_date_converters_layers_say_what_differs(tiny_models):
    """dates-t5 (issue 27): the decoder layer is set against the textbook's decoder layer (cross-attention
    included), T5's missing biases and its relative position table are counted, and its norms are 3 × d."""
    lm = explorer.load_model(explorer.DEFAULT_SEQ2SEQ, device=DEVICE)
    anatomy = model_anatomy(lm)
    d, d_ff = anatomy.width, anatomy.ffn_size
    compared = first_layers_against_textbook(anatomy)
    attention, feed_forward, norms = compared["decoder"]
    assert attention.textbook == 2 * (4 * d * d + 4 * d)  # self- and cross-attention
    table = lm.model.decoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight.numel()
    assert {term.parameters for term in attention.terms} == {-2 * 4 * d, table}
    assert [term.parameters for term in feed_forward.terms] == [-(d_ff + d)]
    assert norms.actual == 3 * d and "3 × 128 values" in norms.terms[0].reason
    assert compared["main"][0].textbook == 4 * d * d + 4 * d and compared["main"][2].actual == 2 * d


def test_llama_differences_are_explained(tiny_models):
    anatomy = model_anatomy(explorer.load_model(tiny_models["llama"], device=DEVICE))
    reasons = " ".join(term.reason for block in first_layers_against_textbook(anatomy)["main"] for term in block.terms)
    assert anatomy.position_scheme == "rotary" and anatomy.norm_kind == "RMSNorm" and anatomy.kv_heads == 2
    assert "grouped-query attention: 4 query heads share 2 key/value heads" in reasons
    assert "gated feed-forward" in reasons and "RMSNorm has a scale and no bias" in reasons
    assert "no biases in Q, K, V and O" in reasons


def test_the_textbook_layers():
    assert textbook_layer(512, 2048) == {"attention": 4 * 512**2 + 4 * 512, "feed-forward": 2 * 512 * 2048 + 2048 + 512,
                                         "norms": 2 * 2 * 512}  # fmt: skip
    assert textbook_layer(512, 2048, cross=True)["attention"] == 2 * (4 * 512**2 + 4 * 512)
    assert textbook_layer(512, 2048, cross=True)["norms"] == 3 * 2 * 512


def test_t5_has_two_stacks_and_relative_bias(tiny_models):
    lm = explorer.load_model(tiny_models["t5"], device=DEVICE)
    rows = parameter_counts(lm.model)
    assert {row.stack for row in rows} == {"main", "decoder"}
    assert model_anatomy(lm).position_scheme == "relative bias"


def test_tokenization_table_of_a_sentence_pair(minilm):
    rows = tokenize(minilm, "time flies like an arrow", "fruit flies like a banana")
    assert [r.token for r in rows][:3] == ["[CLS]", "time", "flies"]
    assert rows[0].special and rows[0].start is None and rows[0].segment == "A"
    flies = rows[2]
    assert (flies.start, flies.end) == (5, 10) and flies.segment == "A"
    second = [r for r in rows if r.segment == "B"]
    assert second[0].token == "fruit" and (second[0].start, second[0].end) == (0, 5)
    ids = minilm.tokenizer("time flies like an arrow", "fruit flies like a banana")["input_ids"]
    assert [r.token_id for r in rows] == ids


def test_byte_level_tokens_show_their_leading_space():
    lm = explorer.load_model(explorer.DEFAULT_DECODER, device=DEVICE)
    rows = tokenize(lm, "It is a truth")
    assert [r.token for r in rows] == ["It", "␣is", "␣a", "␣truth"]


def test_embeddings_are_the_models_own_tables(minilm, tiny_models):
    ids = minilm.tokenizer("time flies")["input_ids"]
    found = embeddings(minilm, ids, positions=8)
    table = minilm.model.embeddings
    np.testing.assert_array_equal(found.token, table.word_embeddings.weight[ids].detach().cpu().numpy())
    np.testing.assert_array_equal(found.position, table.position_embeddings.weight[:8].detach().cpu().numpy())
    assert found.token_type.shape == (len(ids), 384) and found.inverse_frequency is None
    llama = explorer.load_model(tiny_models["llama"], device=DEVICE)
    rotary = embeddings(llama, [5, 6])
    assert rotary.position is None and rotary.position_scheme == "rotary"
    np.testing.assert_array_equal(rotary.inverse_frequency, llama.model.model.rotary_emb.inv_freq.cpu().numpy())
    with torch.no_grad():
        assert rotary.token.shape == (2, llama.model.config.hidden_size)


def test_the_lecture_count_of_a_gpt2_leaves_out_only_its_biases_and_final_norm(tiny_models):
    """GPT-2 is the lecture's layer exactly (d_ff = 4d, tied embeddings, a learned position table): its real count
    (torch's) is the formula, plus its biases, plus the final layer norm (2d) the formula does not have."""
    lm = explorer.load_model(tiny_models["gpt2"], device=DEVICE)
    anatomy = model_anatomy(lm)
    d, layers, vocabulary = 16, 2, lm.model.config.vocab_size
    assert (anatomy.width, anatomy.ffn_size, anatomy.position_rows) == (d, 4 * d, 64)
    # Per layer: c_attn 3d + attention c_proj d + mlp c_fc 4d + mlp c_proj d.
    assert anatomy.bias_parameters == layers * 9 * d
    count = lecture_count(
        d=d,
        d_ff=anatomy.ffn_size,
        layers=layers,
        vocabulary=vocabulary,
        positions=anatomy.position_rows,
        encoder_decoder=False,
        actual=sum(p.numel() for p in lm.model.parameters()),
        biases=anatomy.bias_parameters,
    )
    assert count.formula_total == (vocabulary + 64) * d + (12 * d * d + 4 * d) * layers
    assert count.other_difference == 2 * d  # ln_f
    rows = lecture_rows(count)
    assert rows[2]["parameters"] + rows[3]["parameters"] + rows[4]["parameters"] == rows[5]["parameters"]


def test_the_lecture_count_of_a_bert_encoder(minilm):
    anatomy = model_anatomy(minilm)
    d, d_ff, layers = 384, 1536, 6
    # Per layer: Q, K, V, O 4d + intermediate d_ff + output d; and the pooler's d.
    assert anatomy.bias_parameters == layers * (5 * d + d_ff) + d
    assert anatomy.position_rows == 512


def test_the_lectures_own_numbers():
    assert encoder_layer(512, 2048) == 12 * 512**2 + 4 * 512
    assert decoder_layer(512, 2048) == 16 * 512**2 + 6 * 512
    count = lecture_count(
        d=512, d_ff=2048, layers=6, vocabulary=32000, positions=512, encoder_decoder=True, actual=0, biases=0
    )
    assert count.per_layer == 28 * 512**2 + 10 * 512
    assert f"{memory_mb(61_000_000, 32):.1f}" == "232.7"  # "61 M parameters × 4 bytes = 232.7 MB"
    assert memory_mb(61_000_000, 8) == memory_mb(61_000_000, 32) / 4


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "t5"])
def test_the_summed_embeddings_are_what_the_first_layer_receives(tiny_models, name):
    """Token rows + position rows + token-type rows (+ the embedding norm) against the model's own
    output_hidden_states[0]; and the shape trail names the steps this model takes."""
    lm = explorer.load_model(tiny_models[name], device=DEVICE)
    ids = [row.token_id for row in tokenize(lm, "one two three four")]
    types = [0] * len(ids)
    found = embeddings(lm, ids, types)
    summed, norm = explorer.summed_embeddings(lm, found)
    np.testing.assert_allclose(summed, explorer.first_layer_input(lm, ids, types), atol=1e-6)
    anatomy = model_anatomy(lm)
    trail = shape_trail(
        tokens=len(ids),
        width=anatomy.width,
        vocabulary=anatomy.vocabulary,
        position_rows=anatomy.position_rows or None,
        token_types=found.token_type is not None,
        norm=norm,
        position_scheme=found.position_scheme,
    )
    steps = [row["step"] for row in trail]
    assert steps[0] == "token ids" and steps[-1] == "→ layer 1's input"
    assert trail[0]["shape"] == f"[{len(ids)}]" and trail[-1]["shape"] == f"[{len(ids)}, {anatomy.width}]"
    assert ("+ position embeddings" in steps) == (name in ("bert", "gpt2"))
    assert ("LayerNorm" in steps) == (name == "bert")
    assert ("+ token type embeddings" in steps) == (name == "bert")


def test_minilms_embeddings_sum_to_its_first_layer_input(minilm):
    rows = tokenize(minilm, "time flies like an arrow", "fruit flies like a banana")
    ids, types = [row.token_id for row in rows], [int(row.segment == "B") for row in rows]
    assert 0 < sum(types) < len(types)
    summed, norm = explorer.summed_embeddings(minilm, embeddings(minilm, ids, types))
    assert norm == "embeddings.LayerNorm"
    np.testing.assert_allclose(summed, explorer.first_layer_input(minilm, ids, types), atol=1e-5)
