"""The app, run headless by Streamlit's AppTest: what it shows equals what ``explorer.capture`` returns.

AppTest runs no JavaScript: a chart comes back as its Plotly JSON (``proto.spec``). Cached models and
captures persist across tests in this process, as they do across sessions of a real server.
"""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer import gateway
from explorer.ui.caches import results_cache
from tests.figures import decode_plotly_array

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TEXT = "time flies like an arrow"
TIMEOUT = 60  # the first run loads a model; AppTest's default of 3 s is too short


def start(**query_params) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params.update(query_params)
    return at.run()


def shown_weights(at: AppTest) -> np.ndarray:
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    return decode_plotly_array(json.loads(charts[0].proto.spec)["data"][0]["z"])


def chart_title(at: AppTest) -> str:
    return json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]


def assert_same_weights(shown: np.ndarray, expected: np.ndarray) -> None:
    # The app's model is its own load of the same weights: equal up to float32 rounding.
    np.testing.assert_allclose(shown, expected, rtol=1e-5, atol=1e-7)


@pytest.fixture
def count_forwards(monkeypatch):
    """Counts model runs: every capture the app makes goes through ``explorer.capture``."""
    calls = []
    real = explorer.capture

    def counting(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(explorer, "capture", counting)
    results_cache().clear()
    return calls


def shown(markdown: str) -> str:
    """The text a reader sees of Markdown whose punctuation was backslash-escaped (``ui.literal``)."""
    return re.sub(r"\\(.)", r"\1", markdown)


def load_in_sidebar(at: AppTest, name: str) -> AppTest:
    at.text_input(key="model_custom").input(name)
    return at.run()


def test_default_view_shows_the_captured_head(minilm):
    at = start()
    assert not at.exception
    assert at.session_state["model_name"] == explorer.DEFAULT_ENCODER
    assert [s.value for s in at.slider] == [0, 0]
    expected = explorer.capture(minilm, DEFAULT_TEXT)
    assert_same_weights(shown_weights(at), expected.attentions[0, 0])
    assert chart_title(at) == "Attention weights · layer 0 · head 0"
    assert float(at.metric[0].value) < 1e-5
    assert any("✓ verified" in caption.value for caption in at.caption)


def test_layer_and_head_change_the_chart_without_running_the_model(minilm, count_forwards):
    expected = explorer.capture(minilm, DEFAULT_TEXT).attentions[3, 7]
    count_forwards.clear()
    at = start()
    assert count_forwards == [DEFAULT_TEXT]
    at.slider(key="layer").set_value(3).run()
    at.slider(key="head").set_value(7).run()
    at.toggle(key="stretch").set_value(True).run()
    assert not at.exception
    assert count_forwards == [DEFAULT_TEXT]  # three reruns, one forward pass
    assert chart_title(at) == "Attention weights · layer 3 · head 7"
    assert_same_weights(shown_weights(at), expected)
    at.text_area(key="text").input("a new sentence").run()
    assert count_forwards == [DEFAULT_TEXT, "a new sentence"]  # the counter does see real runs


def test_a_shared_link_restores_the_view(minilm):
    at = start(text="the cat saw the cat", layer="4", head="9")
    assert not at.exception
    assert at.text_area(key="text").value == "the cat saw the cat"
    assert (at.slider(key="layer").value, at.slider(key="head").value) == (4, 9)
    assert_same_weights(shown_weights(at), explorer.capture(minilm, "the cat saw the cat").attentions[4, 9])
    assert shown_weights(at).shape == (7, 7)  # both "the" and both "cat" keep their own row and column


def test_a_shared_link_names_its_model_and_survives_a_bad_one(tiny_models):
    at = start(model=tiny_models["gpt2"])
    assert at.session_state["model_name"] == tiny_models["gpt2"]
    assert shown_weights(at).shape == (5, 5)
    at = start(model="no-such-org/no-such-model-xyz", head="3")
    assert not at.exception
    assert at.session_state["model_name"] == explorer.DEFAULT_ENCODER  # falls back to the bundled encoder
    assert any("no-such-model-xyz" in shown(error.value) and "instead" in error.value for error in at.sidebar.error)
    assert chart_title(at) == "Attention weights · layer 0 · head 3"


def test_a_run_cut_short_while_the_fallback_loads_still_says_why_and_loads_it(minilm, monkeypatch):
    """A rerun (a click, a reconnect) can end a run while a bad link's fallback loads: the next run finishes it."""
    import streamlit as st

    from explorer.ui import models

    load, cut = models._load_once, []

    def cut_short_once(name, slot):
        if not cut:
            cut.append(name)
            st.stop()  # the run ends here, as a rerun request ends it at its next element
        return load(name, slot)

    monkeypatch.setattr(models, "_load_once", cut_short_once)
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params["model"] = "not a model!"
    at.run()
    assert cut == [explorer.DEFAULT_ENCODER] and not at.exception
    at.run()
    assert at.session_state["model_name"] == explorer.DEFAULT_ENCODER and shown_weights(at).shape == (7, 7)
    assert any(
        "not a model!" in shown(error.value) and "Showing all-MiniLM-L6-v2 instead." in shown(error.value)
        for error in at.sidebar.error
    )


def test_the_picker_reporting_the_model_in_use_is_no_pick(minilm, monkeypatch):
    """Streamlit calls a widget's on_change when a rerun cut short the run that first drew it (seen in Chromium: a
    key press while a bad link's stand-in loaded). For the model picker that report names the model in use: it
    must not wipe why the link's model did not load. A real pick still loads, and clears the last refusal."""
    from types import SimpleNamespace

    from explorer.ui import models

    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params["model"] = "not a model!"
    at.run()
    state = {key: at.session_state[key] for key in ("model_name", "model_choice", "_model_error", "_model_note")}
    assert state["model_choice"] == state["model_name"] == explorer.DEFAULT_ENCODER
    refusal = state["_model_error"]
    assert "not a model!" in refusal
    monkeypatch.setattr(models, "st", SimpleNamespace(session_state=state))
    models._request_choice()  # what Streamlit calls for the reported value
    assert state["_model_error"] == refusal and "_model_request" not in state
    state["model_choice"] = explorer.DEFAULT_DECODER  # a pick
    models._request_choice()
    assert state["_model_request"] == explorer.DEFAULT_DECODER and state["_model_error"] is None


def test_empty_text_shows_a_hint_not_an_error():
    at = start()
    at.text_area(key="text").input("   ").run()
    assert not at.exception
    assert any("Type some text" in info.value for info in at.info)
    assert not at.get("plotly_chart")


def test_overlong_text_is_cut_with_a_visible_warning(minilm):
    text = "word " * 700
    at = start()
    at.text_area(key="text").input(text).run()
    assert not at.exception
    cut = explorer.capture(minilm, text).truncated
    assert cut > 0
    assert any(f"last {cut} tokens were cut" in warning.value for warning in at.warning)
    assert shown_weights(at).shape == (minilm.max_tokens, minilm.max_tokens)


def test_a_bad_model_id_shows_an_error_and_keeps_the_previous_model(minilm):
    at = load_in_sidebar(start(), "no-such-org/no-such-model-xyz")
    assert not at.exception
    assert any("no-such-model-xyz" in shown(error.value) for error in at.sidebar.error)
    assert at.session_state["model_name"] == explorer.DEFAULT_ENCODER
    at.slider(key="head").set_value(2).run()
    assert any("no-such-model-xyz" in shown(error.value) for error in at.sidebar.error)  # stays until the next pick
    assert_same_weights(shown_weights(at), explorer.capture(minilm, DEFAULT_TEXT).attentions[0, 2])


def test_a_causal_model_leaves_masked_cells_blank(tiny_models):
    at = start()
    at.slider(key="head").set_value(7).run()
    at = load_in_sidebar(at, tiny_models["gpt2"])
    assert not at.exception
    assert at.slider(key="head").value == 1  # clamped: the tiny model has 2 heads
    assert at.session_state["model_name"] == tiny_models["gpt2"]
    assert "pair" not in [w.key for w in at.text_area]  # second segments are for encoders only
    shown = shown_weights(at)
    upper = np.triu(np.ones(shown.shape, dtype=bool), k=1)
    assert np.isnan(shown[upper]).all() and not np.isnan(shown[~upper]).any()


def test_an_encoder_decoder_offers_its_three_stacks(tiny_models):
    at = load_in_sidebar(start(), tiny_models["t5"])
    assert "stack" not in [radio.key for radio in at.radio]  # without a target only the encoder runs
    at.text_area(key="target").input("die zeit").run()
    assert at.radio(key="stack").options == ["encoder", "decoder", "cross"]
    at.radio(key="stack").set_value("cross").run()
    assert not at.exception
    lm = explorer.load_model(tiny_models["t5"], device="cpu")
    expected = explorer.capture(lm, DEFAULT_TEXT, target="die zeit").stacks["cross"].attentions[0, 0]
    assert_same_weights(shown_weights(at), expected)


@pytest.mark.parametrize("page", sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "pages").glob("*.py")))
def test_every_page_renders_without_errors(page):
    at = start()
    at.switch_page(page).run()
    assert not at.exception
    assert not at.error


def test_cached_captures_are_read_only():
    capture = gateway.run("capture", explorer.DEFAULT_ENCODER, DEFAULT_TEXT)
    assert gateway.run("capture", explorer.DEFAULT_ENCODER, DEFAULT_TEXT) is capture
    with pytest.raises(ValueError, match="read-only"):
        capture.attentions[0, 0, 0, 0] = 1.0


def chart_layout(at: AppTest) -> dict:
    return json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]


def test_presentation_mode_lives_in_the_url_and_draws_for_a_projector():
    at = start(present="true")
    assert not at.exception
    assert at.toggle(key="present").value is True
    layout = chart_layout(at)
    assert abs(layout["width"] / layout["height"] - 16 / 9) < 0.01
    assert layout["xaxis"]["tickfont"]["size"] >= 16 and layout["yaxis"]["tickfont"]["size"] >= 16
    del at.query_params["present"]  # AppTest re-sends its URL on every run; a browser's URL follows the toggle
    at.toggle(key="present").set_value(False).run()
    assert chart_layout(at)["xaxis"]["tickfont"]["size"] < 16


def test_a_link_restores_stretched_colours(minilm):
    at = start(stretch="true", head="2")
    assert at.toggle(key="stretch").value is True
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    head_max = float(explorer.capture(minilm, DEFAULT_TEXT).attentions[0, 2].max())
    assert spec["data"][0]["zmax"] == pytest.approx(head_max, rel=1e-6)
    assert "this head's max" in spec["data"][0]["colorbar"]["title"]["text"]


def test_an_index_that_does_not_fit_is_clamped_with_a_notice_and_comes_back(tiny_models):
    at = start(head="7", layer="4")
    at = load_in_sidebar(at, tiny_models["gpt2"])  # 2 layers × 2 heads
    assert not at.exception
    assert (at.slider(key="layer").value, at.slider(key="head").value) == (1, 1)
    notices = " ".join(info.value for info in at.info)
    assert "Head 7 does not exist here" in notices and "Layer 4 does not exist here" in notices
    at = load_in_sidebar(at, explorer.DEFAULT_ENCODER)
    assert (at.slider(key="layer").value, at.slider(key="head").value) == (4, 7)  # restored
    assert not any("does not exist" in info.value for info in at.info)
    assert chart_title(at) == "Attention weights · layer 4 · head 7"


def test_malformed_link_values_give_a_notice_and_a_valid_view():
    at = start(head="abc", layer="-1", stretch="maybe")
    assert not at.exception
    notices = " ".join(info.value for info in at.info)
    assert "not a valid index" in notices and "not true or false" in notices
    assert chart_title(at) == "Attention weights · layer 0 · head 0"


def test_every_figure_offers_slide_exports():
    at = start()
    labels = [button.proto.label for button in at.get("download_button")]
    assert labels == ["PNG", "SVG", "HTML"]
    assert all(button.proto.deferred_file_id for button in at.get("download_button"))  # made only on click


def test_scores_before_softmax_and_the_mask_of_a_causal_model(tiny_models):
    lm = explorer.load_model(tiny_models["gpt2"], device="cpu")
    expected = explorer.capture(lm, DEFAULT_TEXT).attentions[1, 1]
    at = start(model=tiny_models["gpt2"], layer="1", head="1", show="scores")
    assert not at.exception
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    scores = decode_plotly_array(spec["data"][0]["z"])
    upper = np.triu(np.ones(scores.shape, dtype=bool), k=1)
    assert np.isnan(scores[upper]).all() and np.isfinite(scores[~upper]).all()
    # The masked cells are drawn as −∞; the softmax of the scores is the model's own weights.
    masked = decode_plotly_array(spec["data"][1]["z"])
    assert (np.isfinite(masked) == upper).all()
    weights = np.exp(np.where(upper, -np.inf, scores - np.nanmax(scores, axis=1, keepdims=True)))
    np.testing.assert_allclose(weights / weights.sum(axis=1, keepdims=True), expected, atol=1e-6)
    assert chart_title(at) == "Attention scores · layer 1 · head 1"

    at.radio(key="show").set_value("mask").run()
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    ones = decode_plotly_array(spec["data"][0]["z"])  # the chapter's mask: torch.tril(torch.ones(n, n))
    np.testing.assert_array_equal(ones, np.tril(np.ones(scores.shape)))
    assert chart_title(at) == "Attention mask · layer 1"
    beside = json.loads(at.get("plotly_chart")[1].proto.spec)  # and beside it the scores it masks: −∞ above
    np.testing.assert_array_equal(decode_plotly_array(beside["data"][0]["z"]), scores)
    assert (np.isfinite(decode_plotly_array(beside["data"][1]["z"])) == upper).all()
    assert beside["layout"]["title"]["text"].startswith("Masked scores · layer 1 · head 1")


def test_a_causal_colour_scale_can_ignore_the_first_row(tiny_models):
    lm = explorer.load_model(tiny_models["gpt2"], device="cpu")
    weights = explorer.capture(lm, DEFAULT_TEXT).attentions[0, 0]
    at = start(model=tiny_models["gpt2"], stretch="true", skip_first="true")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["data"][0]["zmax"] == pytest.approx(float(weights[1:].max()), rel=1e-6) and weights[0, 0] == 1
    assert "below row 0" in spec["data"][0]["colorbar"]["title"]["text"]


def test_the_causal_mask_preset_shows_a_five_by_five_mask_offline():
    at = start()
    preset = next(button for button in at.button if "causal mask" in button.label)
    preset.click().run()
    assert not at.exception
    assert at.session_state["model_name"] == explorer.DEFAULT_DECODER  # gpt2 cannot be downloaded in the tests
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    mask = decode_plotly_array(spec["data"][0]["z"])
    np.testing.assert_array_equal(mask, np.tril(np.ones((5, 5))))  # the chapter's 5 × 5 matrix of 1s and 0s
    assert spec["layout"]["title"]["text"] == "Attention mask · layer 0"
