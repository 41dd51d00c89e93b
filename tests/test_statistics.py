"""Head statistics, view transforms, rollout, step-by-step scores and position signals: checked by hand and
against the model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import explorer
from explorer.compute.attention import head_outputs, score_stages, toy_stages
from explorer.compute.positions import (
    find_token,
    layerwise_cosine,
    rotary_angles,
    rotary_frequencies,
    shown_pairs,
    sinusoidal_encoding,
)
from explorer.compute.statistics import (
    GREYED_COLUMN,
    NEGLIGIBLE_MASS,
    entropy,
    head_statistics,
    kept_mass,
    max_weight,
    mean_distance,
    previous_token_score,
    rollout,
    share_on,
    without_tokens,
)
from explorer.views.attention import StatisticsHead, greyed_rows_caption, greyed_table_caption
from tests.devices import DEVICE

# One layer, two heads over three tokens, written out by hand.
W = np.array(
    [
        [
            [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]],  # head 0: previous token (row 0 itself)
            [[1 / 3, 1 / 3, 1 / 3], [1 / 3, 1 / 3, 1 / 3], [1 / 3, 1 / 3, 1 / 3]],  # head 1: uniform
        ]
    ]
)


def test_statistics_by_hand():
    assert entropy(W)[0].tolist() == pytest.approx([0.0, np.log(3)])  # nats, as every entropy the app shows
    assert mean_distance(W)[0, 0] == pytest.approx((0 + 1 + 1) / 3)
    assert mean_distance(W)[0, 1] == pytest.approx(((0 + 1 + 2) + (1 + 0 + 1) + (2 + 1 + 0)) / 9)
    assert share_on(W, [0])[0].tolist() == pytest.approx([2 / 3, 1 / 3])
    assert previous_token_score(W)[0].tolist() == pytest.approx([1.0, 1 / 3])
    assert max_weight(W)[0].tolist() == pytest.approx([1.0, 1 / 3])
    rows = head_statistics(W, special_positions=[2])
    assert [(r["layer"], r["head"]) for r in rows] == [(0, 0), (0, 1)]
    assert rows[1]["special-token share"] == pytest.approx(1 / 3)


def test_hiding_tokens_renormalises_rows():
    kept_weights, kept = without_tokens(W, [0])
    assert kept.tolist() == [1, 2]
    np.testing.assert_allclose(kept_weights[0, 1], [[0.5, 0.5]] * 3)
    np.testing.assert_allclose(kept_weights[0, 0, 0], [0.0, 0.0])  # all its weight was on the hidden token


def test_the_weight_a_row_keeps_and_the_rows_renormalised_from_almost_nothing_by_hand():
    mass = kept_mass(W, [0])
    np.testing.assert_allclose(mass[0], [[0.0, 0.0, 1.0], [2 / 3] * 3])  # head 0's first two rows: all on token 0
    renormalised, kept = without_tokens(W, [0])
    rows = head_statistics(renormalised, [0], key_positions=kept, kept=mass)
    assert [row[GREYED_COLUMN] for row in rows] == [2, 0] and GREYED_COLUMN == "rows keeping < 1%"
    assert greyed_rows_caption(mass[0, 0], NEGLIGIBLE_MASS).startswith("2 of 3 rows keep less than 1% of their")
    assert greyed_rows_caption(mass[0, 1], NEGLIGIBLE_MASS).startswith("Every row keeps at least 1% of its weight")
    assert greyed_table_caption(rows, 3).startswith("2 of the 6 rows of all 2 heads keep less than 1%")


def special_positions(lm, stack) -> tuple[int, ...]:
    """The key positions the head statistics page hides: the tokenizer's special tokens."""
    specials = set(lm.tokenizer.all_special_tokens)
    return tuple(i for i, token in enumerate(stack.key_tokens) if token in specials)


@pytest.fixture(scope="module")
def bundled(_minilm_loads):
    return {
        "minilm": _minilm_loads(DEVICE),
        "prose": explorer.load_model(explorer.DEFAULT_DECODER, device=DEVICE),
        "dates": explorer.load_model(explorer.DEFAULT_SEQ2SEQ, device=DEVICE),
    }


# The page's default text, then others per bundled model (the bundled decoder adds no special token of its own: its
# texts carry one as typed).
HIDDEN_CASES = [
    ("minilm", "time flies like an arrow", {}),
    ("minilm", "The cat sat on the mat because it was tired.", {}),
    ("minilm", "time flies like an arrow", {"text_pair": "fruit flies like a banana"}),
    ("prose", "<|endoftext|>It is a truth universally acknowledged, that a single man", {}),
    ("dates", "Thursday, March 5, 2021", {"target": "2021-03-05"}),
    ("dates", "the 13th of July 1914", {"target": "1914-07-13"}),
]


@pytest.mark.parametrize(("model", "text", "options"), HIDDEN_CASES)
def test_rows_left_with_a_negligible_share_are_greyed_and_counted_in_the_caption(bundled, model, text, options):
    """Every head of every stack: a row is greyed in the figure exactly when the weight the model's own attention
    put on the tokens left shown is below 1%, and the caption's count is that number of rows."""
    lm = bundled[model]
    capture = explorer.capture(lm, text, **options)
    said = {"greyed": 0, "none": 0}
    for name, stack in capture.stacks.items():
        hidden = special_positions(lm, stack)
        if not hidden:
            continue
        shown_keys = [k for k in range(len(stack.key_tokens)) if k not in hidden]
        allowed = stack.masks_by_layer()
        for layer in range(stack.num_layers):
            weights = np.where(allowed[layer], stack.attentions[layer], 0.0).astype(np.float64)
            reference = weights[..., shown_keys].sum(axis=-1)  # [head, query]
            for head in range(stack.num_heads):
                view = StatisticsHead(lm.name, text, stack=name, layer=layer, head=head, hidden=hidden, **options)
                greyed = reference[head] < 0.01
                caption = view.caption(capture)
                if greyed.any():
                    rows = f"{greyed.sum()} of {len(greyed)} rows keep" if greyed.sum() > 1 else "1 of"
                    assert caption.startswith(rows), caption
                    said["greyed"] += 1
                else:
                    assert caption.startswith("Every row keeps at least 1%"), caption
                    said["none"] += 1
                most = int(np.argmax((reference < 0.01).sum(axis=-1)))
                if head not in {0, most} or (head == 0 and layer):  # drawn: layer 0's head 0, the most greyed
                    continue
                figure = view.figure(capture)()
                drawn = np.asarray(figure.data[0].z, dtype=np.float64)
                np.testing.assert_array_equal(np.isnan(drawn[greyed]), True)  # no weight drawn in a greyed row
                drawable = allowed[layer][:, shown_keys].any(axis=1)
                np.testing.assert_array_equal(np.isnan(drawn).all(axis=1) & drawable, greyed & drawable)
                assert (len(figure.data) == 2) == bool(greyed.any())
                if greyed.any():
                    band = np.asarray(figure.data[1].z, dtype=np.float64)
                    np.testing.assert_array_equal(~np.isnan(band).all(axis=1), greyed)
    assert said["greyed"] + said["none"] > 0
    if (model, options) == ("minilm", {}) and text == HIDDEN_CASES[0][1]:
        assert said["greyed"] and said["none"]  # the default input shows both sentences


def test_rollout_by_hand():
    result = rollout(np.concatenate([W, W]))  # two identical layers
    mean = W[0].mean(axis=0)
    step = 0.5 * np.eye(3) + 0.5 * mean
    step /= step.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(result[0], step)
    np.testing.assert_allclose(result[1], step @ step)
    np.testing.assert_allclose(result[-1].sum(axis=-1), 1.0)


def test_score_stages_end_in_the_captured_weights(tiny_models):
    for name in ("gpt2", "gemma2", "t5"):
        lm = explorer.load_model(tiny_models[name], device=DEVICE)
        stack = explorer.capture(lm, "the cat sat on the mat").main
        for layer in range(stack.num_layers):
            stages = score_stages(stack, layer, 1)
            np.testing.assert_allclose(stages["weights"], stack.attentions[layer, 1], atol=1e-6)
            assert np.isneginf(stages["masked"][~stack.masks_by_layer()[layer]]).all()
        if name == "t5":
            assert "biased" in stages and float(stack.scale[0]) == 1.0
        if name == "gemma2":
            assert "capped" in stages


def test_head_outputs_reproduce_the_attention_module(tiny_models):
    """Heads' weighted sums, concatenated and projected, equal the attention module's own output."""
    lm = explorer.load_model(tiny_models["gpt2"], device=DEVICE)
    cap = explorer.capture(lm, "the cat sat on the mat")
    outputs = head_outputs(cap.attentions, cap.values)  # [layer, head, query, head_dim]
    captured = {}
    attention = lm.model.transformer.h[1].attn
    hook = attention.register_forward_hook(lambda module, args, out: captured.update(out=out[0]))
    try:
        with torch.no_grad():
            lm.model(input_ids=torch.tensor(cap.token_ids, device=DEVICE)[None])
    finally:
        hook.remove()
    merged = torch.tensor(outputs[1], device=DEVICE).transpose(0, 1).reshape(len(cap.tokens), -1)[None]
    with torch.no_grad():
        projected = attention.c_proj(merged)
    np.testing.assert_allclose(projected.cpu().numpy(), captured["out"].cpu().numpy(), atol=1e-5)


def test_bert_head_outputs_equal_the_self_attention_context(minilm):
    cap = explorer.capture(minilm, "time flies like an arrow")
    outputs = head_outputs(cap.attentions, cap.values)
    captured = {}
    module = minilm.model.encoder.layer[2].attention.self
    hook = module.register_forward_hook(lambda m, args, out: captured.update(out=out[0]))
    try:
        with torch.no_grad():
            minilm.model(input_ids=torch.tensor(cap.token_ids, device=DEVICE)[None])
    finally:
        hook.remove()
    merged = torch.tensor(outputs[2]).transpose(0, 1).reshape(len(cap.tokens), -1)
    np.testing.assert_allclose(merged.cpu().numpy(), captured["out"][0].cpu().numpy(), atol=1e-5)


def test_sinusoidal_encoding_by_the_formula():
    encoding = sinusoidal_encoding(5, 8)
    assert encoding.shape == (5, 8)
    assert encoding[3, 2] == pytest.approx(np.sin(3 / 10000 ** (2 / 8)), abs=1e-6)
    assert encoding[3, 3] == pytest.approx(np.cos(3 / 10000 ** (2 / 8)), abs=1e-6)
    np.testing.assert_allclose(encoding[0, 1::2], 1.0)


@pytest.mark.parametrize(("width", "columns"), [(384, 500), (384, 192), (384, 191), (384, 64), (383, 60), (8, 1)])
def test_shown_pairs_fit_the_columns_with_the_smallest_stride(width, columns):
    pairs = shown_pairs(width, columns)
    stride = pairs[1] - pairs[0] if len(pairs) > 1 else (width + 1) // 2
    assert pairs[0] == 0 and len(pairs) <= columns and np.all(np.diff(pairs) == stride)
    assert stride == 1 or len(np.arange(0, (width + 1) // 2, stride - 1)) > columns  # one less would not fit


def test_rotary_frequencies_equal_the_models_own(tiny_models):
    lm = explorer.load_model(tiny_models["llama"], device=DEVICE)
    own = lm.model.model.rotary_emb.inv_freq.cpu().numpy()
    theta = getattr(lm.model.config, "rope_theta", None) or lm.model.config.rope_parameters["rope_theta"]
    np.testing.assert_allclose(rotary_frequencies(8, theta), own, rtol=1e-6)
    assert np.abs(rotary_angles(own, 10)).max() <= np.pi


def test_context_changes_a_token_layer_by_layer(minilm):
    a = explorer.capture(minilm, "time flies like an arrow")
    b = explorer.capture(minilm, "fruit flies like a banana")
    pa, pb = find_token(a.tokens, "flies"), find_token(b.tokens, "flies")
    assert (pa, pb) == (2, 2)
    similarity = layerwise_cosine(a.hidden_states, pa, b.hidden_states, pb)
    assert similarity.shape == (minilm.num_layers + 1,)
    assert similarity[-1] < similarity[0] <= 1.0 + 1e-6  # context pulls the two "flies" apart


@pytest.mark.parametrize("causal", [False, True])
def test_the_chapter_toy_equals_torchs_scaled_dot_product_attention(causal):
    x = np.random.default_rng(0).normal(size=(6, 16)).astype(np.float32)
    stages = toy_stages(x, causal=causal)
    q = k = v = torch.as_tensor(x, dtype=torch.float64)[None]
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)[0].cpu().numpy()
    np.testing.assert_allclose(stages["output"], expected, atol=1e-12)
    np.testing.assert_allclose(explorer.torch_attention(x, x, x, causal=causal), expected, atol=1e-12)
    np.testing.assert_allclose(stages["weights"].sum(axis=-1), 1.0)
    assert np.isneginf(stages["masked"][np.triu_indices(6, 1)]).all() if causal else "masked" not in stages
