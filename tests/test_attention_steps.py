"""Attention step by step and the neuron view (issue 38): every cell and bar lands on its own (query, key) pair
even when tokens look like numbers, masked keys stay empty (−∞, weight 0), the T5's decoder and cross-attention
draw, and the neuron view's columns reproduce the model's own eager ``output_attentions`` exactly (T5: no
scaling, its relative position bias shown). Unit tests on the figure specs; no browser."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

import explorer
from explorer import views
from explorer.compute.attention import query_stages
from explorer.data.decoding import TokenDistribution
from explorer.render.ablation import before_after_figure
from explorer.render.heatmap import position_labels
from explorer.render.sampling import stages_figure, temperature_figure
from explorer.render.style import CHAR_WIDTH, SCREEN, SLIDE, FigureInfo, presentation_look
from explorer.render.vectors import NEURON_STAGES, _labels, neuron_view_figure
from tests.devices import DEVICE
from tests.figures import decode_plotly_array, written

NUMBERS = "In 1811 there were 3 sisters"
# (model, text, target): the default inputs and texts whose tokens look like numbers, with duplicates.
CASES = {
    "decoder": [
        (explorer.DEFAULT_DECODER, "time flies like an arrow", None),
        (explorer.DEFAULT_DECODER, NUMBERS, None),
        (explorer.DEFAULT_DECODER, "1 2 1 3 2 1", None),
    ],
    "seq2seq": [
        (explorer.DEFAULT_SEQ2SEQ, "Thursday, March 5, 2021", "2021-03-05"),
        (explorer.DEFAULT_SEQ2SEQ, "3/1/2011", "2011-03-01"),
    ],
    "encoder": [
        (explorer.DEFAULT_ENCODER, "time flies like an arrow", None),
        (explorer.DEFAULT_ENCODER, NUMBERS, None),
    ],
}


@pytest.fixture(scope="module")
def loaded(_minilm_loads):
    """{model name: (explorer's model, transformers' own eager copy, its tokenizer)}, loaded once."""
    found = {}
    for name, reference in (
        (explorer.DEFAULT_DECODER, AutoModelForCausalLM),
        (explorer.DEFAULT_SEQ2SEQ, AutoModelForSeq2SeqLM),
        (explorer.DEFAULT_ENCODER, AutoModel),
    ):
        lm = _minilm_loads(DEVICE) if name == explorer.DEFAULT_ENCODER else explorer.load_model(name, device=DEVICE)
        path = lm.model.config._name_or_path
        # float32 as explorer loads it (transformers keeps a checkpoint's own float16 otherwise: prose-llama's)
        model = reference.from_pretrained(path, attn_implementation="eager", dtype=torch.float32).to(DEVICE).eval()
        found[name] = (lm, model, AutoTokenizer.from_pretrained(path))
    return found


@torch.no_grad()
def eager_attentions(model, tokenizer, text: str, target: str | None) -> dict[str, list[np.ndarray]]:
    """The model's own eager weights, {stack: [layer] -> [head, query, key]}, as transformers computes them."""
    inputs = tokenizer(text, return_tensors="pt").to(DEVICE)
    if target is None:  # GPT-2's one stack is a decoder, BERT's an encoder
        out = model(**inputs, output_attentions=True)
        name = "encoder" if model.config.model_type == "bert" else "decoder"
        return {name: [a[0].cpu().numpy() for a in out.attentions]}
    labels = tokenizer(text_target=target, return_tensors="pt")["input_ids"].to(DEVICE)
    out = model(**inputs, labels=labels, output_attentions=True)
    stacks = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}
    return {name: [a[0].cpu().numpy() for a in found] for name, found in stacks.items()}


def _stacks(capture, eager):
    """(stack name, captured stack, eager weights [layer]) for every stack of the capture."""
    assert set(capture.stacks) == set(eager)
    for name, stack in capture.stacks.items():
        yield name, stack, eager[name]


def _spec(figure) -> dict:
    """A figure as plotly.js receives it, its arrays decoded from Plotly's base64."""
    spec = figure.sent() if hasattr(figure, "sent") else figure.to_plotly_json()
    for trace in spec["data"]:
        for key in ("x", "y", "z"):
            if isinstance(trace.get(key), dict):
                trace[key] = decode_plotly_array(trace[key])
    return spec


def _axis(layout: dict, trace: dict, which: str) -> dict:
    ref = trace.get(f"{which}axis", which)
    return layout.get(f"{which}axis{ref[1:]}", {})


def _token_axes_are_categories(spec: dict) -> None:
    """Every axis that holds text coordinates is a category axis; never typed from the text as numbers."""
    assert spec["layout"].get("autotypenumbers") == "strict"
    for trace in spec["data"]:
        for which in ("x", "y"):
            values = trace.get(which)
            if values is not None and len(values) and isinstance(np.asarray(values).flat[0], str):
                assert _axis(spec["layout"], trace, which).get("type") == "category", (which, trace.get("name"))


def _rows(spec: dict, labels: list[str]) -> list[dict]:
    """The traces drawn one row per key (their y is the key labels), each checked to be those labels in order."""
    rows = [t for t in spec["data"] if t.get("y") is not None and len(t["y"]) == len(labels)]
    for trace in rows:
        assert list(trace["y"]) == labels
    return rows


def _scores_and_bars(spec: dict, labels: list[str]) -> tuple[list[dict], dict]:
    rows = _rows(spec, labels)
    bars = [t for t in rows if t["type"] == "bar"]
    columns = [t for t in rows if t["type"] == "heatmap" and list(t.get("x", [])) and len(t["x"]) == 1]
    assert len(bars) == 1
    return columns, bars[0]


def _key_labels(tokens) -> list[str]:
    labels = _labels(tokens)
    assert len(set(labels)) == len(labels)  # unique: Plotly would merge equal categories
    return labels


def _cases():
    for cases in CASES.values():
        yield from cases


@pytest.mark.parametrize(("model", "text", "target"), list(_cases()))
def test_each_cell_lands_on_its_query_and_key_and_masked_keys_stay_empty(loaded, model, text, target):
    lm, reference, tokenizer = loaded[model]
    capture = explorer.capture(lm, text, target=target)
    eager = eager_attentions(reference, tokenizer, text, target)
    for name, stack, weights in _stacks(capture, eager):
        # The last layer and head (not the defaults) and a middle query (a causal one has masked keys after it).
        layer, head, query = stack.num_layers - 1, stack.num_heads - 1, len(stack.query_tokens) // 2
        model_row, allowed = weights[layer][head, query], stack.masks_by_layer()[layer][query]
        labels = _key_labels(stack.key_tokens)
        inputs = (model, text, None, target, name, layer, head, query)
        steps = _spec(views.attention.StepByStep(*inputs).figure(capture)())
        _token_axes_are_categories(steps)
        columns, bars = _scores_and_bars(steps, labels)
        np.testing.assert_allclose(bars["x"], model_row, atol=1e-5)
        assert not np.asarray(bars["x"])[~allowed].any()
        masked = columns[-1]  # the mask column: −∞ written, nothing coloured, at every masked key
        assert [written(row[0]) for row in masked["text"]] == [
            "−∞" if not a else f"{v:.2f}" for a, v in zip(allowed, masked["z"][:, 0], strict=True)
        ]
        assert np.isnan(masked["z"][~allowed]).all() and np.isfinite(masked["z"][allowed]).all()
        neuron = _spec(views.attention.Neuron(*inputs).figure(capture)())
        _token_axes_are_categories(neuron)
        columns, bars = _scores_and_bars(neuron, labels)
        np.testing.assert_allclose(bars["x"], model_row, atol=1e-5)
        # The last score column is what the softmax reads: its softmax is the model's own row.
        finite = np.asarray(columns[-1]["z"][:, 0], dtype=np.float64)
        shown = np.where(np.isnan(finite), 0.0, np.exp(finite - np.nanmax(finite)))
        np.testing.assert_allclose(shown / shown.sum(), model_row, atol=2e-5)
        _the_heatmap_puts_each_weight_in_its_cell(capture, inputs[:7], stack, weights[layer][head])


def _the_heatmap_puts_each_weight_in_its_cell(capture, inputs, stack, weights) -> None:
    """The head's heatmap: rows and columns named by position in token order, each cell the model's weight, blank
    where masked."""
    spec = _spec(views.attention.Head(*inputs).figure(capture)(look=SCREEN))
    _token_axes_are_categories(spec)
    cells = spec["data"][0]
    assert list(cells["y"]) == position_labels(stack.query_tokens)
    assert list(cells["x"]) == position_labels(stack.key_tokens)
    allowed = stack.masks_by_layer()[inputs[5]]
    np.testing.assert_allclose(cells["z"][allowed], weights[allowed], atol=1e-5)
    assert np.isnan(cells["z"][~allowed]).all()


def test_the_t5_decoder_and_cross_attention_draw_step_by_step(loaded):
    """The decoder's tokens ("2021", "03", "05") made plotly.js type every column but the first as numbers, and it
    drew their heatmaps with NaN heights: a blank figure. Every column's axis is a category axis now."""
    lm = loaded[explorer.DEFAULT_SEQ2SEQ][0]
    text, target = CASES["seq2seq"][0][1:]
    capture = explorer.capture(lm, text, target=target)
    for name in ("decoder", "cross"):
        stack = capture.stacks[name]
        query = len(stack.query_tokens) - 2
        spec = _spec(views.attention.StepByStep(lm.name, text, None, target, name, 1, 2, query).figure(capture)())
        _token_axes_are_categories(spec)
        drawn = [t for t in spec["data"] if t["type"] == "heatmap"]
        assert len(drawn) >= 5 and all(np.size(t["z"]) for t in drawn)
        np.testing.assert_allclose(spec["data"][1]["z"], stack.keys[1, 2], atol=1e-6)


@pytest.mark.parametrize("stack_name", ["encoder", "decoder", "cross"])
def test_the_t5_neuron_view_shows_its_bias_and_minus_infinity_and_no_scale(loaded, stack_name):
    """T5: no 1/√d, a relative position bias in self-attention (none in cross-attention), −∞ on the decoder's
    future keys; each column follows from the one before, and the last one's softmax is the eager weights."""
    lm, reference, tokenizer = loaded[explorer.DEFAULT_SEQ2SEQ]
    text, target = CASES["seq2seq"][0][1:]
    capture = explorer.capture(lm, text, target=target)
    eager = eager_attentions(reference, tokenizer, text, target)[stack_name]
    stack = capture.stacks[stack_name]
    layer, head, query = stack.num_layers - 1, 1, 1
    view = views.attention.Neuron(lm.name, text, None, target, stack_name, layer, head, query)
    spec = _spec(view.figure(capture)())
    titles = [a["text"] for a in spec["layout"]["annotations"]]
    expected = ["q·k"] + (["bias b", "+ b"] if stack_name != "cross" else []) + (["mask"] * (stack_name == "decoder"))
    assert titles[-len(expected) - 1 :] == [*expected, "softmax"]
    labels = _key_labels(stack.key_tokens)
    columns, bars = _scores_and_bars(spec, labels)
    products = next(t for t in spec["data"] if "q × k" in t["hovertemplate"])["z"]
    shown = {
        name: np.asarray(column["z"][:, 0], dtype=np.float64) for name, column in zip(expected, columns, strict=True)
    }
    np.testing.assert_allclose(shown["q·k"], products.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-3)
    if stack_name != "cross":
        # T5's bias straight from the model: layer 0's relative_attention_bias, as transformers computes it.
        block = reference.decoder if stack_name == "decoder" else reference.encoder
        attention = block.block[0].layer[0].SelfAttention
        n = len(stack.key_tokens)
        bias = attention.compute_bias(n, n, device=DEVICE)[0, head, query].detach().cpu().numpy()
        np.testing.assert_allclose(shown["bias b"], bias, atol=1e-5)
        np.testing.assert_allclose(shown["+ b"], shown["q·k"] + shown["bias b"], atol=1e-4)
    last = shown[expected[-1]]
    masked = ~stack.masks_by_layer()[layer][query]
    assert np.isnan(last[masked]).all() and masked.any() == (stack_name == "decoder")
    assert [written(row[0]) == "−∞" for row in columns[-1]["text"]] == list(masked)
    weights = np.exp(np.where(masked, -np.inf, last - np.nanmax(last)))
    np.testing.assert_allclose(weights / weights.sum(), eager[layer][head, query], atol=1e-6)
    np.testing.assert_allclose(bars["x"], eager[layer][head, query], atol=1e-6)
    caption = view.caption(capture)
    assert "does not scale q·k (scale 1, as in T5)" in caption and "✓" in caption
    assert ("relative position bias" in caption) == (stack_name != "cross")
    assert (f"{masked.sum()} masked keys get −∞" in caption) == (stack_name == "decoder")


@pytest.mark.parametrize(("model", "text", "target"), list(_cases()))
def test_the_neuron_caption_says_what_this_model_and_query_do(loaded, model, text, target):
    """Each claim of the caption checked against the model itself: its scale (from its config), its bias (T5
    only), and how many keys this query may not see (causal: those after it)."""
    lm, reference, _ = loaded[model]
    capture = explorer.capture(lm, text, target=target)
    for name, stack in capture.stacks.items():
        for query in (0, len(stack.query_tokens) - 1):
            view = views.attention.Neuron(model, text, None, target, name, 0, 0, query)
            caption, stages = view.caption(capture), view.stages(capture)
            t5 = reference.config.model_type == "t5"
            head_dim = stack.queries.shape[-1]
            assert ("does not scale" in caption) == t5
            if not t5:
                assert f"multiplied by the scale {head_dim**-0.5:.6g}" in caption
            assert ("relative position bias" in caption) == (t5 and name != "cross")
            causal = name == "decoder"  # GPT-2's stack and the T5's decoder
            hidden = len(stack.key_tokens) - query - 1 if causal else 0
            assert (f"{hidden} masked key" in caption) == bool(hidden)
            assert caption.endswith(".") and "✓ softmax of the last score column" in caption
            assert list(NEURON_STAGES).index(list(stages)[-2]) >= 0  # the stages drawn come in the model's order
            np.testing.assert_allclose(stages["weights"], stack.attentions[0, 0, query], atol=1e-6)


def _reference_head_dim(config) -> int:
    """The width of one head's q and k, from the model's own config."""
    if config.model_type == "t5":
        return config.d_kv
    hidden, heads = (
        (config.n_embd, config.n_head)
        if config.model_type == "gpt2"
        else (config.hidden_size, config.num_attention_heads)
    )
    return hidden // heads


@pytest.mark.parametrize(("model", "text", "target"), list(_cases()))
def test_the_step_formula_and_its_line_say_what_this_layer_does(loaded, model, text, target):
    """The step-by-step page's formula and the line under it, from the view, checked against the model's own config
    on every stack of the three bundled models: 1/√d from its head width, or no scale (T5); T5's bias in
    self-attention only; the mask term where the stack is causal, with the count of keys this query may not see."""
    lm, reference, _ = loaded[model]
    capture = explorer.capture(lm, text, target=target)
    t5, head_dim = reference.config.model_type == "t5", _reference_head_dim(reference.config)
    for name, stack in capture.stacks.items():
        causal, keys = name == "decoder", len(stack.key_tokens)  # GPT-2's stack and the T5's decoder
        for layer, query in ((0, 0), (stack.num_layers - 1, len(stack.query_tokens) - 1)):
            view = views.attention.StepByStep(model, text, None, target, name, layer, 1, query)
            formula, line = view.formula(capture), view.setting(capture)
            assert formula.count("{") == formula.count("}") and formula.endswith(r"\right) V")
            scale = rf"\cdot \tfrac{{1}}{{\sqrt{{{head_dim}}}}}"
            assert (scale in formula) != t5 and ("cdot" in formula) != t5
            assert ("no scale" in line) == t5 and (f"scale = {head_dim**-0.5:.6g} = 1/√{head_dim}" in line) != t5
            assert f"q and each k have {head_dim} numbers" in line
            biased = t5 and name != "cross"
            assert (" + b" in formula) == biased and ("relative position bias b is added" in line) == biased
            assert (" + m" in formula) == causal
            hidden = keys - query - 1 if causal else 0
            assert (f"{hidden} of its {keys} keys" in line) == bool(hidden)
            assert (f"it sees all {keys} keys (m = 0)" in line) == (not hidden)
            assert line.startswith(f"Query #{query} “{stack.query_tokens[query]}”, layer {layer}, head 1:")


# Every stage a neuron view can draw (T5's five: the narrowest columns), with a score as large as GPT-2's first-key
# scores (−100.51 overflowed its cell at 1280×720, issue 38) and masked keys.
WIDE_SCORES = np.array([-100.51, 3.14159, 0.53, -12.345, 250.0, -0.004, -np.inf, -np.inf])


@pytest.mark.parametrize("look", [SCREEN, SLIDE, presentation_look(1216, 520), presentation_look(1216, 600)])
def test_the_neuron_views_numbers_fit_their_cells(look):
    """Each score cell's text, at its size, is no wider than the cell (the figure's width less its margins and the
    key labels' room, times the column's domain), and still says its value (fewer decimals where room is short,
    never below three quarters of the look's cell text size)."""
    rng = np.random.default_rng(0)
    n = len(WIDE_SCORES)
    scores = {name: WIDE_SCORES for name in NEURON_STAGES}
    info = FigureInfo("Neuron view")
    tokens = [f"token{i}" for i in range(n)]
    figure = neuron_view_figure(rng.standard_normal(32), rng.standard_normal((n, 32)), scores, np.full(n, 1 / n),
                                tokens, "token0", info=info, look=look)  # fmt: skip
    spec = _spec(figure)
    layout = spec["layout"]
    label_size = max(_axis(layout, t, "y").get("tickfont", {}).get("size", 0) for t in spec["data"])
    labels = [label for t in spec["data"] for label in (t.get("y") or []) if isinstance(label, str)]
    label_room = max(map(len, labels)) * CHAR_WIDTH * label_size
    plot = layout["width"] - layout["margin"]["l"] - layout["margin"]["r"] - label_room
    cells = [t for t in spec["data"] if t["type"] == "heatmap" and len(t.get("x") or []) == 1]
    assert len(cells) == len(NEURON_STAGES)
    for trace in cells:
        low, high = _axis(layout, trace, "x")["domain"]
        size = trace["textfont"]["size"]
        assert size >= 0.75 * look.cell_text_size
        for [text], value in zip(trace["customdata"], WIDE_SCORES, strict=True):
            assert len(text) * CHAR_WIDTH * size <= plot * (high - low), (text, size, plot * (high - low))
            if np.isneginf(value):
                assert text == "−∞"
            else:  # as many decimals as shown, rounded correctly
                decimals = len(text.partition(".")[2])
                assert abs(float(text) - value) <= 0.5 * 10**-decimals + 1e-12, (text, value)


def test_query_stages_add_up(loaded):
    lm = loaded[explorer.DEFAULT_SEQ2SEQ][0]
    stack = explorer.capture(lm, "3/1/2011", target="2011-03-01").stacks["decoder"]
    stages = query_stages(stack, 0, 0, 2)
    assert list(stages) == ["dot", "bias", "biased", "masked", "weights"]
    np.testing.assert_allclose(stages["biased"], stages["dot"] + stages["bias"])


def test_token_bars_are_categories_where_tokens_look_like_numbers():
    """The other figures that label an axis with tokens: numbers as text stay categories, each bar on its token."""
    tokens = ("1", "2", "2021", "03", "3")
    info = FigureInfo("test")
    logits = np.array([3.0, 2.0, 1.0, 0.5, 0.0], dtype=np.float32)
    probabilities = np.exp(logits) / np.exp(logits).sum()
    kept = {"raw": np.ones(5, dtype=bool)}
    distribution = TokenDistribution((("raw", probabilities),), kept, {"raw": 0.0}, tokens, logits)
    figures = [
        _spec(temperature_figure(logits, tokens, info=info)),
        _spec(stages_figure(distribution, info=info)),
        _spec(before_after_figure(tokens, probabilities, probabilities[::-1], ablated_label="x", info=info)),
    ]
    for spec in figures:
        _token_axes_are_categories(spec)
