"""Model anatomy, the tokenization table and embeddings, checked against the models themselves."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.models.anatomy import explain_layer, model_anatomy, parameter_counts, textbook_layer
from explorer.models.inputs import embeddings, tokenize
from tests.tiny_models import TINY


@pytest.mark.parametrize("name", sorted(TINY))
def test_counts_by_kind_add_up_to_the_model(tiny_models, name):
    lm = explorer.load_model(tiny_models[name], device="cpu")
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
    lm = explorer.load_model(tiny_models["llama"], device="cpu")
    anatomy = model_anatomy(lm)
    notes = " ".join(explain_layer(anatomy))
    assert anatomy.position_scheme == "rotary" and anatomy.norm_kind == "RMSNorm" and anatomy.kv_heads == 2
    assert "Grouped-query" in notes and "gated feed-forward" in notes and "without a bias" in notes
    assert "No biases in the attention" in notes


def test_t5_has_two_stacks_and_relative_bias(tiny_models):
    lm = explorer.load_model(tiny_models["t5"], device="cpu")
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
    lm = explorer.load_model(explorer.DEFAULT_DECODER, device="cpu")
    rows = tokenize(lm, "It is a truth")
    assert [r.token for r in rows] == ["It", "␣is", "␣a", "␣truth"]


def test_embeddings_are_the_models_own_tables(minilm, tiny_models):
    ids = minilm.tokenizer("time flies")["input_ids"]
    found = embeddings(minilm, ids, positions=8)
    table = minilm.model.embeddings
    np.testing.assert_array_equal(found.token, table.word_embeddings.weight[ids].detach().numpy())
    np.testing.assert_array_equal(found.position, table.position_embeddings.weight[:8].detach().numpy())
    assert found.token_type.shape == (len(ids), 384) and found.inverse_frequency is None
    llama = explorer.load_model(tiny_models["llama"], device="cpu")
    rotary = embeddings(llama, [5, 6])
    assert rotary.position is None and rotary.position_scheme == "rotary"
    np.testing.assert_array_equal(rotary.inverse_frequency, llama.model.model.rotary_emb.inv_freq.numpy())
    with torch.no_grad():
        assert rotary.token.shape == (2, llama.model.config.hidden_size)
