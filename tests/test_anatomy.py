"""Model anatomy, the tokenization table and embeddings, checked against the models themselves."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.compute.anatomy import decoder_layer, encoder_layer, lecture_count, lecture_rows, memory_mb, shape_trail
from explorer.models.anatomy import explain_layer, model_anatomy, parameter_counts, textbook_layer
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
    assert explain_layer(anatomy) == ["Exactly the textbook layer."]


def test_llama_differences_are_explained(tiny_models):
    lm = explorer.load_model(tiny_models["llama"], device=DEVICE)
    anatomy = model_anatomy(lm)
    notes = " ".join(explain_layer(anatomy))
    assert anatomy.position_scheme == "rotary" and anatomy.norm_kind == "RMSNorm" and anatomy.kv_heads == 2
    assert "Grouped-query" in notes and "gated feed-forward" in notes and "without a bias" in notes
    assert "No biases in the attention" in notes


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
