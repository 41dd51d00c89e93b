"""Results in Jupyter: docs/tour.ipynb run by a real kernel (nbclient + ipykernel), offline, and the bundles
themselves checked against the app's figures."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys

import nbformat
import numpy as np
import plotly.io as pio
import pytest
from nbclient import NotebookClient
from plotly.offline import get_plotlyjs

import explorer
from explorer.compute.sampling import distribution_from_logits
from explorer.render import notebook
from explorer.render.decoding import beam_tree_figure, candidates_figure
from explorer.render.heatmap import attention_heatmap
from explorer.render.sampling import stages_figure
from explorer.render.style import FigureInfo
from tests.browser import ROOT, chromium, needs_chromium, open_tab
from tests.figures import decode_plotly_array

TOUR = ROOT / "docs" / "tour.ipynb"
RESULTS = tuple(result.__name__ for result in notebook.FIGURES)  # every class that displays as a figure
REMOTE_SCRIPT = re.compile(r"<script[^>]+src=[\"']?(https?:)?//|import\s*[\"'](https?:)?//", re.IGNORECASE)
# Appended to the executed copy only: the kernel's connection guard must answer, or the run proved nothing.
GUARD_PROBE = """import socket
try:
    socket.create_connection(("192.0.2.1", 80), timeout=1)
except OSError as refused:
    print(refused)"""


@pytest.fixture(scope="module")
def executed_tour(tmp_path_factory):
    """The tour as Jupyter runs it: a python3 kernel started in docs/, the checkout on its path (as ``pip install``
    would put the package there), the Hub switched off and, through an IPython startup file, tests/conftest.py's
    guard: a connection that leaves this machine fails."""
    tour = nbformat.read(TOUR, as_version=4)
    assert not any(cell.get("outputs") for cell in tour.cells if cell.cell_type == "code")  # committed clean
    ipython_dir = tmp_path_factory.mktemp("ipython")
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-offline.py").write_text("import tests.conftest  # the Hub off, remote connections refused\n")
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "IPYTHONDIR": str(ipython_dir),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    tour.cells.append(nbformat.v4.new_code_cell(GUARD_PROBE))
    resources = {"metadata": {"path": str(TOUR.parent)}}
    NotebookClient(tour, timeout=600, kernel_name="python3", resources=resources).execute(env=env)
    probe = tour.cells.pop()
    assert "tests are offline" in probe.outputs[0].text  # the guard was live in the kernel
    return tour


def _outputs(tour):
    return [output for cell in tour.cells if cell.cell_type == "code" for output in cell.outputs]


def _results(tour):
    """Outputs that display one of explorer's results, in order."""
    return [o for o in _outputs(tour) if o.get("data", {}).get("text/plain", "").startswith(RESULTS)]


def test_every_cell_of_the_tour_runs(executed_tour):
    code_cells = [cell for cell in executed_tour.cells if cell.cell_type == "code"]
    assert code_cells and all(cell.outputs for cell in code_cells)  # every cell shows something
    assert not [output for output in _outputs(executed_tour) if output.output_type == "error"]
    verify_output = next(c for c in code_cells if c.source.strip() == "cap.verify()").outputs[0]
    assert float(verify_output.data["text/plain"]) < 1e-4


def test_results_display_as_figures_with_plotly_js_once_and_no_cdn(executed_tour):
    shown = _results(executed_tour)
    assert [o.data["text/plain"].split(":")[0] for o in shown] == [
        "AttentionCapture",
        "DecodeTrace",
        "DecodeTrace",
        "TokenDistribution",
    ]
    assert all(notebook.PLOTLY_MIME in o.data and "Plotly.newPlot" in o.data["text/html"] for o in shown)
    library = get_plotlyjs()  # plotly/package_data/plotly.min.js of the installed plotly
    pages = [o.data["text/html"] for o in shown]
    assert [library in page for page in pages] == [True] + [False] * (len(pages) - 1)
    html = [o.data["text/html"] for o in _outputs(executed_tour) if "text/html" in o.get("data", {})]
    assert sum(library in page for page in html) == 1  # nowhere else either
    everything = json.dumps(_outputs(executed_tour))
    assert REMOTE_SCRIPT.search(everything) is None
    # Besides the library (which names cdn.plot.ly for map outlines no figure here draws), no address at all.
    assert not [page for page in pages if re.search(r"https?://", page.replace(library, ""))]
    assert "require.config" not in everything  # no loader that would fetch plotly.js from a CDN


@needs_chromium[0]  # a browser test: marked as such,
@needs_chromium[1]  # and skipped where Debian's chromium is missing
def test_the_tours_html_draws_every_figure_offline(executed_tour):
    """The HTML outputs in order on one page, as the classic Notebook and an HTML export show them: the first one's
    plotly.js draws every figure, and the page asks nothing of the network."""
    pages = [o.data["text/html"] for o in _results(executed_tour)]
    with chromium() as browser:
        tab = open_tab(browser)
        tab.page.set_content("<!doctype html><meta charset='utf-8'><body>" + "\n".join(pages) + "</body>")
        tab.page.wait_for_function(f"document.querySelectorAll('.plotly-graph-div .main-svg').length >= {len(pages)}")
        drawn = tab.page.evaluate("[...document.querySelectorAll('.js-plotly-plot')].map(p => p.data.length)")
    assert len(drawn) == len(pages) and all(drawn)
    assert tab.external == [] and tab.errors == []


@pytest.fixture(scope="module")
def encoder_capture():
    lm = explorer.load_model(explorer.DEFAULT_ENCODER)
    return explorer.capture(lm, "time flies like an arrow", text_pair="fruit flies like a banana")


@pytest.fixture(scope="module")
def decoder():
    return explorer.load_model(explorer.DEFAULT_DECODER)


def _figure_data(figure) -> dict:
    return json.loads(pio.to_json(figure, validate=False))


def _plotted(page: str) -> dict:
    """The data and layout a text/html output hands ``Plotly.newPlot``."""
    decoder = json.JSONDecoder()
    start = re.search(r'Plotly\.newPlot\(\s*"[^"]+",\s*', page).end()
    data, end = decoder.raw_decode(page, start)
    layout, _ = decoder.raw_decode(page, re.match(r",\s*", page[end:]).end() + end)
    return {"data": data, "layout": layout}


def test_a_capture_displays_as_the_apps_heatmap(encoder_capture):
    bundle = encoder_capture._repr_mimebundle_()
    info = FigureInfo(
        "Attention weights",
        model=encoder_capture.model_name,
        text=" ".join(encoder_capture.tokens),
        where=("layer 0", "head 0"),
    )
    expected = attention_heatmap(encoder_capture.main, 0, 0, info=info, segment_b_start=encoder_capture.segment_b_start)
    assert bundle[notebook.PLOTLY_MIME] == _figure_data(expected)
    assert _plotted(bundle["text/html"]) == _figure_data(expected)  # the HTML draws the same figure
    assert bundle["text/plain"] == (
        "AttentionCapture: sentence-transformers/all-MiniLM-L6-v2, 13 tokens, 6 layers × 12 heads, stacks encoder "
        "(shown: layer 0, head 0; any other with explorer.render.attention_heatmap(capture.main, layer, head))"
    )


def test_a_capture_summary_says_what_changes_how_its_numbers_read(encoder_capture):
    grouped = dataclasses.replace(encoder_capture.main, kv_head_of_query=np.arange(12) // 3)
    changed = dataclasses.replace(
        encoder_capture, stacks={"encoder": grouped}, truncated=7, dtype="bfloat16", ablated=(("encoder", 0, 1),)
    )
    summary = changed._repr_mimebundle_(include=["text/plain"])["text/plain"]
    assert "6 layers × 12 heads (4 KV heads; 7 tokens cut to fit; bfloat16; 1 head ablated)" in summary


@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_a_trace_displays_as_the_apps_figure(decoder, strategy):
    extra = {"beam": {"num_beams": 3}, "sample": {"seed": 7, "top_p": 0.9}}.get(strategy, {})
    trace = explorer.decode(decoder, "It is a truth", strategy=strategy, max_new_tokens=4, **extra)
    bundle = trace._repr_mimebundle_()
    build = beam_tree_figure if strategy == "beam" else candidates_figure
    title = {"greedy": "Greedy search", "beam": "Beam search, 3 beams", "sample": "Sampling, seed 7"}[strategy]
    expected = build(trace, info=FigureInfo(title, model=trace.model_name, text=trace.prompt))
    assert bundle[notebook.PLOTLY_MIME] == _figure_data(expected)
    assert bundle["text/plain"].startswith(f"DecodeTrace: bundled/prose-gpt2, {title.lower()}, 4 steps: ")
    assert f"(log-probability {float(trace.sequence_logprobs[0]):.2f})" in bundle["text/plain"]
    assert trace.continuations[0].strip()[:10] in bundle["text/plain"]


def test_a_distribution_displays_as_the_apps_pipeline_figure(decoder):
    distribution = explorer.next_token_distribution(decoder, "It is a truth", temperature=0.7, top_p=0.9)
    bundle = distribution._repr_mimebundle_()
    expected = stages_figure(distribution, info=FigureInfo("Next-token distribution, stage by stage")).figure()
    assert bundle[notebook.PLOTLY_MIME] == _figure_data(expected)
    summary = bundle["text/plain"]
    best = int(distribution.final.argmax())
    assert repr(distribution.tokens[best]) in summary and "raw → temperature → top-k → top-p → min-p" in summary
    assert f"{int((distribution.final > 0).sum()):,} still possible" in summary
    assert f"({100 * float(distribution.final[best]):.1f}%)" in summary


def test_next_token_logits_display_as_the_apps_pipeline_figure(decoder):
    logits = explorer.next_token_logits(decoder, "It is a truth")
    bundle = logits._repr_mimebundle_()
    untouched = distribution_from_logits(logits.logits, logits.tokens)  # every stage off: the model's own softmax
    info = FigureInfo("Next-token distribution", model=logits.model_name, text=logits.prompt)
    assert bundle[notebook.PLOTLY_MIME] == _figure_data(stages_figure(untouched, info=info).figure())
    best = int(logits.logits.argmax())
    assert bundle["text/plain"] == (
        f"NextTokenLogits: bundled/prose-gpt2, after “It is a truth”: {len(logits.tokens):,} logits; most likely "
        f"{logits.tokens[best]!r} ({100 * float(untouched.final[best]):.1f}%)"
    )


def test_plotly_js_is_inlined_in_the_first_figure_only(encoder_capture):
    notebook.reset_plotly_js()
    first, second = encoder_capture._repr_mimebundle_(), encoder_capture._repr_mimebundle_()
    library = get_plotlyjs()
    assert library in first["text/html"] and library not in second["text/html"]
    assert REMOTE_SCRIPT.search(first["text/html"] + second["text/html"]) is None


def test_only_what_is_asked_for_is_built_and_plotly_js_waits_for_html(encoder_capture):
    notebook.reset_plotly_js()
    assert set(encoder_capture._repr_mimebundle_(include=["text/plain"])) == {"text/plain"}
    assert set(encoder_capture._repr_mimebundle_(exclude=["text/html"])) == {"text/plain", notebook.PLOTLY_MIME}
    assert get_plotlyjs() in encoder_capture._repr_mimebundle_(include=["text/html"])["text/html"]


def test_the_package_and_its_displays_need_no_ipython():
    blocked = "import sys; sys.modules['IPython'] = None; sys.modules['ipykernel'] = None\n"
    check = "import explorer, explorer.render.notebook; print(sorted(m for m in sys.modules if 'IPython' in m))"
    done = subprocess.run([sys.executable, "-c", blocked + check], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['IPython']"  # only the blocked entry: nothing tried to import it


def test_a_logit_lens_and_ablation_effects_display_as_the_apps_figures(decoder):
    from explorer.render.ablation import ablation_map
    from explorer.render.lens import lens_figure

    lens = explorer.logit_lens(decoder, "It is a truth universally acknowledged")
    bundle = lens._repr_mimebundle_()
    info = FigureInfo("Logit lens", model=lens.model_name, text=" ".join(lens.tokens))
    assert bundle[notebook.PLOTLY_MIME] == _figure_data(
        lens_figure(lens.top_tokens, lens.top_logprobs, lens.tokens, info=info)
    )
    assert bundle["text/plain"].startswith(f"LogitLens: bundled/prose-gpt2, {len(lens.tokens)} positions × 6 readings")
    effects = explorer.head_ablation_effects(decoder, "It is a truth universally acknowledged")
    bundle = effects._repr_mimebundle_()
    info = FigureInfo("Each head ablated alone", model=effects.model_name, text=effects.prompt)
    expected = ablation_map(
        effects.changes,
        effects.top_tokens,
        target_token=effects.target_token,
        baseline_logprob=effects.baseline_logprob,
        info=info,
    )
    assert bundle[notebook.PLOTLY_MIME] == _figure_data(expected)
    assert "costs it the most" in bundle["text/plain"]


def test_head_probes_display_as_the_best_induction_heads_weights():
    lm = explorer.load_model(explorer.DEFAULT_DECODER)
    probes = explorer.head_probes(lm, n=8, seed=1)
    bundle = probes._repr_mimebundle_()
    layer, head = probes.best("induction")
    shown = decode_plotly_array(bundle[notebook.PLOTLY_MIME]["data"][0]["z"])
    expected = probes.capture.main.attentions[layer, head]
    np.testing.assert_allclose(np.nan_to_num(shown), np.tril(expected), atol=1e-6)
    assert f"induction L{layer}H{head}" in bundle["text/plain"]
