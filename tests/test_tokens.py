"""Token labels stay readable: byte-level BPE spaces, split characters, newlines, WordPiece pieces. The input vectors
of every family add up to what its first layer receives."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import transformers
from tokenizers import ByteLevelBPETokenizer
from transformers import PreTrainedTokenizerFast

from explorer.compute.anatomy import shape_trail
from explorer.models.architectures import AUTO_CLASS_OF_KIND, infer_kind
from explorer.models.inputs import embedding_stack, embeddings, first_layer_input, summed_embeddings, tokenize
from explorer.models.tokens import token_labels
from tests.devices import DEVICE
from tests.tiny_models import IDS, word_tokenizer


def _byte_level_tokenizer() -> PreTrainedTokenizerFast:
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["time flies like an arrow; fruit flies like a banana"] * 20, vocab_size=300)
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer)


def test_byte_level_bpe_labels_are_the_text_they_stand_for():
    tokenizer = _byte_level_tokenizer()
    ids = tokenizer("time flies\nlike")["input_ids"]
    labels = token_labels(tokenizer, ids)
    assert "".join(labels).replace("↵", "\n") == "time flies\nlike"
    assert " flies" in labels and "Ġflies" not in labels
    assert "↵" in labels  # a bare newline is made visible


def test_split_multibyte_character_keeps_raw_pieces():
    tokenizer = _byte_level_tokenizer()
    ids = tokenizer("🙂")["input_ids"]  # unseen: one token per UTF-8 byte
    labels = token_labels(tokenizer, ids)
    assert len(labels) == 4
    assert all("\ufffd" not in label for label in labels)


def test_repeated_tokens_keep_identical_labels(minilm):
    """Positions, not labels, identify tokens: the views use indices, so repeats stay distinct."""
    labels = token_labels(minilm.tokenizer, minilm.tokenizer("the cat saw the cat")["input_ids"])
    assert labels == ("[CLS]", "the", "cat", "saw", "the", "cat", "[SEP]")


def test_wordpiece_continuations_keep_their_marker(minilm):
    labels = token_labels(minilm.tokenizer, minilm.tokenizer("tokenization")["input_ids"])
    assert any(label.startswith("##") for label in labels)


# --- Input vectors on every family: token rows (+ projection) + position rows (+ offset) + types (+ norm, projection)
# against what the first layer receives (output_hidden_states[0], and a pre-hook on the first layer itself).

_SMALL = dict(num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
_BART = dict(
    d_model=16,
    encoder_layers=1,
    decoder_layers=1,
    encoder_attention_heads=2,
    decoder_attention_heads=2,
    encoder_ffn_dim=32,
    decoder_ffn_dim=32,
    max_position_embeddings=64,
    decoder_start_token_id=2,
)
_T5 = dict(d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=2, decoder_start_token_id=0)
_EMBEDDINGS_CONFIGS = {  # family -> (config, the table row position 0 reads)
    "albert": (lambda: transformers.AlbertConfig(embedding_size=8, hidden_size=16, **_SMALL, **IDS), 0),
    "electra": (lambda: transformers.ElectraConfig(embedding_size=8, hidden_size=16, **_SMALL, **IDS), 0),
    "mobilebert": (
        lambda: transformers.MobileBertConfig(
            embedding_size=8, hidden_size=16, intra_bottleneck_size=16, true_hidden_size=16, **_SMALL, **IDS
        ),
        0,
    ),
    "opt": (
        lambda: transformers.OPTConfig(  # OPT-350m's shape: 512-wide embeddings projected into 1024-wide layers
            hidden_size=16, word_embed_proj_dim=8, ffn_dim=32, do_layer_norm_before=False, **_SMALL, **IDS
        ),
        2,
    ),
    "biogpt": (lambda: transformers.BioGptConfig(hidden_size=16, **_SMALL, **IDS), 2),
    "bart": (lambda: transformers.BartConfig(**_BART, **IDS), 2),
    "mbart": (lambda: transformers.MBartConfig(**_BART, **IDS), 2),
    "plbart": (lambda: transformers.PLBartConfig(**_BART, scale_embedding=True, **IDS), 2),
    "roberta": (lambda: transformers.RobertaConfig(hidden_size=16, **_SMALL, **IDS | {"pad_token_id": 1}), 2),
    "bert": (lambda: transformers.BertConfig(hidden_size=16, **_SMALL, **IDS), 0),
    "gpt2": (lambda: transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, n_positions=64, **IDS), 0),
    "t5": (lambda: transformers.T5Config(**_T5, **IDS), 0),
    "longt5": (lambda: transformers.LongT5Config(**_T5, local_radius=2, **IDS), 0),
    "gpt_oss": (
        lambda: transformers.GptOssConfig(
            hidden_size=16,
            head_dim=8,
            num_key_value_heads=1,
            num_local_experts=2,
            num_experts_per_tok=1,
            **_SMALL,
            **IDS,
        ),
        0,
    ),
}


def _tiny_lm(family: str, **overrides):
    """A tiny random ``family`` model in memory, with what the input functions read of a loaded model."""
    config = _EMBEDDINGS_CONFIGS[family][0]()
    for name, value in overrides.items():
        setattr(config, name, value)
    kind = infer_kind(config)
    torch.manual_seed(0)
    model = AUTO_CLASS_OF_KIND[kind].from_config(config, attn_implementation="eager").to(DEVICE).eval()
    return _as_loaded(model, word_tokenizer(), kind)


def _as_loaded(model, tokenizer, kind: str):
    """What the input functions read of a loaded model."""
    layers = model.config.get_text_config().num_hidden_layers
    return SimpleNamespace(model=model, tokenizer=tokenizer, kind=kind, device=DEVICE, max_tokens=64, num_layers=layers)


def _first_layer_hooked(lm, ids) -> np.ndarray:
    """The input of the first layer the forward runs, seen by a pre-hook on it (the first block of the embedding
    stack's first ModuleList)."""
    stack = embedding_stack(lm)
    first = next(m for m in stack.modules() if isinstance(m, torch.nn.ModuleList))[0]
    seen = []
    hook = first.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(args[0] if args else kwargs["hidden_states"]), with_kwargs=True
    )
    try:
        with torch.inference_mode():
            stack(input_ids=torch.tensor([ids], device=DEVICE))
    finally:
        hook.remove()
    return seen[0].squeeze().float().cpu().numpy()  # without the batch axis, wherever the model keeps it


@pytest.mark.parametrize("family", sorted(_EMBEDDINGS_CONFIGS))
def test_input_vectors_are_what_the_first_layer_receives(family):
    lm = _tiny_lm(family)
    ids = [row.token_id for row in tokenize(lm, "time flies like an arrow")]
    types = [0] * len(ids)
    found = embeddings(lm, ids, types, positions=32)
    summed, _ = summed_embeddings(lm, found)
    first_layer = first_layer_input(lm, ids, types)
    np.testing.assert_allclose(first_layer, _first_layer_hooked(lm, ids), atol=1e-6)
    assert found.note is None and found.trigram == (family == "mobilebert")  # MobileBERT reads neighbours too
    np.testing.assert_allclose(summed, first_layer, atol=1e-5)
    assert found.position_offset == _EMBEDDINGS_CONFIGS[family][1]
    assert found.token_scale == (4.0 if family in ("biogpt", "plbart") else 1.0)  # √16: scale_embedding=True


@pytest.mark.parametrize(
    ("family", "before", "after"),
    [
        ("opt", "projection", "+ position embeddings"),
        ("albert", "LayerNorm", "projection"),
        ("mobilebert", "+ neighbours", "projection"),
    ],
)
def test_the_shape_trail_names_each_projection_where_the_model_applies_it(family, before, after):
    lm = _tiny_lm(family)
    ids = [row.token_id for row in tokenize(lm, "the cat")]
    found = embeddings(lm, ids, [0] * len(ids))
    _, norm = summed_embeddings(lm, found)
    trail = shape_trail(
        tokens=len(ids),
        width=found.token.shape[1],
        vocabulary=40,
        position_rows=64,
        token_types=found.token_type is not None,
        norm=norm,
        position_scheme=found.position_scheme,
        position_offset=found.position_offset,
        token_projection=found.token_projection,
        projection=found.projection,
        hidden=16,
        trigram=found.trigram,
    )
    steps = [row["step"] for row in trail]
    assert steps.index(before) + 1 == steps.index(after)
    assert trail[1]["shape"] == f"[{len(ids)}, 8]" and trail[-1]["shape"] == f"[{len(ids)}, 16]"


# Families whose first layer does not receive what their hidden states report, or not as one row per token, and
# what the page must then say (None: the sum is what the first layer receives, checked; "": no note, the page
# gives the difference).
FIRST_LAYERS = {
    "mamba": None,  # its hidden states start after its first layer
    "neomme": None,  # a factorized table and a norm without weights, found in the module graph
    "fsmt": None,  # an encoder without get_input_embeddings, which scales the table's rows itself
    "ibert": None,  # tables and a norm that return (rows, scale)
    "pegasus_x": "",  # padded after the text to a multiple of its block; sinusoidal positions from a module
    "cpmant": "rows of its own",  # its prompt's rows before the text's
}  # several vectors per token (DeepSeek-V4's copies, Gemma 3n's AltUp): test_the_sum_is_put_in_the_first_layers_shape


@pytest.mark.parametrize("family", sorted(FIRST_LAYERS))
def test_the_first_layers_input_is_what_a_hook_on_it_sees(family):
    from explorer import gateway
    from tests.families import FAMILIES, build

    model, tokenizer = build(family)
    lm = _as_loaded(model.to(DEVICE), tokenizer, FAMILIES[family].kind)
    vectors = gateway._input_vectors(lm, "the cat sat on the mat")
    ids = [row.token_id for row in vectors.rows]
    hooked = _first_layer_hooked(lm, ids)
    if len(hooked) > len(ids) and FIRST_LAYERS[family] != "rows of its own":
        hooked = hooked[: len(ids)]  # the block's padding after the text
    np.testing.assert_allclose(vectors.first_layer, hooked, atol=1e-6)
    note, expected = vectors.embeddings.note, FIRST_LAYERS[family]
    if expected is None:
        assert note is None
        np.testing.assert_allclose(vectors.summed, vectors.first_layer, atol=1e-5)
    elif expected:
        assert expected in note and vectors.largest_difference == float("inf")
    else:
        assert note is None and 0.5 < vectors.largest_difference < float("inf")


def test_a_latent_array_model_says_no_layer_receives_a_row_per_token(tmp_path):
    """Perceiver names its latent array as its input embeddings (a parameter, not a table): the page reads its token
    and position rows from the tables its text preprocessor looks the ids up in, shows all 12 latent rows its first
    layer receives for 8 tokens (none cut as padding), and says why no layer receives one row per token."""
    import explorer
    from explorer import gateway
    from tests.tiny_models import save_tiny_perceiver

    saved = save_tiny_perceiver(tmp_path, num_latents=12)
    lm = explorer.load_model(tmp_path, device=DEVICE)
    vectors = gateway._input_vectors(lm, "the cat sat on the mat")
    ids = torch.tensor([row.token_id for row in vectors.rows])
    preprocessor = saved.perceiver.input_preprocessor
    np.testing.assert_array_equal(vectors.embeddings.token, preprocessor.embeddings.weight[ids].detach().numpy())
    np.testing.assert_array_equal(
        vectors.embeddings.position[: len(ids)], preprocessor.position_embeddings.weight[: len(ids)].detach().numpy()
    )
    seen = []
    first = lm.model.perceiver.encoder.self_attends[0]
    hook = first.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(args[0] if args else kwargs["hidden_states"]), with_kwargs=True
    )
    try:
        with torch.inference_mode():
            lm.model(input_ids=ids[None].to(DEVICE))
    finally:
        hook.remove()
    assert len(ids) == 8 and vectors.first_layer.shape == (12, 16)
    np.testing.assert_allclose(vectors.first_layer, seen[0][0].float().cpu().numpy(), atol=1e-6)
    assert "run over 12 positions of its own (a latent array)" in vectors.embeddings.note


def test_the_sum_is_put_in_the_first_layers_shape():
    """A first layer that reads copies of each row gets the sum copied (hyper-connections, [token, stream, hidden]);
    one that reads the model's own maps of it (AltUp, [stream, token, hidden]) or rows of its own gets a note with
    how far off the sum is."""
    from explorer.compute.inputs import reconcile

    summed = np.arange(12, dtype=np.float32).reshape(3, 4)
    copied, note = reconcile(summed, np.repeat(summed[:, None], 2, axis=1))
    assert note is None and copied.shape == (3, 2, 4) and np.array_equal(copied[:, 1], summed)
    mapped = np.stack([summed, summed * 2, summed + 1])
    kept, note = reconcile(summed, mapped)
    assert kept is summed and "3 vectors per token" in note and "vector 1 is this sum" in note and "up to 11" in note
    _, note = reconcile(summed, np.concatenate([np.zeros((5, 4)), summed + 0.5]))
    assert "8 rows for the text's 3 tokens" in note and "5 rows of its own" in note and "by 0.5" in note


def test_a_model_whose_cache_cannot_count_its_tokens_shows_its_first_layers_input():
    """LFM3 built of convolution layers alone: a cache of them cannot say how many tokens it holds (transformers'
    get_seq_length raises), so the page's pass asks for none and shows what the first layer receives."""
    from explorer import gateway
    from tests.families import build

    model, tokenizer = build("lfm3", layer_types=["conv", "conv"])
    lm = _as_loaded(model.to(DEVICE), tokenizer, "decoder")
    vectors = gateway._input_vectors(lm, "the cat sat on the mat")
    seen = []
    hook = model.model.layers[0].register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    try:
        with torch.inference_mode():
            model(input_ids=torch.tensor([[row.token_id for row in vectors.rows]], device=DEVICE), use_cache=False)
    finally:
        hook.remove()
    np.testing.assert_allclose(vectors.first_layer, seen[0][0].float().cpu().numpy(), atol=1e-6)
    np.testing.assert_allclose(vectors.summed, vectors.first_layer, atol=1e-5)
