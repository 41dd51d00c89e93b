"""Results in Jupyter: docs/tour.ipynb run by a real kernel (nbclient + ipykernel), offline, and the bundles
themselves checked against the app's figures."""

from __future__ import annotations

import json
import os
import re

import nbformat
import plotly.io as pio
import pytest
from nbclient import NotebookClient

import explorer
from explorer.render import notebook
from explorer.render.decoding import beam_tree_figure, candidates_figure
from explorer.render.heatmap import attention_heatmap
from explorer.render.style import FigureInfo
from tests.browser import ROOT

TOUR = ROOT / "docs" / "tour.ipynb"
PLOTLY_JS = "Plotly.newPlot"  # in every drawn figure; the library's own source defines it once
REMOTE_SCRIPT = re.compile(r"<script[^>]+src=[\"']?(https?:)?//", re.IGNORECASE)


@pytest.fixture(scope="module")
def executed_tour():
    tour = nbformat.read(TOUR, as_version=4)
    assert not any(cell.get("outputs") for cell in tour.cells if cell.cell_type == "code")  # committed clean
    offline = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    saved = {key: os.environ.get(key) for key in offline}
    os.environ.update(offline)  # the kernel inherits this process's environment
    try:
        NotebookClient(tour, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return tour


def _outputs(tour):
    return [output for cell in tour.cells if cell.cell_type == "code" for output in cell.outputs]


def test_every_cell_of_the_tour_runs(executed_tour):
    code_cells = [cell for cell in executed_tour.cells if cell.cell_type == "code"]
    assert code_cells and all(cell.outputs for cell in code_cells)  # every cell shows something
    assert not [output for output in _outputs(executed_tour) if output.output_type == "error"]
    verify_output = next(c for c in code_cells if c.source.strip() == "cap.verify()").outputs[0]
    assert float(verify_output.data["text/plain"]) < 1e-4


def test_results_display_as_figures_with_plotly_js_once_and_no_cdn(executed_tour):
    shown = [o for o in _outputs(executed_tour) if o.output_type == "execute_result" and notebook.PLOTLY_MIME in o.data]
    summaries = [o.data["text/plain"] for o in shown]
    assert [s.split(":")[0] for s in summaries] == [
        "AttentionCapture",
        "DecodeTrace",
        "DecodeTrace",
        "TokenDistribution",
    ]
    pages = [o.data["text/html"] for o in shown]
    assert all(PLOTLY_JS in page for page in pages)
    carrying = [page for page in pages if len(page) > 1_000_000]  # plotly.js inline: 4.6 MB
    assert len(carrying) == 1
    assert carrying[0] is pages[0]
    # No script from elsewhere (plotly.js itself names cdn.plot.ly, for map outlines no figure here draws).
    everything = json.dumps(_outputs(executed_tour))
    assert REMOTE_SCRIPT.search(everything) is None
    assert "require.config" not in everything  # no loader that would fetch plotly.js from a CDN


@pytest.fixture(scope="module")
def encoder_capture():
    lm = explorer.load_model(explorer.DEFAULT_ENCODER)
    return explorer.capture(lm, "time flies like an arrow", text_pair="fruit flies like a banana")


def _figure_data(figure) -> dict:
    return json.loads(pio.to_json(figure, validate=False))


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
    assert bundle["text/plain"].startswith("AttentionCapture: sentence-transformers/all-MiniLM-L6-v2, ")
    assert "6 layers × 12 heads" in bundle["text/plain"]


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_a_trace_displays_as_the_apps_figure(strategy):
    lm = explorer.load_model(explorer.DEFAULT_DECODER)
    extra = {"num_beams": 3} if strategy == "beam" else {}
    trace = explorer.decode(lm, "It is a truth", strategy=strategy, max_new_tokens=4, **extra)
    bundle = trace._repr_mimebundle_()
    build = beam_tree_figure if strategy == "beam" else candidates_figure
    title = "Beam search, 3 beams" if strategy == "beam" else "Greedy search"
    expected = build(trace, info=FigureInfo(title, model=trace.model_name, text=trace.prompt))
    assert bundle[notebook.PLOTLY_MIME] == _figure_data(expected)
    assert trace.continuations[0].strip()[:10] in bundle["text/plain"]


def test_plotly_js_is_inlined_in_the_first_figure_only(encoder_capture):
    notebook.reset_plotly_js()
    first, second = encoder_capture._repr_mimebundle_(), encoder_capture._repr_mimebundle_()
    assert len(first["text/html"]) > 1_000_000 > 100_000 > len(second["text/html"])
    assert REMOTE_SCRIPT.search(first["text/html"] + second["text/html"]) is None


def test_a_distribution_summary_names_its_stages_and_its_likeliest_token():
    lm = explorer.load_model(explorer.DEFAULT_DECODER)
    distribution = explorer.next_token_distribution(lm, "It is a truth", temperature=0.7, top_p=0.9)
    summary = distribution._repr_mimebundle_()["text/plain"]
    best = int(distribution.final.argmax())
    assert repr(distribution.tokens[best]) in summary and "temperature" in summary
    assert f"{int((distribution.final > 0).sum()):,} still possible" in summary


def test_a_logit_lens_and_ablation_effects_display_as_the_apps_figures():
    from explorer.render.ablation import ablation_map
    from explorer.render.lens import lens_figure

    lm = explorer.load_model(explorer.DEFAULT_DECODER)
    lens = explorer.logit_lens(lm, "It is a truth universally acknowledged")
    bundle = lens._repr_mimebundle_()
    info = FigureInfo("Logit lens", model=lens.model_name, text=" ".join(lens.tokens))
    assert bundle[notebook.PLOTLY_MIME] == _figure_data(
        lens_figure(lens.top_tokens, lens.top_logprobs, lens.tokens, info=info)
    )
    assert bundle["text/plain"].startswith(f"LogitLens: bundled/prose-gpt2, {len(lens.tokens)} positions × 6 readings")
    effects = explorer.head_ablation_effects(lm, "It is a truth universally acknowledged")
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
