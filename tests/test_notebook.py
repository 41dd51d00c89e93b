"""Results in Jupyter: docs/tour.ipynb run by a real kernel (nbclient + ipykernel), offline, and the bundles
themselves checked against the figures the pages draw (each page's own call, with its opening settings)."""

from __future__ import annotations

import ast
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
from explorer import views
from explorer.compute.kv_cache import kib
from explorer.compute.sampling import distribution_from_logits
from explorer.data._display import Displayed
from explorer.data.attention import STACK_LABELS
from explorer.render import notebook
from explorer.render.ablation import ablation_map
from explorer.render.attribution import attribution_bars
from explorer.render.decoding import beam_tree_figure, candidates_figure
from explorer.render.heatmap import masked_weights, weights_heatmap
from explorer.render.kv_cache import cache_size_figure
from explorer.render.lens import lens_figure
from explorer.render.patching import patching_map, residual_rows
from explorer.render.sampling import stages_figure
from explorer.render.style import FigureInfo
from tests.browser import ROOT, chromium, needs_chromium, open_tab
from tests.figures import decode_plotly_array

pytestmark = pytest.mark.slow  # a whole program or export per test: the full loop only (docs/contributing.md)

TOUR = ROOT / "docs" / "tour.ipynb"
RESULTS = tuple(result.__name__ for result in views.display.DISPLAYS)  # every class that displays as a figure
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


def test_a_capture_summary_says_what_changes_how_its_numbers_read(encoder_capture):
    grouped = dataclasses.replace(encoder_capture.main, kv_head_of_query=np.arange(12) // 3)
    changed = dataclasses.replace(
        encoder_capture, stacks={"encoder": grouped}, truncated=7, dtype="bfloat16", ablated=(("encoder", 0, 1),)
    )
    summary = changed._repr_mimebundle_(include=["text/plain"])["text/plain"]
    assert "6 layers × 12 heads (4 KV heads; 7 tokens cut to fit; bfloat16; 1 head ablated)" in summary


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


def test_the_data_layer_imports_nothing_from_the_render_layer():
    """explorer/data sits below the figures and the views: not one import of explorer.render or explorer.views
    there, not even inside a function (the display reaches the data classes through explorer.data._display,
    filled by explorer.views.display)."""
    found = []
    for path in sorted((ROOT / "explorer" / "data").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            above = ("explorer.render", "explorer.views")
            if any(name == layer or name.startswith(f"{layer}.") for name in names for layer in above):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []


# -- each result in a notebook is the figure its page draws ---------------------------------------------------
# The pages' own calls, copied from the page named beside each, with the settings a page opens with. The text a
# result does not keep (a capture's or a lens's input as typed) is its tokens joined, as the notebook shows it.


def _attention_page(capture, *, stack_name=None, layer=0, head=0, text=None):
    """pages/attention_heatmaps.py, Show: weights, colours not stretched."""
    stack_name = stack_name or next(iter(capture.stacks))  # the stack choice starts at the first
    stack = capture.stacks[stack_name]
    where = (STACK_LABELS[stack_name].lower(),) if len(capture.stacks) > 1 else ()
    text = text or " ".join(capture.tokens)
    info = FigureInfo(
        "Attention weights", model=capture.model_name, text=text, where=(*where, f"layer {layer}", f"head {head}")
    )
    boundary = capture.segment_b_start if stack_name == "encoder" else None
    boundaries = () if boundary is None else (boundary,)
    weights = masked_weights(stack, layer, head)
    return weights_heatmap(
        weights,
        stack.query_tokens,
        stack.key_tokens,
        color_max=1.0,
        info=info,
        boundaries=boundaries,
        skip_first_row=False,
    )


def _greedy_page(trace):
    """pages/greedy_search.py."""
    info = FigureInfo("Greedy search", model=trace.model_name, text=trace.prompt, where=(f"{trace.num_steps} steps",))
    return candidates_figure(trace, info=info)


def _beam_page(trace, upto=None):
    """pages/beam_search.py, the replay slider at its last step."""
    upto = trace.num_steps - 1 if upto is None else upto
    where = (f"{trace.settings.num_beams} beams", f"step {upto + 1} of {trace.num_steps}")
    info = FigureInfo("Beam search tree", model=trace.model_name, text=trace.prompt, where=where)
    return beam_tree_figure(trace, info=info, upto_step=upto)


def _sampled(trace):
    """No page draws a sampled trace (the sampling page shows a table): the greedy page's figure, titled so."""
    where = (f"seed {trace.settings.seed}", f"{trace.num_steps} steps")
    return candidates_figure(trace, info=FigureInfo("Sampling", model=trace.model_name, text=trace.prompt, where=where))


def _pipeline_page(distribution, settings_text, model="", prompt=""):
    """pages/sampling.py, the pipeline stage by stage."""
    stages_info = FigureInfo("Sampling pipeline", model=model, text=prompt, where=(settings_text,))
    return stages_figure(distribution, info=stages_info).figure()


def _logits_page(logits):
    """pages/sampling.py as it opens: T = 1, top-k, top-p and min-p off."""
    distribution = distribution_from_logits(
        logits.logits, logits.tokens, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0
    )
    settings_text = "T = 1, top-k = 0, top-p = 1, min-p = 0"
    return _pipeline_page(distribution, settings_text, model=logits.model_name, prompt=logits.prompt)


def _lens_page(lens):
    """pages/logit_lens.py, a decoder-only model."""
    info = FigureInfo("Logit lens", model=lens.model_name, text=" ".join(lens.tokens), where=())
    return lens_figure(lens.top_tokens, lens.top_logprobs, lens.tokens, info=info, masked=lens.masked)


def _kv_cache_page(trace):
    """The KV cache section of pages/greedy_search.py: the cache's size after each pass (a decoder), with the size it
    would have without grouped KV heads where the model groups them (the bundled decoder: 2 KV heads, 8 query)."""
    info = FigureInfo("KV cache size", model=trace.model_name, text=trace.prompt, where=(f"{trace.steps} steps",))
    tokens = trace.stacks[0].tokens[:, 0]
    ungrouped = trace.ungrouped_bytes if trace.grouping_saving > 1 else None
    return cache_size_figure({"decoder": trace.stacks[0].nbytes.sum(axis=(1, 2))}, tokens, ungrouped, info=info)


def _ablation_page(effects):
    """pages/head_ablation.py, no head ablated yet, a decoder-only model."""
    info = FigureInfo("Each head ablated alone", model=effects.model_name, text=effects.prompt, where=())
    return ablation_map(
        effects.changes,
        effects.top_tokens,
        target_token=effects.target_token,
        baseline_logprob=effects.baseline_logprob,
        ablated=(),
        info=info,
    )


def _probes_page(probes, score="induction", score_name="induction"):
    """pages/head_types.py, the best head for ``score`` (its SCORES label, lowered: ``score_name``)."""
    layer, head = probes.best(score)
    stack = probes.capture.main
    value = float(probes.scores[score][layer, head])  # "best" only where the head stands out (issue 38)
    out = value >= 0.3 and value >= 5 * probes.uniform[score]
    said = (f"best {score_name} score {value:.3f}",) if out else (f"highest {score_name} score {value:.3f}",)
    info = FigureInfo(
        "Attention weights",
        model=probes.model_name,
        text=f"{probes.n} random tokens, twice (seed {probes.seed})",
        where=(f"layer {layer}", f"head {head}", *said, *(() if out else ("no head stands out",))),
    )
    weights = masked_weights(stack, layer, head)
    copies = (probes.offset + probes.n,)
    return weights_heatmap(weights, stack.query_tokens, stack.key_tokens, color_max=None, info=info, boundaries=copies)


def _patching_page(patching):
    """pages/patching.py, the residual stream's map (its first figure)."""
    clean, corrupted = "".join(patching.clean_tokens), "".join(patching.corrupted_tokens)
    info = FigureInfo("Patching the residual stream", model=patching.model_name, text=f"{clean} → {corrupted}")
    return patching_map(
        patching.residual,
        residual_rows(patching.num_layers),
        patching.clean_tokens,
        row_title="residual stream",
        column_title="position (clean prompt's token)",
        what="the residual stream",
        info=info,
    )


def _attribution_page(attribution):
    """pages/why_this_token.py as it opens: integrated gradients, 64 steps, the model's top token."""
    where = ("Integrated gradients", "64 steps", f"target {attribution.target_token!r}")
    text = "".join(attribution.tokens)
    info = FigureInfo("Why this token?", model=attribution.model_name, text=text, where=where)
    title = "contribution to Δ log p"
    return attribution_bars(attribution.tokens, attribution.scores, score_title=title, info=info)


@pytest.fixture(scope="module")
def results(encoder_capture, decoder):
    """One result of every type that displays, with its page's figure."""
    prompt = "It is a truth universally acknowledged"
    greedy = explorer.decode(decoder, prompt, strategy="greedy", max_new_tokens=4)
    beam = explorer.decode(decoder, prompt, strategy="beam", num_beams=3, max_new_tokens=4)
    sampled = explorer.decode(decoder, prompt, strategy="sample", seed=7, top_p=0.9, max_new_tokens=4)
    distribution = explorer.next_token_distribution(decoder, prompt, temperature=0.7, top_p=0.9)
    logits = explorer.next_token_logits(decoder, prompt)
    lens = explorer.logit_lens(decoder, prompt)
    effects = explorer.head_ablation_effects(decoder, prompt)
    probes = explorer.head_probes(decoder, n=8, seed=1)
    kv_cache = explorer.kv_cache(decoder, prompt, steps=4)
    patching = explorer.patch(decoder, "The girl was sure that", "The boy was sure that")
    attribution = explorer.attribute(decoder, "Elizabeth knew that")
    return {
        "capture": (encoder_capture, _attention_page(encoder_capture)),
        "greedy": (greedy, _greedy_page(greedy)),
        "beam": (beam, _beam_page(beam)),
        "sample": (sampled, _sampled(sampled)),
        "distribution": (distribution, _pipeline_page(distribution, "T = 0.7, top-k = 0, top-p = 0.9, min-p = 0")),
        "logits": (logits, _logits_page(logits)),
        "lens": (lens, _lens_page(lens)),
        "effects": (effects, _ablation_page(effects)),
        "probes": (probes, _probes_page(probes)),
        "kv cache": (kv_cache, _kv_cache_page(kv_cache)),
        "patching": (patching, _patching_page(patching)),
        "attribution": (attribution, _attribution_page(attribution)),
    }


RESULT_NAMES = [
    *("capture", "greedy", "beam", "sample", "distribution", "logits", "lens", "effects", "probes"),
    *("kv cache", "patching", "attribution"),
]


def test_every_result_type_that_displays_is_compared_with_its_page(results):
    assert set(results) == set(RESULT_NAMES)
    assert {type(result) for result, _ in results.values()} == set(views.display.DISPLAYS)
    displayed = {cls for module in (explorer.data, explorer) for cls in vars(module).values() if isinstance(cls, type)}
    assert {cls for cls in displayed if issubclass(cls, Displayed)} == set(views.display.DISPLAYS)


@pytest.mark.parametrize("name", RESULT_NAMES)
def test_a_result_in_a_notebook_is_the_figure_its_page_draws(results, name):
    result, page_figure = results[name]
    notebook.reset_plotly_js()
    bundle = result._repr_mimebundle_()
    assert bundle[notebook.PLOTLY_MIME] == _figure_data(page_figure)
    assert _plotted(bundle["text/html"]) == _figure_data(page_figure)  # the HTML draws the same figure


def test_a_view_is_its_pages_figure_at_any_setting_too(decoder):
    """What the pages may change: a stack, a layer and head, the text as typed, the replay step, the probe score."""
    seq2seq = explorer.load_model(explorer.DEFAULT_SEQ2SEQ)
    text, target = "Thursday, March 5, 2021", "2021-03-05"
    capture = explorer.capture(seq2seq, text, target=target)
    view = views.attention.Head(seq2seq.name, text, target=target, stack="cross", layer=1, head=0)
    page = _attention_page(capture, stack_name="cross", layer=1, head=0, text=f"{text} / {target}")
    assert _figure_data(view.figure(capture)()) == _figure_data(page)
    assert view.info(capture).where == ("cross-attention", "layer 1", "head 0")
    beam = explorer.decode(decoder, "It is a truth", strategy="beam", num_beams=2, max_new_tokens=3)
    tree = views.decoding.BeamTree.for_result(beam)
    assert _figure_data(dataclasses.replace(tree, upto_step=0).figure(beam)()) == _figure_data(_beam_page(beam, upto=0))
    probes = explorer.head_probes(decoder, n=8, seed=1)
    shown = dataclasses.replace(views.probes.BestHead.for_result(probes), score="previous").figure(probes)()
    assert _figure_data(shown) == _figure_data(_probes_page(probes, "previous", "previous token"))


def test_each_result_summarises_itself_in_one_line(results):
    summaries = {
        name: result._repr_mimebundle_(include=["text/plain"])["text/plain"] for name, (result, _) in results.items()
    }
    assert all("\n" not in summary for summary in summaries.values())
    assert summaries["capture"] == (
        "AttentionCapture: sentence-transformers/all-MiniLM-L6-v2, 13 tokens, 6 layers × 12 heads, stacks encoder "
        "(shown: layer 0, head 0; any other with explorer.render.attention_heatmap(capture.main, layer, head))"
    )
    titles = {"greedy": "greedy search", "beam": "beam search, 3 beams", "sample": "sampling, seed 7"}
    for name, title in titles.items():
        trace = results[name][0]
        assert summaries[name].startswith(f"DecodeTrace: {explorer.DEFAULT_DECODER}, {title}, 4 steps: ")
        assert f"(log-probability {float(trace.sequence_logprobs[0]):.2f})" in summaries[name]
        assert trace.continuations[0].strip()[:10] in summaries[name]
    distribution = results["distribution"][0]
    best = int(distribution.final.argmax())
    assert repr(distribution.tokens[best]) in summaries["distribution"]
    assert "raw → temperature → top-k → top-p → min-p" in summaries["distribution"]
    assert f"{int((distribution.final > 0).sum()):,} still possible" in summaries["distribution"]
    assert f"({100 * float(distribution.final[best]):.1f}%)" in summaries["distribution"]
    logits = results["logits"][0]
    untouched = distribution_from_logits(logits.logits, logits.tokens)  # every stage off: the model's own softmax
    best = int(logits.logits.argmax())
    assert summaries["logits"] == (
        f"NextTokenLogits: {explorer.DEFAULT_DECODER}, after “It is a truth universally acknowledged”: "
        f"{len(logits.tokens):,} logits; most likely {logits.tokens[best]!r} "
        f"({100 * float(untouched.final[best]):.1f}%)"
    )
    lens = results["lens"][0]
    readings = f"{len(lens.tokens)} positions × {lens.num_layers + 1} readings"
    assert summaries["lens"].startswith(f"LogitLens: {explorer.DEFAULT_DECODER}, {readings}")
    assert "costs it the most" in summaries["effects"]
    probes = results["probes"][0]
    layer, head = probes.best("induction")
    assert f"induction L{layer}H{head}" in summaries["probes"]
    kv_cache = results["kv cache"][0]
    assert summaries["kv cache"].startswith(
        f"KVCacheTrace: {explorer.DEFAULT_DECODER}, a prefill and 4 steps; the cache ends at "
        f"{kv_cache.total_bytes[-1] / 1024:.1f} KiB ({kib(kv_cache.bytes_per_token)} per token, float32)"
    )


def test_patching_and_attribution_summarise_what_their_pages_say(results):
    patching = results["patching"][0]
    summary = patching._repr_mimebundle_(include=["text/plain"])["text/plain"]
    assert summary.startswith(f"Patching: {explorer.DEFAULT_DECODER}, ")
    assert "The head that recovers the most alone" in summary
    attribution = results["attribution"][0]
    summary = attribution._repr_mimebundle_(include=["text/plain"])["text/plain"]
    top = int(np.argmax(attribution.scores))
    assert summary == (
        f"Attribution: {explorer.DEFAULT_DECODER}, integrated gradients of log p({attribution.target_token!r}) = "
        f"{attribution.logprob:.3f} over {len(attribution.tokens)} tokens; the largest score: "
        f"#{top} {attribution.tokens[top]!r} ({float(attribution.scores[top]):+.3f}); completeness error "
        f"{attribution.delta:+.1e}"
    )


def test_head_probes_display_as_the_best_induction_heads_weights(results):
    probes = results["probes"][0]
    bundle = probes._repr_mimebundle_(exclude=["text/html"])
    layer, head = probes.best("induction")
    shown = decode_plotly_array(bundle[notebook.PLOTLY_MIME]["data"][0]["z"])
    expected = probes.capture.main.attentions[layer, head]
    np.testing.assert_allclose(np.nan_to_num(shown), np.tril(expected), atol=1e-6)
