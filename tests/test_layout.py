"""The fast layout helpers give exactly what Plotly's own update methods give; the templated Vega-Lite panels
give the chart Altair builds."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from plotly.subplots import make_subplots

from explorer.compute.sampling import distribution_from_logits
from explorer.render.layout import (
    Draft,
    PlotlySpec,
    annotation_font,
    batched,
    relayout,
    subplots,
    subplots_draft,
    update_axes,
)
from explorer.render.sampling import (
    _panels_template,
    _powers_of_ten,
    distribution_panels,
    stages_figure,
    temperature_figure,
)
from explorer.render.style import SCREEN, SLIDE, FigureInfo, altair_title, presentation_look, screen_look
from explorer.render.vega import VegaLite, filled
from explorer.ui.figures import _AsBuilt
from tests.figures import decode_plotly_array

CHANGES = [
    {"margin": {"l": 10, "t": 40}, "showlegend": False},
    {"title": {"text": "a", "font": {"size": 30}}, "paper_bgcolor": "white"},
    {"title": {"font": {"color": "#123456"}}, "legend": {"orientation": "h"}},
    {"shapes": [{"type": "line", "x0": 0, "x1": 1, "y0": 0, "y1": 1}]},
]
AXIS_CHANGES = [
    ({"tickfont": {"size": 18}, "autorange": "reversed"}, {}),
    ({"title": {"text": "step"}, "tickvals": [1, 2, 3]}, {"row": 1, "col": 2}),
    ({"title": {"font": {"size": 9}}}, {"row": 2, "col": 1}),
    ({"visible": False}, {"row": 2, "col": 3}),
]


def _subplots():
    figure = make_subplots(rows=2, cols=3, subplot_titles=list("abcdef"), shared_yaxes=True)
    for row in (1, 2):
        for col in (1, 2, 3):
            figure.add_trace(go.Bar(x=[1, 2], y=[row, col]), row=row, col=col)
    return figure


@pytest.mark.parametrize("make", [go.Figure, _subplots], ids=["plain", "subplots"])
def test_relayout_and_update_axes_equal_plotlys_own_updates(make):
    ours, theirs = make(), make()
    for changes in CHANGES:
        relayout(ours, changes)
        theirs.update_layout(changes)
    for axis in ("x", "y"):
        for changes, where in AXIS_CHANGES:
            if where and make is go.Figure:
                continue
            update_axes(ours, axis, changes, **where)
            (theirs.update_xaxes if axis == "x" else theirs.update_yaxes)(changes, **where)
    assert ours.to_dict() == theirs.to_dict()


def test_batched_changes_are_assigned_once_and_equal_unbatched_ones():
    batched_figure, plain = _subplots(), _subplots()
    with batched(batched_figure):
        for changes in CHANGES:
            relayout(batched_figure, changes)
        update_axes(batched_figure, "y", {"title": {"text": "rank"}}, row=2, col=1)
        annotation_font(batched_figure, {"size": 11, "color": "#000000"})
        assert batched_figure.layout.showlegend is None  # nothing assigned yet
    for changes in CHANGES:
        relayout(plain, changes)
    plain.update_yaxes({"title": {"text": "rank"}}, row=2, col=1)
    for annotation in plain.layout.annotations:
        annotation.font = {"size": 11, "color": "#000000"}
    assert batched_figure.to_dict() == plain.to_dict()
    assert batched_figure.layout.showlegend is False


def test_a_wrong_property_still_fails_as_in_plotly():
    with pytest.raises(ValueError):
        relayout(go.Figure(), {"width": "wide"})
    with pytest.raises(ValueError):
        update_axes(go.Figure(), "x", {"no_such_property": 1})


@pytest.fixture(scope="module")
def distribution():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=3000).astype(np.float32) * 3
    tokens = tuple(f"t{i}" for i in range(3000))
    return lambda **cuts: distribution_from_logits(logits, tokens, **cuts)


INFO = FigureInfo("Next-token distribution", model="m", text="It was a", where=("T = 0.7",))


def test_panels_carry_the_drawn_rows_and_cuts_as_named_datasets(distribution):
    chart = distribution_panels(distribution(temperature=0.7, top_k=20, top_p=0.8), info=INFO, look=SCREEN)
    assert isinstance(chart, VegaLite)
    spec = chart.to_dict()
    data = spec["datasets"]
    assert sum(row["tokens"] for row in data["histogram"]) == 3000  # every token with p > 0, in some band
    assert data["top_k"][0]["k"] == 20 and data["top_p"][0]["p"] == pytest.approx(0.8)
    assert spec["title"]["text"] == INFO.title() and spec["usermeta"]["file_stem"] == INFO.file_stem()
    json.loads(chart.to_json())  # what the exports send the renderer
    off = distribution_panels(distribution(temperature=0.7), info=INFO, look=SCREEN).to_dict()["datasets"]
    assert off["top_k"] == [] and off["top_p"] == []  # the cut marks draw nothing when the cut is off


def test_panels_match_an_altair_chart_and_templates_are_never_shared_by_reference(distribution):
    first = distribution_panels(distribution(temperature=0.5), info=INFO, look=SLIDE)
    first.to_dict()["hconcat"][0]["width"] = 1  # a caller editing its copy
    second = distribution_panels(distribution(temperature=2.0), info=INFO, look=SLIDE)
    assert second.spec["hconcat"][0]["width"] > 1
    assert second.spec["datasets"]["histogram"] != first.spec["datasets"]["histogram"]
    altair_chart = second.to_altair()  # for notebooks: Altair reads the spec back (and it validates)
    altair_chart.to_dict(validate=True)
    assert altair_chart.to_dict(validate=False)["hconcat"] == second.spec["hconcat"]


@pytest.mark.parametrize(
    "grid",
    [
        {"rows": 1, "cols": 3, "shared_yaxes": True, "horizontal_spacing": 0.03, "subplot_titles": ["a", "b", "c"]},
        {"rows": 2, "cols": 4, "column_widths": [4, 4, 1, 1.4], "row_heights": [1, 5], "vertical_spacing": 0.04},
        {"rows": 2, "cols": 1, "row_heights": [0.78, 0.22], "shared_xaxes": True},
    ],
)
def test_subplots_equal_make_subplots_and_place_traces_alike(grid):
    ours, theirs = subplots(**grid), make_subplots(**grid)
    for figure in (ours, theirs):
        figure.add_trace(go.Bar(x=[1], y=[2]), row=grid["rows"], col=grid["cols"])
        figure.update_xaxes(title="last", row=grid["rows"], col=grid["cols"])
    assert ours.to_dict() == theirs.to_dict()


@pytest.mark.parametrize(
    "titles", [["T = 0.5", "T = 0.8 (yours)", "T = 1", "T = 2"], ["a", "", "c", "d"], ["only one"], None]
)
def test_a_draft_equals_the_figure_built_trace_by_trace(titles):
    """Draft and subplots_draft (dicts validated once) give the figure make_subplots, add_trace and Plotly's own
    update methods give, whatever the titles (empty ones have no annotation, as in Plotly)."""
    grid = {"rows": 1, "cols": 4, "shared_yaxes": True, "horizontal_spacing": 0.03}
    for _ in range(2):  # the second draft comes from the cached grid
        draft = subplots_draft(**grid, subplot_titles=titles)
        theirs = make_subplots(**grid, subplot_titles=titles)
        for column in range(1, 5):
            bar = {"type": "bar", "x": np.arange(3.0) * column, "y": list("xyz"), "orientation": "h"}
            draft.add(bar, col=column)
            theirs.add_trace(go.Bar({k: v for k, v in bar.items() if k != "type"}), row=1, col=column)
        relayout(draft, showlegend=False, margin={"l": 110})
        update_axes(draft, "x", range=[0, 1], tickformat=".0%")
        annotation_font(draft, {"size": 18})
        theirs.update_layout(showlegend=False, margin={"l": 110})
        theirs.update_xaxes(range=[0, 1], tickformat=".0%")
        theirs.update_annotations(font={"size": 18})
        assert draft.figure().to_dict() == theirs.to_dict()
    plain = Draft()
    plain.add({"type": "scatter", "x": [1, 2], "y": [3, 4], "name": "s"})
    relayout(plain, title={"text": "t"})
    assert plain.figure().to_dict() == go.Figure(go.Scatter(x=[1, 2], y=[3, 4], name="s"), {"title": "t"}).to_dict()


def _as_plotly_js_reads_it(value):
    # JSON as the browser parses it, typed arrays ({"dtype", "bdata"}) and number lists alike as float32 lists.
    if isinstance(value, dict) and "bdata" in value:
        return decode_plotly_array(value).astype(np.float32).tolist()
    if isinstance(value, dict):
        return {key: _as_plotly_js_reads_it(item) for key, item in value.items()}
    if isinstance(value, list) and value and all(isinstance(x, int | float) and not isinstance(x, bool) for x in value):
        return np.asarray(value, dtype=np.float32).tolist()
    if isinstance(value, list):
        return [_as_plotly_js_reads_it(item) for item in value]
    return value


SPEC_CASES = [
    (temperature_figure, {"current": None}, SCREEN),
    (temperature_figure, {"current": 0.7}, SCREEN),
    (temperature_figure, {"current": 1.0}, SLIDE),
    (temperature_figure, {"current": 2.95, "temperatures": (0.25, 1.0)}, presentation_look(1280, 560)),
    (stages_figure, {"temperature": 0.7, "top_k": 20, "top_p": 0.8, "min_p": 0.05}, SCREEN),
    (stages_figure, {}, SLIDE),
    (stages_figure, {"temperature": 3.0, "top_p": 0.01}, presentation_look(1920, 900)),
]


@pytest.mark.parametrize(("builder", "options", "look"), SPEC_CASES)
@pytest.mark.parametrize("labels", ["plain", "hostile"])
def test_what_the_page_sends_of_a_spec_is_the_validated_figure(builder, options, look, labels):
    """A ``PlotlySpec`` reaches Streamlit unvalidated (issue 13): for every figure built that way, the JSON
    Streamlit sends is the JSON of the figure Plotly validates, value for value, and exports draw the latter."""
    rng = np.random.default_rng(len(options))
    logits = rng.normal(size=500).astype(np.float32) * 3
    tokens = tuple(f"t{i}" if labels == "plain" else f"<b>{i}</b> \x17 \u202e https://x.invalid $" for i in range(500))
    if builder is temperature_figure:
        spec = builder(logits, tokens, **options, info=INFO, look=look)
    else:
        spec = builder(distribution_from_logits(logits, tokens, **options), info=INFO, look=look)
    assert isinstance(spec, PlotlySpec)
    validated = json.loads(spec.figure().to_json())
    sent = json.loads(pio.to_json(_AsBuilt(spec).to_dict(), validate=False))
    assert _as_plotly_js_reads_it(sent) == _as_plotly_js_reads_it(validated)
    assert sent["layout"]["template"] == validated["layout"]["template"]  # a named template is resolved


def test_a_spec_with_a_wrong_property_fails_when_validated():
    broken = PlotlySpec({"data": [{"type": "bar", "x": [1], "no_such_property": 1}], "layout": {}})
    with pytest.raises(ValueError):
        broken.figure()


@pytest.mark.parametrize(
    "look", [SCREEN, SLIDE, presentation_look(1280, 560), screen_look(744, 500), screen_look(1304, 900)]
)
def test_panels_at_any_window_size_equal_the_chart_built_for_that_size(distribution, look):
    """One template per text size serves every window (each student's browser reports its own size): the panels
    equal those of a template built for that exact size."""
    chart = distribution_panels(distribution(temperature=0.7, top_p=0.9), info=INFO, look=look)
    built = _panels_template.__wrapped__(look, tuple(_powers_of_ten(3000)))
    assert chart.spec == filled(built, chart.spec["datasets"], **altair_title(INFO, look)).spec
    before = _panels_template.cache_info().currsize
    for width in (800, 960, 1200):
        distribution_panels(distribution(), info=INFO, look=dataclasses.replace(look, width=width))
    assert _panels_template.cache_info().currsize <= before + 1
