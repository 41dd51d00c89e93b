"""WCAG 2.1 AA for the app's own parts, without a browser: what axe-core checks on the drawn pages
(tests/axe.py, in tests/test_browser_projector.py and tests/test_browser_lecture.py) and what it cannot see.

BertViz's frames say their language, label their menus and colour every head apart; every page has its own title;
the menu is a navigation landmark of lists with the shown page marked; the decoding pages' clicks and the sampling
panels' drag have a keyboard's way to the same result.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import explorer
from explorer.compute.sampling import distribution_from_logits
from explorer.render import bertviz, heatmap, patching, style, vectors
from explorer.render.bertviz import head_view_html, model_view_html
from explorer.render.decoding import candidates_figure
from explorer.render.lens import lens_figure
from explorer.render.sampling import distribution_panels
from explorer.render.style import FigureInfo, Look
from explorer.ui import aria, branching, navigation
from tests.figures import written, written_colour
from tests.test_bertviz import _embedded


@pytest.mark.parametrize("view", [head_view_html, model_view_html])
def test_bertvizs_frames_say_their_language_and_name_their_menus(minilm, view):
    """axe-core's html-has-lang and select-name, on every document the views make (pairs get a filter menu)."""
    page = view(explorer.capture(minilm, "time flies like an arrow", text_pair="fruit flies like a banana"))
    assert page.startswith('<!DOCTYPE html>\n<html lang="en">')
    markup = page.split("<script")[0]  # the document's own elements (the libraries' code mentions <select too)
    assert markup.count("</select></label>") == markup.count("<select") >= 1  # each inside its label


def test_every_head_and_layer_of_bertviz_has_a_colour_of_its_own(minilm):
    """BertViz colours heads with d3's ten colours: MiniLM's heads 10 and 11 took heads 0 and 1's."""
    capture = explorer.capture(minilm, "time flies like an arrow")
    page = head_view_html(capture)
    colours = _embedded(page)["colours"]
    assert capture.main.num_heads == 12
    assert len(colours) == len(set(colours)) == 12
    assert "window.d3.schemeCategory10 = packed.colours" in page  # what BertViz's code reads them from


def test_the_model_view_fits_its_frames_width():
    """BertViz draws it 970 px wide: scaled down to the frame's width, never up."""
    assert "Math.min(1, room / 970)" in bertviz._FIT_WIDTH and "resize" in bertviz._FIT_WIDTH


def test_every_page_has_a_title_of_its_own():
    titles = {navigation.page_title(title) for _, _, title, _ in navigation.PAGES}
    assert len(titles) == len(navigation.PAGES)
    assert navigation.page_title("Beam search") == "Beam search · Attention & Decoding Explorer"


def test_the_menu_is_a_landmark_of_lists_marking_the_shown_page():
    rules = {rule["selector"]: rule for rule in navigation.menu_rules("Beam search")}
    assert rules[".st-key-menu"]["attributes"] == {"role": "navigation", "aria-label": "Pages"}
    assert rules["[class*='st-key-menu-list-']"]["attributes"] == {"role": "list"}
    current = rules[".st-key-menu a[data-testid='stPageLink-NavLink']"]
    assert current == {**current, "attributes": {"aria-current": "page"}, "label": "Beam search"}


def test_the_decks_arrows_have_names_and_the_slide_and_verdict_are_announced():
    rules = {rule["selector"]: rule["attributes"] for rule in aria.RULES}
    assert rules[".st-key-previous button"] == {"aria-label": "Previous slide"}
    assert rules[".st-key-next button"] == {"aria-label": "Next slide"}
    assert rules[".st-key-lecture-title"]["aria-live"] == "polite"
    assert rules[".st-key-lecture-verdict"]["aria-live"] == "polite"


@pytest.fixture(scope="module")
def prose():
    return explorer.load_model(explorer.DEFAULT_DECODER, device="cpu")


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_every_candidate_a_click_can_branch_at_can_be_picked_by_name(prose, strategy):
    """The keyboard's list (``branch_points``) holds what a click on the figure branches at, and picking one forces
    the same tokens as the click: the tokens chosen before it, then it."""
    settings = {"num_beams": 3} if strategy == "beam" else {}
    trace = explorer.decode(prose, "It was a dark and", strategy=strategy, max_new_tokens=3, **settings)
    points = branching.branch_points(trace)
    if strategy == "greedy":
        assert len(points) == sum(len(step.candidate_ids[0]) for step in trace.steps)
        label = next(name for name in points if name.startswith("step 2:") and "#2)" in name)
        step = trace.steps[1]
        assert branching._branch_at(trace, points[label]) == (
            int(trace.steps[0].chosen_ids[0]),
            int(step.candidate_ids[0][1]),
        )
    else:
        assert len(points) == len(trace.tree) - 1  # every node but the prompt
        node = trace.tree[-1]
        branch = branching._branch_at(trace, points[next(n for n in points if n.endswith(f"(node {node.id})"))])
        assert branch[-1] == node.token_id and len(branch) == node.step + 1


def test_the_keyboards_band_is_the_panels_selection():
    """A band picked with the keyboard opens the panels with the same selection a drag across them makes."""
    logits = np.random.default_rng(0).normal(size=500).astype(np.float32)
    distribution = distribution_from_logits(logits, tuple(f"t{i}" for i in range(500)))
    info = FigureInfo("Next-token distribution")
    [param] = [
        p for p in distribution_panels(distribution, info=info, band=(-3, -1)).spec["params"] if p["name"] == "band"
    ]
    assert param["value"] == {"x": [-3.0, -1.0]}
    [param] = [p for p in distribution_panels(distribution, info=info).spec["params"] if p["name"] == "band"]
    assert "value" not in param


def test_numbers_written_in_cells_reach_4_5_to_1_on_every_colour_of_the_scale():
    """Plotly's automatic cell text (#444 or white, by a brightness threshold) fell to 3.6:1 on mid-blue cells."""
    fills = [style.scale_colour(style.SEQUENTIAL, i / 200) for i in range(201)]
    assert min(style.contrast_ratio(fill, style.cell_text_colour(fill)) for fill in fills) >= 4.5
    assert style.contrast_ratio("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)  # WCAG's own example


def test_an_attention_heatmap_writes_each_value_in_its_cells_readable_colour():
    weights = np.array([[1.0, np.nan], [0.45, 0.55]], dtype=np.float32)
    figure = heatmap.token_matrix(weights, ["a", "b"], ["a", "b"], info=FigureInfo("Attention"), masked_label="−∞")
    values, masked = figure.data
    assert values.texttemplate == '<span style="color:%{text}">%{z:.2f}</span>'
    fills = [[style.scale_colour(style.SEQUENTIAL, v) if v == v else "" for v in row] for row in weights.tolist()]
    assert [list(row) for row in values.text] == [
        [style.cell_text_colour(fill) if fill else "" for fill in row] for row in fills
    ]
    assert style.contrast_ratio(heatmap.MASKED_GREY, masked.texttemplate.split("color:")[1][:7]) >= 4.5


def test_the_panels_cut_rules_are_hidden_from_screen_readers():
    """An empty rule (a cut that is off) was an unnamed graphics-symbol (axe-core's svg-img-alt); its label names it
    when it is drawn."""
    logits = np.random.default_rng(0).normal(size=50).astype(np.float32)
    spec = distribution_panels(distribution_from_logits(logits), info=FigureInfo("Next-token distribution")).spec
    rules = [layer["mark"] for layer in spec["hconcat"][1]["layer"] if layer["mark"]["type"] == "rule"]
    assert len(rules) == 2 and all(mark["aria"] is False for mark in rules)


def test_picking_a_candidate_by_keyboard_branches_as_a_click_does(prose):
    """On the greedy page, the "Branch at a candidate" list forces what a click on that candidate forces."""
    from tests.test_app_decoding import PROMPT, open_page

    own = explorer.decode(prose, PROMPT, strategy="greedy", max_new_tokens=6, top_n=5)
    at = open_page("pages/greedy_search.py", steps="6")
    picked = next(box for box in at.selectbox if box.label == "Branch at a candidate")
    label = next(name for name in picked.options if name.startswith("step 3:") and "#2)" in name)
    picked.set_value(label).run()
    assert not at.exception
    chosen = [int(own.steps[0].chosen_ids[0]), int(own.steps[1].chosen_ids[0]), int(own.steps[2].candidate_ids[0][1])]
    assert at.query_params["force"] == ",".join(map(str, chosen))


def test_the_sampling_page_offers_the_band_by_keyboard_and_draws_it():
    from tests.test_app_decoding import open_page

    at = open_page("pages/sampling.py")
    band = next(slider for slider in at.select_slider if slider.label.startswith("Highlight tokens"))
    band.set_range(-3, -1).run()
    assert not at.exception
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert next(p for p in spec["params"] if p["name"] == "band")["value"] == {"x": [-3.0, -1.0]}


def test_the_patching_map_writes_each_value_in_its_cells_readable_colour():
    recovered = np.array([[-1.0, -0.3], [0.0, 0.5], [1.0, 0.8]])
    figure = patching.patching_map(
        recovered, ["a", "b", "c"], ["x", "y"], row_title="r", column_title="c", what="w", info=FigureInfo("Patching")
    )
    trace = figure.data[0]
    fills = [[style.scale_colour(patching.DIVERGING, (v + 1) / 2) for v in row] for row in recovered.tolist()]
    assert [list(row) for row in trace.text] == [[style.cell_text_colour(fill) for fill in row] for row in fills]
    assert trace.texttemplate == '<span style="color:%{text}">%{z:.2f}</span>'
    assert min(style.contrast_ratio(f, style.cell_text_colour(f)) for row in fills for f in row) >= 4.5


def _cell_fill(trace, value: float) -> str:
    """A heatmap cell's colour, from the trace's spec (its colour scale between zmin and zmax); where it has no cell
    (NaN), the plot's white background."""
    if not math.isfinite(value):
        return "#ffffff"
    scale = [[position, colour] for position, colour in trace.colorscale]
    return style.scale_colour(scale, (value - trace.zmin) / (trace.zmax - trace.zmin))


def _written_on_cells(trace) -> list[tuple[str | None, str]]:
    """(text colour, cell colour) of every cell a heatmap writes in: its texttemplate filled with the cell's text
    (None where the text takes Plotly's automatic colour), and the cell's colour."""
    values = np.asarray(trace.z, dtype=np.float64).tolist()
    return [
        (written_colour(trace.texttemplate, text), _cell_fill(trace, value))
        for row, texts in zip(values, trace.text, strict=True)
        for value, text in zip(row, texts, strict=True)
    ]


def _assert_readable(pairs) -> None:
    assert pairs and all(colour is not None for colour, _ in pairs)  # no text left to Plotly's automatic colour
    assert min(style.contrast_ratio(colour, fill) for colour, fill in pairs) >= 4.5


@pytest.fixture(scope="module")
def greedy_12(prose):
    return explorer.decode(prose, "It was a dark and", strategy="greedy", max_new_tokens=12)


def test_the_candidate_grid_writes_each_label_in_its_cells_readable_colour(greedy_12):
    """Upright labels (the heatmap's text) and labels turned upright in narrow cells (annotations) alike: Plotly's
    automatic colour, and the turned labels' INK on cells below 68% of the darkest, fell under 4.5:1."""
    upright = candidates_figure(greedy_12, info=FigureInfo("Candidates"))
    grid = upright.data[0]
    assert grid.texttemplate == "%{text}" and upright.layout.plot_bgcolor == "white"
    _assert_readable(_written_on_cells(grid))
    assert "<br>" in written(grid.text[0][0])  # the token and its probability, both in the cell's colour
    turned = candidates_figure(greedy_12, info=FigureInfo("Candidates"), look=Look(560, 900))
    grid, notes = turned.data[0], turned.layout.annotations
    assert not grid.texttemplate and len(notes) == grid.z.size
    steps = list(grid.x)
    _assert_readable([(note.font.color, _cell_fill(grid, grid.z[note.y - 1][steps.index(note.x)])) for note in notes])


def test_the_logit_lens_writes_each_top_token_in_its_cells_readable_colour(prose):
    for text in ("It was a dark and stormy night", "The old house on the hill was"):
        lens = explorer.logit_lens(prose, text)
        figure = lens_figure(lens.top_tokens, lens.top_logprobs, lens.tokens, info=FigureInfo("Lens"))
        cells = figure.data[0]
        assert cells.texttemplate == "%{text}"
        _assert_readable(_written_on_cells(cells))
        top = np.asarray(lens.top_logprobs)[-1, :, 0]  # the last layer, drawn as the first row
        assert [written(t) for t in cells.text[0]] == [
            style.escape(style.abbreviate(lens.top_tokens[-1][p][0], 6)) for p in range(len(lens.tokens))
        ]
        np.testing.assert_allclose(cells.z[0], np.exp(top), rtol=1e-5)


def test_the_attention_steps_write_each_score_in_its_cells_readable_colour():
    """Scores over the whole diverging scale (mid-blue cells included) and a masked key's −∞ on the white plot; the
    weights' numbers inside their bar and beside it."""
    keys = 9
    scores = np.linspace(-3.0, 3.0, keys)[None, :]
    masked = np.where(np.arange(keys) < keys - 1, scores, -np.inf)
    weights = np.array([[0.9, 0.05, 0.02, 0.01, 0.01, 0.005, 0.003, 0.002, 0.0]])
    rng = np.random.default_rng(0)
    query, key_vectors = rng.normal(size=8), rng.normal(size=(keys, 8))
    tokens = [f"t{i}" for i in range(keys)]
    steps = vectors.step_by_step_figure(
        {"dot": scores, "scaled": scores / 2, "masked": masked, "weights": weights},
        query,
        key_vectors,
        None,
        tokens,
        0,
        info=FigureInfo("Steps"),
    )
    neuron = vectors.neuron_view_figure(
        query, key_vectors, {"dot": scores[0], "masked": masked[0]}, weights[0], tokens, "t0", info=FigureInfo("N")
    )
    for figure in (steps, neuron):
        columns = [t for t in figure.data if t.type == "heatmap" and t.texttemplate]
        pairs = [pair for column in columns for pair in _written_on_cells(column)]
        assert len(columns) >= 2 and {colour for colour, _ in pairs} == {style.CELL_TEXT_DARK, style.CELL_TEXT_LIGHT}
        _assert_readable(pairs)
        assert [written(row[0]) for row in columns[-1].text][-1] == "−∞"
        [bars] = [t for t in figure.data if t.type == "bar"]
        assert style.contrast_ratio(bars.insidetextfont.color, bars.marker.color) >= 4.5
        assert style.contrast_ratio(bars.outsidetextfont.color, "#ffffff") >= 4.5
