"""What the pages say, run headless by AppTest: models by their names, settings in the page's words, one name
and one unit for each thing on every page, and defaults that do not depend on how a visitor arrived."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.ui.navigation import PAGES
from explorer.views import probes
from tests.test_app_attention import open_page

TIMEOUT = 90
ROOT = Path(__file__).resolve().parent.parent
PAGE_FILES = [path for _, path, _, _ in PAGES]
# The proto fields that hold words a visitor reads: bodies of text, labels, help, options and their captions.
_READ_FIELDS = {"body", "label", "help", "placeholder", "options", "captions", "caption", "value"}


def _strings(message) -> list[str]:
    found = []
    for field, value in message.ListFields():
        items = list(value) if field.is_repeated else [value]
        if field.message_type is not None:
            for item in items:
                found += _strings(item)
        elif field.name in _READ_FIELDS:
            found += [item for item in items if isinstance(item, str)]
    return found


def words(at: AppTest) -> str:
    """Every word the page and its sidebar show (Markdown escapes undone), one line per element."""
    lines = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            lines.extend(_strings(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(re.sub(r"\\(.)", r"\1", line) for line in lines)


# -- item 14: models by their names -----------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGE_FILES)
def test_no_page_shows_a_bundled_models_id(page):
    """The encoder is loaded: the decoding pages and the lens say they use the bundled decoder, by its name."""
    said = words(open_page(page))
    assert "bundled bundled" not in said
    assert "bundled/" not in said
    assert explorer.DEFAULT_DECODER not in said and explorer.DEFAULT_SEQ2SEQ not in said


def test_a_preset_that_falls_back_names_both_models_by_their_names():
    at = open_page("pages/greedy_search.py", model=explorer.DEFAULT_DECODER)
    next(button for button in at.button if "Chapter preset" in button.label).click().run()
    said = words(at)
    assert f"shows the bundled {explorer.display_name(explorer.DEFAULT_DECODER)} instead" in said
    assert "bundled/" not in said


# -- item 15: a preset says what it set in the page's words -----------------------------------------------------


def test_a_preset_notice_names_the_widgets_not_their_keys():
    at = open_page("pages/bertviz_views.py")
    next(button for button in at.button if "Chapter preset" in button.label).click().run()
    assert not at.exception
    notice = next(info.value for info in at.info if "Preset applied" in info.value)
    assert "bv_" not in notice
    assert "view “head”" in notice and "head 8" in notice and "second segment “fruit flies" in notice
    assert at.radio(key="bv_view").label == "View" and at.radio(key="bv_view").value == "head"


# -- item 19: a preset's button says offline what it loads -------------------------------------------------------


def test_a_preset_button_names_what_it_loads_offline():
    """gpt2 cannot be downloaded in the tests (the Hub is switched off): the button says it loads the bundled
    decoder and the text chosen for it, before anyone clicks it."""
    at = open_page("pages/attention_heatmaps.py")
    label = next(button.label for button in at.button if "causal mask" in button.label)
    assert f"offline: {explorer.display_name(explorer.DEFAULT_DECODER)}, “She was not at home”" in label
    cross = next(button.label for button in at.button if "date converter" in button.label)
    assert "offline" not in cross  # the bundled model it names is the one it loads


def pick_model(at: AppTest, name: str) -> AppTest:
    at.selectbox(key="model_choice").set_value(name)
    return at.run()


def test_picking_the_date_model_starts_from_its_own_example():
    """The sentence the page started with was its default, not the visitor's: the date model gets its own text."""
    at = open_page("pages/attention_heatmaps.py")
    assert at.text_area(key="text").value == "time flies like an arrow"
    pick_model(at, explorer.DEFAULT_SEQ2SEQ)
    assert not at.exception
    assert at.text_area(key="text").value == "Thursday, March 5, 2021"
    assert not any("unknown to" in caption.value for caption in at.caption)


def test_a_text_the_model_does_not_know_is_said_so_with_its_own_example_offered():
    at = open_page("pages/attention_heatmaps.py", model=explorer.DEFAULT_SEQ2SEQ, text="time flies like an arrow")
    note = next(caption.value for caption in at.caption if "unknown to" in caption.value)
    assert "5 of this text's 5 tokens are unknown to dates" in note and "unk" in note
    next(button for button in at.button if "own example" in button.label).click().run()
    assert at.text_area(key="text").value == "Thursday, March 5, 2021"
    assert at.text_area(key="target").value == "2021-03-05"
    assert not any("unknown to" in caption.value for caption in at.caption)


def test_the_tokens_page_says_the_small_vocabulary_splits_words():
    at = open_page("pages/tokens_embeddings.py", model=explorer.DEFAULT_DECODER)
    said = words(at)
    tokenizer = explorer.load_model(explorer.DEFAULT_DECODER, device="cpu").tokenizer
    assert f"vocabulary holds {len(tokenizer):,} tokens" in said  # 8,192
    # "time flies like an arrow": ['time', 'Ġfl', 'ies', 'Ġlike', 'Ġan', 'Ġar', 'row'] in its tokenizer
    assert "“flies” becomes ␣fl + ies" in said and "“arrow” becomes ␣ar + row" in said and "“time”" not in said


# -- item 21: one set of defaults, however a visitor arrives ---------------------------------------------------


COMPARE_DEFAULTS = {"steps": 16, "beams": 4, "temperature": 0.75}


@pytest.mark.parametrize("before", [None, "pages/beam_search.py", "pages/sampling.py", "pages/greedy_search.py"])
def test_compare_strategies_starts_from_its_own_defaults_however_one_arrives(before):
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params["model"] = explorer.DEFAULT_DECODER
    at.run()
    if before:
        at.switch_page(before).run()
        assert not at.exception
    at.switch_page("pages/compare_strategies.py").run()
    assert not at.exception
    assert {key: at.slider(key=key).value for key in COMPARE_DEFAULTS} == COMPARE_DEFAULTS


def test_a_value_the_visitor_chose_still_follows_them_to_the_next_page():
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params["model"] = explorer.DEFAULT_DECODER
    at.run()
    at.switch_page("pages/beam_search.py").run()
    at.slider(key="steps").set_value(5).run()
    at.switch_page("pages/compare_strategies.py").run()
    assert at.slider(key="steps").value == 5
    assert at.slider(key="beams").value == COMPARE_DEFAULTS["beams"]


# -- item 17: one convention for layers, one unit for entropy, one name per score --------------------------------


def test_the_lens_and_the_tokens_page_count_layers_from_0_as_the_heatmaps_do():
    """The heatmaps' "layer 0" is the first layer; the lens's rows and the context curve say the same."""
    lm = explorer.load_model(explorer.DEFAULT_DECODER, device="cpu")
    expected = ["embeddings", *(f"layer {layer}" for layer in range(lm.num_layers))]
    at = open_page("pages/logit_lens.py", model=explorer.DEFAULT_DECODER)
    lens = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert lens["layout"]["yaxis"]["ticktext"] == expected[::-1]  # the last layer on top
    assert json.loads(at.get("plotly_chart")[1].proto.spec)["data"][0]["x"] == expected
    assert "“layer 0” is the first layer" in words(at)
    settled = re.search(r"from after layer (\d+) on", words(at))
    assert settled is None or int(settled.group(1)) < lm.num_layers
    # The case, on the model it was found on (the previous default decoder): "like" is one token there.
    old = explorer.load_model(explorer.PROSE_GPT2, device="cpu")
    at = open_page("pages/tokens_embeddings.py", model=explorer.PROSE_GPT2, word="like")
    context = json.loads(at.get("plotly_chart")[-1].proto.spec)
    assert context["data"][0]["x"] == ["embeddings", *(f"layer {layer}" for layer in range(old.num_layers))]
    assert context["layout"]["xaxis"]["title"]["text"] == "residual stream after"
    said = words(at)  # "like" grows more alike here (0.794 -> 0.929): the page said it "drifts apart"
    assert "0.794 after the embeddings" in said and "it rises by 0.135" in said and "drifts apart" not in said
    heatmaps = open_page("pages/attention_heatmaps.py", model=explorer.DEFAULT_DECODER)
    assert heatmaps.slider(key="layer").min == 0 and heatmaps.slider(key="layer").max == lm.num_layers - 1


UNIT = re.compile(r"entropy[^.]{0,60}?\b(bits|nats)\b", re.IGNORECASE | re.DOTALL)


def test_every_entropy_the_pages_and_figures_show_is_in_nats():
    files = [*ROOT.glob("pages/*.py"), *ROOT.glob("explorer/render/*.py"), *ROOT.glob("explorer/compute/*.py")]
    units = {path.name: {unit.lower() for unit in UNIT.findall(path.read_text())} for path in files}
    assert set().union(*units.values()) == {"nats"}, units
    at = open_page("pages/head_statistics.py")
    assert "entropy (nats)" in at.dataframe[0].value.columns
    assert "bits" not in words(at).replace("32 bits", "")


def test_head_types_name_each_score_once():
    """The radio and the table call the first-token score the same ("sink" was the radio's word)."""
    at = open_page("pages/head_types.py", model=explorer.DEFAULT_DECODER)
    # Issue 41: as the page opens (n 20, seed 0, induction), the default decoder's induction head beside the baseline
    found = explorer.head_probes(explorer.load_model(explorer.DEFAULT_DECODER, device="cpu"), n=20, seed=0)
    said = probes.best_caption(found, "induction")
    assert said in [caption.value for caption in at.caption]
    assert said.startswith("Layer 4, head 3 stands out as an induction head") and "0.899 against 0.034" in said
    radio = at.radio(key="probe")
    table = at.dataframe[0].value
    assert set(radio.options) <= set(table.columns)
    assert "sink" not in radio.options and "First token" in radio.options
    radio.set_value("sink").run()  # the link's word stays the same
    assert at.query_params["probe"] == ["sink"] or at.query_params["probe"] == "sink"


# -- item 18: cross-attention's rows explained where presentation mode explains --------------------------------


def explained(at: AppTest) -> str:
    """The words inside presentation mode's "What am I looking at?"."""
    found = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        popover = getattr(proto, "popover", None) if proto is not None and hasattr(proto, "HasField") else None
        if popover is not None and proto.HasField("popover") and popover.label.startswith("What am I"):
            found.append(words(SimpleNamespace(_tree=node)))
            return
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(found)


def test_cross_attention_explains_that_each_decoder_row_writes_the_next_token():
    at = open_page(
        "pages/attention_heatmaps.py", model=explorer.DEFAULT_SEQ2SEQ, stack="cross", layer="1", present="true"
    )
    assert not at.exception
    said = explained(at)
    assert "Each row is the token from which the decoder predicts the next one" in said
    assert "row “-” reads “ March” (1.00) because it writes “03”" in said
