"""The attention pages, run headless by AppTest: what they show equals the library (itself checked against the
models), links restore them, presets fall back offline, and bad input gives a message."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer import views
from explorer.compute.positions import layerwise_cosine
from explorer.compute.statistics import head_statistics, rollout, without_tokens
from explorer.models.anatomy import model_anatomy
from explorer.render.grid import tiled
from tests.figures import decode_plotly_array

TIMEOUT = 90
TEXT = "time flies like an arrow"


def open_page(page: str, **params) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params.update(params)
    at.run()
    at.switch_page(page)
    return at.run()


def figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def shown(markdown: str) -> str:
    return re.sub(r"\\(.)", r"\1", markdown)


def test_tokens_and_embeddings(minilm):
    at = open_page("pages/tokens_embeddings.py", pair="fruit flies like a banana")
    assert not at.exception
    table = at.dataframe[0].value
    rows = explorer.tokenize(minilm, TEXT, "fruit flies like a banana")
    assert list(table["id"]) == [r.token_id for r in rows] and list(table["segment"]).count("B") == 6
    # Special tokens cover no characters: their span cells are empty, never "None" (issue 14).
    assert [table["from"][i] for i, r in enumerate(rows) if r.special] == [""] * sum(r.special for r in rows)
    assert [table["from"][i] for i, r in enumerate(rows) if not r.special] == [
        str(r.start) for r in rows if not r.special
    ]
    # From ids to the first layer (issue 14, artifact 2): the shapes with the real sizes, and the sum checked.
    trail = at.dataframe[1].value
    n = len(rows)
    assert list(trail["shape"]) == [f"[{n}]"] + [f"[{n}, 384]"] * 6
    assert list(trail["step"])[2:5] == ["+ position embeddings", "+ token type embeddings", "= sum"]
    assert any(c.value.startswith("Checked: this sum is what the model's first layer receives") for c in at.caption)
    token_figure = figures(at)[0]
    expected = minilm.model.get_input_embeddings().weight[[r.token_id for r in rows]].detach().numpy()
    np.testing.assert_allclose(decode_plotly_array(token_figure["data"][0]["z"]), expected, atol=1e-6)
    a, b = explorer.capture(minilm, TEXT), explorer.capture(minilm, "fruit flies like a banana")
    cosine = figures(at)[-1]["data"][0]["y"]
    np.testing.assert_allclose(cosine, layerwise_cosine(a.hidden_states, 2, b.hidden_states, 2), atol=1e-6)


def test_tokens_page_says_when_a_word_is_missing():
    at = open_page("pages/tokens_embeddings.py", word="elephant")
    assert not at.exception
    assert any("elephant" in shown(info.value) for info in at.info)


def test_model_anatomy_numbers_are_the_models(minilm):
    at = open_page("pages/model_anatomy.py")
    assert not at.exception
    anatomy = model_anatomy(minilm)
    assert at.metric[0].value == f"{anatomy.total_parameters:,}"
    comparison = at.dataframe[1].value
    assert list(comparison["difference"]) == [0, 0, 0]  # a BERT layer is the textbook layer
    assert "Exactly the textbook layer" in " ".join(m.value for m in at.markdown)
    # An encoder has no output embeddings: the page says so rather than "separate" (issue 14).
    assert "input embeddings only" in " ".join(m.value for m in at.markdown)
    assert "separate" not in " ".join(m.value for m in at.markdown)
    shown_metrics = {m.label: m.value for m in at.metric}
    assert shown_metrics["Feed-forward size"] == f"{anatomy.ffn_size:,}" == "1,536"  # thousands separators
    # The lecture's whole-model count (issue 14, artifact 12): its terms add up to the model's real count.
    lecture = at.dataframe[2].value
    assert (
        lecture["parameters"].iloc[-1] == anatomy.total_parameters == sum(p.numel() for p in minilm.model.parameters())
    )
    assert lecture["parameters"].iloc[2:-1].sum() == anatomy.total_parameters  # the formula and each part it leaves out
    assert "+ pooler.dense" in list(lecture["term"])
    assert lecture["parameters"].iloc[0] == (30522 + 512) * 384  # (|V| + l_c)·d
    assert shown_metrics["Weights at 32 bits"] == f"{anatomy.total_parameters * 4 / 2**20:,.1f} MiB"


def test_model_anatomy_of_the_date_converter_explains_each_stacks_first_layer():
    """dates-t5 (issue 27): each stack's layer 0 is named, set against the textbook layer of its kind (the
    decoder's with cross-attention), and every difference is taken apart into reasons that add up to it."""
    at = open_page("pages/model_anatomy.py", model=explorer.DEFAULT_SEQ2SEQ)
    assert not at.exception
    text = " ".join(shown(m.value) for m in at.markdown)
    assert "The encoder's layer 0** (the first of 2)" in text and "The decoder's layer 0** (the first of 2)" in text
    assert "decoder layer: self-attention, cross-attention" in text
    encoder, decoder = at.dataframe[1].value, at.dataframe[2].value
    d, d_ff = 128, 512
    assert list(decoder["textbook"]) == [2 * (4 * d * d + 4 * d), 2 * d * d_ff + d_ff + d, 3 * 2 * d]
    assert list(decoder["this model"]) == [131_136, 131_072, 3 * d]
    assert list(encoder["textbook"]) == [4 * d * d + 4 * d, 2 * d * d_ff + d_ff + d, 2 * 2 * d]
    notes = [shown(m.value) for m in at.markdown if m.value.startswith("- ")]
    assert "- Attention, -960: -1,024, no biases in Q, K, V and O" in " ".join(notes)
    assert "+64, the relative position bias table (16 buckets × 4 heads)" in " ".join(notes)
    assert "RMSNorm has a scale and no bias: 3 × 128 values" in " ".join(notes)
    for note in notes:  # each line's terms add up to its difference
        difference, terms = re.match(r"- [\w-]+, ([-+][\d,]+): (.*)\.$", note).groups()
        amounts = re.findall(r"(?:^|; )([-+][\d,]+), ", terms)
        assert sum(int(a.replace(",", "")) for a in amounts) == int(difference.replace(",", "")), note


def test_step_by_step_restores_from_a_link_and_equals_the_capture(minilm):
    at = open_page("pages/attention_step_by_step.py", layer="3", head="4", query="2")
    assert not at.exception
    assert [at.slider(key=k).value for k in ("layer", "head", "query")] == [3, 4, 2]
    table = at.dataframe[0].value
    expected = explorer.capture(minilm, TEXT).attentions[3, 4, 2]
    np.testing.assert_allclose(table["softmax weight"], expected, atol=1e-6)
    np.testing.assert_allclose(table["captured weight"], expected, atol=1e-7)
    assert any("recomputed softmax" in c.value for c in at.caption)
    # The formula and the line under it are the view's, from this result (tests/test_attention_steps.py checks them).
    step = views.attention.StepByStep(explorer.DEFAULT_ENCODER, TEXT, layer=3, head=4, query=2)
    assert at.latex[0].value.strip("$\n") == step.formula(explorer.capture(minilm, TEXT))
    assert "q and each k have 32 numbers; scale = 0.176777 = 1/√32" in " ".join(c.value for c in at.caption)


def test_step_by_step_shows_minus_infinity_for_a_causal_model(tiny_models):
    at = open_page("pages/attention_step_by_step.py", model=tiny_models["gpt2"], query="1")
    assert not at.exception
    assert list(at.dataframe[0].value["masked"])[2:] == ["−∞"] * (len(at.dataframe[0].value) - 2)


@pytest.mark.parametrize("causal", [False, True])
def test_step_by_step_chapter_toy_is_the_chapters_attention_on_the_embeddings(minilm, causal):
    """The chapter's code, in torch: q = k = v = the token embeddings, softmax(q·kᵀ / √d), masked_fill for the
    causal mask. The page's table and its check against torch's scaled_dot_product_attention agree with it."""
    import torch

    at = open_page("pages/attention_step_by_step.py", source="toy", causal=str(causal).lower(), query="2")
    assert not at.exception
    ids = torch.tensor(minilm.tokenizer(TEXT)["input_ids"])
    with torch.inference_mode():
        x = minilm.model.get_input_embeddings()(ids).double()
        scores = x @ x.T / x.shape[-1] ** 0.5
        if causal:
            mask = torch.tril(torch.ones(len(ids), len(ids)))
            scores = scores.masked_fill(mask == 0, -float("inf"))
        weights = torch.softmax(scores, dim=-1)
    table = at.dataframe[0].value
    np.testing.assert_allclose(table["softmax weight"], weights[2].numpy(), atol=1e-6)
    assert ("masked" in table) == causal
    if causal:
        assert list(table["masked"])[3:] == ["−∞"] * (len(ids) - 3)
        mask_figure, scores_figure = figures(at)[1:3]
        np.testing.assert_array_equal(decode_plotly_array(mask_figure["data"][0]["z"]), mask.numpy())
        assert "Masked scores" in scores_figure["layout"]["title"]["text"]
    difference = next(c.value for c in at.caption if "scaled_dot_product_attention" in c.value)
    assert float(difference.rsplit(" ", 1)[-1].rstrip(".")) < 1e-9
    assert "layer" not in [s.key for s in at.slider]  # the toy has no layers or heads


def test_step_by_step_chapter_toy_offers_the_chapters_random_embeddings(minilm):
    """The chapter's own setting (issue 38): seeded standard-normal vectors of the model's width, as numpy draws them,
    so each token attends almost only to itself; the caption says which vectors are shown and what they do."""
    at = open_page("pages/attention_step_by_step.py", source="toy", toy_embeddings="random", query="2")
    assert not at.exception
    count = len(minilm.tokenizer(TEXT)["input_ids"])
    x = np.random.default_rng(0).standard_normal((count, 384)).astype(np.float32).astype(np.float64)
    scores = x[2] @ x.T / np.sqrt(384)
    weights = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum()
    np.testing.assert_allclose(at.dataframe[0].value["softmax weight"], weights, atol=1e-9)
    caption = next(c.value for c in at.caption if c.value.startswith("X holds"))
    assert "random vectors of 384 numbers (seed 0" in caption
    assert f"Here {count} of the {count} queries put their largest weight on themselves" in caption


def test_neuron_view_preset_falls_back_offline_and_shows_the_vectors(minilm):
    at = open_page("pages/neuron_view.py")
    preset = next(b for b in at.button if "Chapter preset" in b.label)
    preset.click().run()
    assert not at.exception
    assert at.session_state["model_name"] == explorer.DEFAULT_ENCODER  # bert-base-uncased cannot be downloaded here
    assert any("could not be downloaded" in shown(i.value) for i in at.info)
    assert [at.slider(key=k).value for k in ("layer", "head", "query")] == [0, 8, 2]
    data = figures(at)[0]["data"]
    stack = explorer.capture(minilm, TEXT).main
    np.testing.assert_allclose(decode_plotly_array(data[0]["z"])[0], stack.queries[0, 8, 2], atol=1e-6)
    np.testing.assert_allclose(decode_plotly_array(data[1]["z"]), stack.keys[0, 8], atol=1e-6)


def test_all_heads_in_one_figure(minilm):
    at = open_page("pages/heads_overview.py", layer="2", head="5")
    assert not at.exception
    figure = figures(at)[0]
    stack = explorer.capture(minilm, TEXT).main
    image, _, _ = tiled(stack.attentions, stack.masks_by_layer())
    np.testing.assert_allclose(decode_plotly_array(figure["data"][0]["z"]), image, atol=1e-7)
    assert len(figure["data"][1]["x"]) == 6 * 12  # one clickable point per head
    assert len(figure["layout"]["shapes"]) == 1  # the selected head is outlined
    link = at.get("page_link")[0].proto
    assert link.label == "Open layer 2, head 5 as a heatmap" and "layer=2&head=5" in link.query_string


def test_bertviz_page_offline_with_pair_filter():
    at = open_page("pages/bertviz_views.py", pair="fruit flies like a banana")
    assert not at.exception
    frame = at.get("iframe")[0].proto.srcdoc
    assert "Sentence A -&gt; Sentence B" in frame or "Sentence A -> Sentence B" in frame
    assert not re.search(r"(src|href)\s*=\s*[\"']?https?://", frame)
    at.radio(key="bv_view").set_value("model").run()
    assert "model view" in at.get("iframe")[0].proto.srcdoc


def test_bertviz_page_limits_long_inputs():
    at = open_page("pages/bertviz_views.py", text="word " * 200, bv_view="model")
    assert not at.exception
    assert any("line views are drawn for the chosen layer only" in i.value for i in at.info)


def test_head_statistics_table_hidden_tokens_and_rollout(minilm):
    at = open_page("pages/head_statistics.py")
    assert not at.exception
    capture = explorer.capture(minilm, TEXT)
    table = at.dataframe[0].value
    expected = head_statistics(capture.attentions, [0, len(capture.tokens) - 1])
    np.testing.assert_allclose(table["entropy (nats)"], [row["entropy (nats)"] for row in expected], atol=1e-9)
    np.testing.assert_allclose(table["special-token share"], [row["special-token share"] for row in expected])
    rolled = decode_plotly_array(figures(at)[1]["data"][0]["z"])
    np.testing.assert_allclose(rolled, rollout(capture.attentions)[-1], atol=1e-6)
    at.toggle(key="hide_special").set_value(True).run()
    assert not at.exception
    hidden = figures(at)[0]
    assert (
        len(hidden["data"][0]["x"]) == len(capture.tokens) - 2
        and "special tokens hidden" in hidden["layout"]["title"]["text"]
    )
    specials = [0, len(capture.tokens) - 1]
    renormalised, kept = without_tokens(capture.attentions, specials)
    expected = head_statistics(renormalised, specials, key_positions=kept)
    table = at.dataframe[0].value
    np.testing.assert_allclose(table["mean distance"], [row["mean distance"] for row in expected], atol=1e-9)
    # Rows left with under 1% of their weight are greyed (blank here, a grey band above), and said so.
    left = capture.attentions[..., 1:-1].sum(axis=-1)  # [layer, head, query]
    greyed = left[0, 0] < 0.01
    np.testing.assert_allclose(
        decode_plotly_array(hidden["data"][0]["z"]), np.where(greyed[:, None], np.nan, renormalised[0, 0]), atol=1e-7
    )
    assert list(table["rows keeping < 1%"]) == (left < 0.01).sum(axis=-1).ravel().tolist()
    said = [caption.value for caption in at.caption]
    total = int((left < 0.01).sum())
    assert any(text.startswith(f"{total} of the {left.size} rows of all") for text in said)
    head_line = f"{greyed.sum()} of {len(greyed)} rows keep" if greyed.any() else "Every row keeps at least 1%"
    assert any(text.startswith(head_line) for text in said)
    layer, head = np.unravel_index(np.argmax((left < 0.01).sum(axis=-1)), left.shape[:2])  # the most greyed head
    at.slider(key="layer").set_value(int(layer)).run()
    at.slider(key="head").set_value(int(head)).run()
    greyed = left[layer, head] < 0.01
    drawn = figures(at)[0]["data"]
    assert greyed.sum() >= 2 and len(drawn) == 2  # the weights, then the grey band
    np.testing.assert_array_equal(np.isnan(decode_plotly_array(drawn[0]["z"])).all(axis=1), greyed)
    said = [caption.value for caption in at.caption]
    assert any(text.startswith(f"{greyed.sum()} of {len(greyed)} rows keep less than 1%") for text in said)


def test_head_statistics_are_measured_once_per_capture_not_per_slider_move(monkeypatch):
    # At 500 tokens each measurement copied every head's weights: forty students' moves held gigabytes.
    import explorer.ui.attention as attention

    calls = []
    original = attention.head_statistics

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(attention, "head_statistics", counting)
    at = open_page("pages/head_statistics.py", text="statistics measured once")
    measured = len(calls)
    assert not at.exception and measured == 6  # once per layer of the six
    at.slider(key="layer").set_value(1).run()
    at.slider(key="head").set_value(3).run()
    assert not at.exception and len(calls) == measured
    second = open_page("pages/head_statistics.py", text="statistics measured once")  # another student
    assert not second.exception and len(calls) == measured


def test_compare_two_texts_and_two_models(minilm):
    at = open_page("pages/compare_attention.py", layer="1", head="2")
    assert not at.exception
    left, right = figures(at)
    np.testing.assert_allclose(
        decode_plotly_array(left["data"][0]["z"]), explorer.capture(minilm, TEXT).attentions[1, 2], atol=1e-7
    )
    other = explorer.capture(minilm, "fruit flies like a banana").attentions[1, 2]
    np.testing.assert_allclose(decode_plotly_array(right["data"][0]["z"]), other, atol=1e-7)
    at.radio(key="compare").set_value("models").run()
    assert not at.exception
    assert explorer.display_name(explorer.DEFAULT_DECODER) in figures(at)[1]["layout"]["title"]["subtitle"]["text"]


@pytest.mark.parametrize(
    "page",
    [
        "pages/attention_step_by_step.py",
        "pages/neuron_view.py",
        "pages/heads_overview.py",
        "pages/head_statistics.py",
        "pages/bertviz_views.py",
    ],
)
def test_empty_text_gives_a_hint(page):
    at = open_page(page, text=" ")
    assert not at.exception
    assert any("Type some text" in info.value for info in at.info)


def test_compare_two_identical_texts():
    # Both sides share one cached capture: keys chosen by object identity collided (StreamlitDuplicateElementKey).
    at = AppTest.from_file("../app.py", default_timeout=120)
    at.query_params.update({"compare": "texts", "text": "same words", "text_b": "same words"})
    at.run()
    at.switch_page("pages/compare_attention.py").run()
    assert not at.exception
    assert len(at.get("plotly_chart")) == 2
