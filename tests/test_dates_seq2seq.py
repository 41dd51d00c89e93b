"""The bundled encoder-decoder (``bundled/dates-t5``): small, accurate on held-out dates by transformers' own
``generate()``, equal to ``explorer.decode`` and ``explorer.capture`` like any model, with cross-attention a
class can read; and the pages offer it offline.

See ``explorer/assets/dates-t5/README.md`` and ``training/train_seq2seq.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

import explorer
from explorer.ui.caches import results_cache
from tests.devices import DEVICE
from tests.test_decoding import CASES, assert_same_as_generate, fill_tokens, generate

REPO = Path(__file__).resolve().parent.parent
FOLDER = REPO / "explorer" / "assets" / "dates-t5"
HELD_OUT = Path(__file__).resolve().parent / "data" / "dates_heldout.jsonl"
MAX_FOLDER_BYTES = 10 * 1024 * 1024
SOURCE, TARGET = "Thursday, March 5, 2021", "2021-03-05"


@pytest.fixture(scope="module")
def reference():
    """The folder loaded by transformers itself, eager attention: the reference for everything below."""
    tokenizer = AutoTokenizer.from_pretrained(FOLDER)
    model = AutoModelForSeq2SeqLM.from_pretrained(FOLDER, attn_implementation="eager").to(DEVICE).eval()
    return model, tokenizer


@pytest.fixture(scope="module")
def dates():
    return explorer.load_model(explorer.DEFAULT_SEQ2SEQ, device=DEVICE)


def held_out() -> list[dict]:
    return [json.loads(line) for line in HELD_OUT.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_small_enough_to_ship():
    assert sum(f.stat().st_size for f in FOLDER.iterdir()) <= MAX_FOLDER_BYTES
    assert (FOLDER / "README.md").read_text(encoding="utf-8").startswith("---")  # a model card


@torch.no_grad()
def test_at_least_95_percent_exact_match_on_held_out_dates(reference):
    model, tokenizer = reference
    examples = held_out()
    assert len(examples) >= 200
    batch = tokenizer([e["source"] for e in examples], return_tensors="pt", padding=True).to(DEVICE)
    out = model.generate(**batch, max_new_tokens=16, do_sample=False, num_beams=1)
    predictions = tokenizer.batch_decode(out, skip_special_tokens=True)
    exact = np.mean([p == e["target"] for p, e in zip(predictions, examples, strict=True)])
    assert exact >= 0.95, exact


@pytest.mark.parametrize("case", ["greedy", "beam-4-lp-early", "beam-ngram", "sample-all-warpers"])
def test_decode_equals_generate(dates, case):
    trace = explorer.decode(dates, SOURCE, **CASES[case])
    assert_same_as_generate(trace, generate(dates, SOURCE, CASES[case]), fill_tokens(dates))


def test_greedy_decoding_converts_the_example(dates):
    assert explorer.decode(dates, SOURCE, strategy="greedy", max_new_tokens=12).continuations[0].strip() == TARGET


def test_capture_equals_eager_attention_and_cross_attention_reads_the_date(reference, dates):
    model, tokenizer = reference
    captured = explorer.capture(dates, SOURCE, target=TARGET)
    assert set(captured.stacks) == {"encoder", "decoder", "cross"}
    assert captured.verify() < 1e-4
    inputs = tokenizer(SOURCE, return_tensors="pt").to(DEVICE)
    labels = tokenizer(text_target=TARGET, return_tensors="pt")["input_ids"].to(DEVICE)
    with torch.no_grad():
        out = model(**inputs, labels=labels, output_attentions=True)
    cross = captured.stacks["cross"]
    for layer, weights in enumerate(out.cross_attentions):
        np.testing.assert_allclose(cross.attentions[layer], weights[0].cpu().numpy(), atol=1e-6)
    # Readable: the decoder's row that writes each part of the date (teacher forcing: row q writes target token
    # q) looks hardest at the word it comes from, in every layer, heads averaged.
    written = [token.strip("▁ ") for token in tokenizer.convert_ids_to_tokens(labels[0].tolist())]
    sources = {"2021": "2021", "03": "March", "05": "5"}
    for layer in range(cross.num_layers):
        mean = cross.attentions[layer].mean(axis=0)
        for row, token in enumerate(written):
            if token in sources:
                assert cross.key_tokens[int(mean[row].argmax())].strip() == sources[token], (layer, token)


def open_page(page: str, **params) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=90)
    at.query_params.update(params)
    at.run()
    at.switch_page(page)
    return at.run()


def test_the_cross_attention_preset_opens_the_bundled_seq2seq_offline():
    at = open_page("pages/attention_heatmaps.py")
    next(b for b in at.button if "Cross-attention" in b.label).click().run()
    assert not at.exception
    assert at.session_state["model_name"] == explorer.DEFAULT_SEQ2SEQ
    assert at.radio(key="stack").value == "cross"
    title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert title.startswith("Attention weights · cross-attention")
    assert any("writes the first target token" in c.value for c in at.caption)


def test_the_decoding_pages_accept_the_bundled_seq2seq():
    results_cache().clear()
    at = open_page("pages/greedy_search.py", model=explorer.DEFAULT_SEQ2SEQ)
    assert not at.exception
    assert at.text_area(key="prompt").value == SOURCE  # its own example, not a novel's first line
    shown = " ".join(m.value for m in at.markdown).replace("\\", "")  # Markdown escapes taken out
    assert f"{SOURCE} → **{TARGET}**" in shown  # an output of its own, not a continuation of the input
