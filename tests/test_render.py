"""The heatmap figure shows exactly one head's captured weights, with tokens that stay distinct and inert."""

import dataclasses
import json

import numpy as np
import pytest

import explorer
from explorer.data import AttentionStack
from explorer.render.heatmap import agreement_caption, attention_heatmap, masked_weights, verification_caption
from explorer.render.style import FigureInfo
from tests.figures import decode_plotly_array


def synthetic_stack(tokens, *, causal=False, seed=0) -> AttentionStack:
    """A stack with random softmax rows [layer=2, head=3]; no model needed."""
    n = len(tokens)
    rng = np.random.default_rng(seed)
    mask = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
    scores = np.where(mask, rng.normal(size=(2, 3, n, n)), -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    return AttentionStack(
        query_tokens=tuple(tokens),
        key_tokens=tuple(tokens),
        attentions=(weights / weights.sum(-1, keepdims=True)).astype(np.float32),
        queries=np.zeros((2, 3, n, 4), dtype=np.float32),
        keys=np.zeros((2, 3, n, 4), dtype=np.float32),
        scale=np.full(2, 0.5, dtype=np.float32),
        position_bias=None,
        mask=mask,
        kv_head_of_query=np.arange(3),
    )


def test_values_are_the_captured_head_exactly(minilm):
    capture = explorer.capture(minilm, "time flies like an arrow")
    figure = attention_heatmap(capture.main, 2, 5)
    spec = json.loads(figure.to_json())
    shown = decode_plotly_array(spec["data"][0]["z"])
    np.testing.assert_array_equal(shown, capture.attentions[2, 5])
    assert shown.dtype == np.float32  # exact, and 4 bytes a cell in the payload
    assert spec["layout"]["title"]["text"] == "Attention weights · layer 2 · head 5"


def test_repeated_tokens_get_distinct_positions():
    tokens = ["the", "cat", "saw", "the", "cat"]
    figure = attention_heatmap(synthetic_stack(tokens), 0, 0)
    trace = figure.data[0]
    assert len(set(trace.x)) == len(set(trace.y)) == 5  # Plotly would merge equal category names
    assert trace.x[0] != trace.x[3] and trace.x[0].endswith("'the'")
    assert list(figure.layout.xaxis.ticktext) == tokens
    assert list(figure.layout.xaxis.tickvals) == list(trace.x)
    assert figure.layout.yaxis.autorange == "reversed"  # the first query on top, as in a matrix


def test_html_in_tokens_is_escaped():
    tokens = ["<b>bold</b>", "a&b", "<img src=x onerror=alert(1)>", "plain"]
    info = FigureInfo("<i>t</i>", model="<b>m</b>", text="<script>x</script>")
    figure = attention_heatmap(synthetic_stack(tokens), 0, 0, info=info)
    text = json.dumps([list(figure.data[0].x), list(figure.data[0].y), list(figure.layout.xaxis.ticktext)])
    assert "<b>" not in text and "<img" not in text
    assert "&lt;b&gt;bold&lt;/b&gt;" in text and "a&amp;b" in text
    assert figure.layout.title.text == "&lt;i&gt;t&lt;/i&gt;"
    assert "<script>" not in figure.layout.title.subtitle.text and "<b>" not in figure.layout.title.subtitle.text


def test_masked_cells_are_blank_not_zero():
    stack = synthetic_stack(["a", "b", "c", "d"], causal=True)
    spec = json.loads(attention_heatmap(stack, 1, 2).to_json())
    shown = decode_plotly_array(spec["data"][0]["z"])
    upper = np.triu(np.ones((4, 4), dtype=bool), k=1)
    assert np.isnan(shown[upper]).all()
    np.testing.assert_array_equal(shown[~upper], stack.attentions[1, 2][~upper])
    assert spec["data"][0]["hoverongaps"] is False


def test_hover_names_both_tokens_and_the_exact_value():
    figure = attention_heatmap(synthetic_stack(["x", "y"]), 0, 1)
    assert figure.data[0].hovertemplate == "<b>%{z:.6g}</b><br>query %{y} → key %{x}<extra></extra>"
    assert list(figure.data[0].y) == ["#0 'x'", "#1 'y'"]


def test_colour_scale_is_zero_to_one_or_to_the_head_max():
    stack = synthetic_stack(["a", "b", "c"])
    assert (attention_heatmap(stack, 0, 0).data[0].zmin, attention_heatmap(stack, 0, 0).data[0].zmax) == (0, 1)
    stretched = attention_heatmap(stack, 0, 0, color_max=None).data[0].zmax
    assert stretched == pytest.approx(float(stack.attentions[0, 0].max()))


def test_long_inputs_thin_the_tick_labels_but_keep_every_cell():
    tokens = [f"t{i}" for i in range(512)]
    figure = attention_heatmap(synthetic_stack(tokens), 0, 0)
    assert figure.data[0].z.shape == (512, 512)
    step = int(figure.layout.xaxis.tickvals[1].split()[0][1:])
    assert step > 1 and len(figure.layout.xaxis.tickvals) == len(range(0, 512, step))
    assert figure.layout.xaxis.ticktext[1] == f"#{step} t{step}"  # thinned labels carry their position
    assert len(figure.to_json()) < 1_600_000  # one head, float32: about 1.4 MB


def test_masked_weights_follow_per_layer_masks():
    """Sliding-window layers mask differently from full layers: each layer's own mask applies."""
    stack = synthetic_stack(["a", "b", "c"], causal=True)
    window = np.tril(np.triu(np.ones((3, 3), dtype=bool), k=-1))  # each query sees itself and one back
    stack = dataclasses.replace(stack, layer_mask=np.stack([stack.mask, window]))
    assert np.isnan(masked_weights(stack, 0, 0)).sum() == 3
    assert np.isnan(masked_weights(stack, 1, 0)[2, 0])


def test_an_agreement_caption_ticks_only_what_agrees():
    # The step-by-step page printed its ✓ whatever the difference it measured.
    assert agreement_caption("softmax vs the model", 3.0e-8) == "✓ softmax vs the model: max difference 3.0e-08."
    assert agreement_caption("softmax vs the model", 0.2).startswith("⚠ softmax vs the model: max difference 2.0e-01")
    assert agreement_caption("softmax vs the model", float("nan")).startswith("⚠")
    assert agreement_caption("x", 5e-4, tolerance=1e-3).startswith("✓")


def test_verification_caption():
    assert verification_caption(1.9e-7) == "✓ verified: max |recomputed − captured| = 1.9e-07"
    assert verification_caption(0.02).startswith("⚠ not verified")
    assert verification_caption(float("nan")).startswith("⚠ not verified")
