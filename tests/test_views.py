"""Views (issue 26 §2): every page draws its figures through explorer.views, and what a page shows is its view's
figure of the gateway's result, at the look a page gets before its window is measured."""

from __future__ import annotations

import ast
import json

import plotly.io as pio
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer import gateway, views
from explorer.render.layout import PlotlySpec
from explorer.render.style import look_for
from explorer.ui.attention import DEFAULT_TEXT
from explorer.ui.decoding import default_prompt
from tests.browser import ROOT

PAGES = sorted((ROOT / "pages").glob("*.py"))
DECODER = explorer.DEFAULT_DECODER
ENCODER = explorer.DEFAULT_ENCODER
PROMPT = default_prompt(DECODER)
TIMEOUT = 120


def _imports(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names += [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _calls(tree: ast.AST) -> set[str]:
    """The attribute or function names a page calls (``ui.show_view(...)`` -> "show_view")."""
    called = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            function = node.func
            called.add(function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", ""))
    return called


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_a_page_draws_only_through_views(page):
    tree = ast.parse(page.read_text(), filename=str(page))
    render = [name for name in _imports(tree) if name == "explorer.render" or name.startswith("explorer.render.")]
    assert render == []  # no render function called from a page: its view holds the call
    assert not _calls(tree) & {"figure_builder", "show_figure"}
    # Its views: explorer.views', or a lecture deck's slides' (the Lecture page)
    assert (
        "explorer.views" in " ".join(_imports(tree))
        or "explorer.lecture" in " ".join(_imports(tree))
        or "views"
        in {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    )


def test_the_ui_draws_a_figure_only_through_show_view():
    """Besides figures.py (show_figure itself) and results.py (show_view), no ui module draws a figure of its own
    (the step-by-step page's chapter toy went through ui/steps.py)."""
    drawing = {"figure_builder", "show_figure"}
    for path in sorted((ROOT / "explorer" / "ui").glob("*.py")):
        if path.stem not in {"figures", "results", "__init__"}:
            assert not _calls(ast.parse(path.read_text())) & drawing, path.name


def test_every_view_module_is_one_feature_and_imports_no_streamlit():
    modules = {path.stem for path in (ROOT / "explorer" / "views").glob("*.py")} - {"__init__", "display"}
    assert modules == {
        "ablation",
        "anatomy",
        "attention",
        "attribution",
        "decoding",
        "kv_cache",
        "lens",
        "patching",
        "probes",
        "sampling",
        "tokens",
    }
    for module in modules:
        tree = ast.parse((ROOT / "explorer" / "views" / f"{module}.py").read_text())
        assert not [name for name in _imports(tree) if name.startswith(("streamlit", "explorer.ui"))]


def _open(page: str, **params) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params.update(params)
    at.run()
    at.switch_page(page)
    at.run()
    assert not at.exception
    return at


def _shown(at: AppTest, index: int = 0) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


def _drawn(view, result) -> dict:
    """The view's figure of ``result`` as Streamlit sends it, at the look of a window not yet measured."""
    figure = view.figure(result)(look=look_for(None, None, presentation=False))
    sent = figure.sent() if isinstance(figure, PlotlySpec) else figure.to_dict()
    return json.loads(pio.to_json(sent, validate=False))


def _same(shown: dict, drawn: dict) -> None:
    assert shown["data"] == drawn["data"]
    assert shown["layout"] == drawn["layout"]


def test_the_heatmap_page_shows_its_heads_view():
    at = _open("pages/attention_heatmaps.py", model=ENCODER, text=DEFAULT_TEXT, layer="1", head="2")
    view = views.attention.Head(ENCODER, DEFAULT_TEXT, layer=1, head=2)
    _same(_shown(at), _drawn(view, gateway.run("capture", ENCODER, DEFAULT_TEXT)))


def test_the_neuron_page_shows_its_view():
    at = _open("pages/neuron_view.py", model=ENCODER, text=DEFAULT_TEXT)
    view = views.attention.Neuron(ENCODER, DEFAULT_TEXT)
    _same(_shown(at), _drawn(view, view.result()))


def test_the_sampling_page_shows_its_distribution_view():
    # The linked panels are Vega-Lite, which Streamlit renames its views in; the other two views, one at a time:
    temperatures = views.sampling.Temperatures(DECODER, PROMPT)
    at = _open("pages/sampling.py", model=DECODER, prompt=PROMPT, view="temperatures")
    _same(_shown(at, 0), _drawn(temperatures, temperatures.result()))
    stages = views.sampling.Stages(DECODER, PROMPT)
    at = _open("pages/sampling.py", model=DECODER, prompt=PROMPT, view="stages")
    _same(_shown(at, 0), _drawn(stages, stages.result()))


def test_the_greedy_page_shows_its_view():
    at = _open("pages/greedy_search.py", model=DECODER, prompt=PROMPT, steps="4")
    trace = gateway.run("decode", DECODER, PROMPT, strategy="greedy", max_new_tokens=4, top_n=5)
    _same(_shown(at), _drawn(views.decoding.Greedy(DECODER, PROMPT), trace))


def test_the_patching_page_shows_its_views():
    at = _open("pages/patching.py", model=DECODER)
    residual = views.patching.Residual(DECODER, "The girl was sure that", "The boy was sure that")
    result = residual.result()
    for index, view in enumerate(
        (residual, views.patching.Heads(*_fields(residual)), views.patching.Mlp(*_fields(residual)))
    ):
        _same(_shown(at, index), _drawn(view, result))


def _fields(view) -> tuple:
    return (view.model, view.clean, view.corrupted, view.answer, view.counterfactual)


def test_the_why_this_token_page_shows_its_view():
    """The bars are the view's figure of the gateway's result; the shaded text is the view's HTML of it."""
    at = _open("pages/why_this_token.py", model=DECODER)
    text = "Elizabeth knew that"
    top = int(gateway.run("attribution targets", DECODER, text, 10).ids[0])
    steps = gateway.model(DECODER).integrated_gradients_steps  # what the page opens at, for this architecture
    view = views.attribution.Scores(DECODER, text, top, steps=steps)
    result = view.result()
    _same(_shown(at), _drawn(view, result))
    shaded = [element.proto.body for element in at.get("html") if "attribution-text" in element.proto.body]
    assert shaded == [view.html(result, font_size=20)]


def test_the_shaded_text_escapes_every_label_and_colours_by_sign():
    from explorer.render.attribution import shaded_text_html

    shaded = shaded_text_html(
        ['<img src=x onerror="alert(1)">', " & so", "\u202e"], [-2.0, 0.0, 1.0], target_token="<b>"
    )
    assert "<img" not in shaded and "<b>" not in shaded and "\u202e" not in shaded
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;: -2.0000" in shaded and "&amp; so" in shaded
    assert shaded.count("<span") == 3 and "background:rgb(33, 102, 172)" in shaded  # -max: the scale's blue end


def test_the_attribution_views_steps_bounds_are_the_librarys():
    from explorer.models import attribution

    assert (views.attribution.MIN_STEPS, views.attribution.MAX_STEPS) == (attribution.MIN_STEPS, attribution.MAX_STEPS)
    assert tuple(views.attribution.METHODS) == attribution.METHODS


def test_the_lens_and_anatomy_pages_show_their_views():
    at = _open("pages/logit_lens.py", model=DECODER, text=PROMPT)
    lens = views.lens.Lens(DECODER, PROMPT)
    _same(_shown(at), _drawn(lens, lens.result()))
    at = _open("pages/model_anatomy.py", model=DECODER)
    parameters = views.anatomy.Parameters(DECODER)
    _same(_shown(at), _drawn(parameters, parameters.result()))
