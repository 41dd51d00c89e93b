"""Exports whatever the labels hold (issue 18): control characters, bidi controls, noncharacters, emoji and
right-to-left words in prompts, token labels and titles never crash a renderer or the app, and every file is a
valid slide.

``test_every_export_of_every_page`` drives the same callables the export buttons run, on every page, with a
hostile prompt in every text field; the builder fuzz hands hostile labels straight to the figure builders.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.labels import visible
from explorer.render import FigureInfo, attention_heatmap, export
from explorer.render.sampling import distribution_panels
from explorer.render.style import SLIDE
from explorer.ui import figures
from tests.exports import check_export

pytestmark = pytest.mark.slow  # every export of every page, rendered: the full loop only (docs/contributing.md)

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "pages").glob("*.py"))

# What issue 18 listed: NUL, U+0017, U+001F, DEL, NEL, LRM, RLO, U+FFFE, an emoji ZWJ sequence, Hebrew, Arabic.
HOSTILE_PROMPT = "Hi \x00\x17\x1f\x7f\x85 \u200e\u202e \ufffe 👩\u200d👩\u200d👧 שלום مرحبا end"
HOSTILE_LABELS = [
    "\x00",
    "\x17",
    "\x1f",
    "\x7f",
    "\x85",
    "\u200e",
    "\u202e",
    "\ufffe",
    "\ud800",
    "👩\u200d👩\u200d👧",
    "שלום",
    "مرحبا",
    "x" * 5000,
]
TEXT_KEYS = ("prompt", "text", "text_b", "pair", "ctx_a", "ctx_b", "word", "target")


def _exports_of(page: str, monkeypatch) -> list:
    made = []
    real = figures._exporter

    def recording(build, info, fmt):
        make = real(build, info, fmt)
        made.append((info.title(), fmt, make))
        return make

    monkeypatch.setattr(figures, "_exporter", recording)
    at = AppTest.from_file("../app.py", default_timeout=180)
    at.query_params.update(
        {
            "model": explorer.DEFAULT_DECODER,
            "draw": "true",
            **dict.fromkeys(TEXT_KEYS, HOSTILE_PROMPT),
            # The Lecture page's slides have inputs of their own: a slide with a view (anatomy's first asks first).
            "deck": "generation",
            "slide": "2",
        }
    )
    at.run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    made.clear()
    at.run()  # the last run's buttons are the ones on the page
    assert not at.exception, at.exception
    return made


@pytest.mark.parametrize("page", PAGES)
def test_every_export_of_every_page(page, monkeypatch):
    made = _exports_of(page, monkeypatch)
    print(page, len(made))
    assert made  # every page, BertViz's views included (issue 26)
    for title, fmt, make in made:
        data = make()
        check_export(fmt, data)
        assert visible(title) == title  # the title the file carries is the one the screen shows


@pytest.fixture(scope="module")
def decoder():
    return explorer.load_model(explorer.DEFAULT_DECODER, device="cpu")


def _fuzzed_info(label: str) -> FigureInfo:
    return FigureInfo(
        f"View {label}", model=f"org/model{label[:50]}", text=f"before {label} after", where=(label[:30],)
    )


@pytest.mark.parametrize("label", HOSTILE_LABELS, ids=[f"U+{ord(x[0]):04X}x{len(x)}" for x in HOSTILE_LABELS])
def test_heatmap_builder_with_hostile_labels_exports_every_format(label, decoder):
    stack = explorer.capture(decoder, "one two three four").stacks["decoder"]
    hostile = tuple(f"{token}{label}" for token in stack.query_tokens)
    stack = dataclasses.replace(stack, query_tokens=hostile, key_tokens=hostile)
    info = _fuzzed_info(label)
    figure = attention_heatmap(stack, 0, 0, info=info, look=SLIDE)
    for fmt in export.FORMATS:
        check_export(fmt, export.export(figure, fmt, title=info.title()))


@pytest.mark.parametrize("label", HOSTILE_LABELS, ids=[f"U+{ord(x[0]):04X}x{len(x)}" for x in HOSTILE_LABELS])
def test_altair_builder_with_hostile_labels_exports_every_format(label, decoder):
    distribution = explorer.next_token_distribution(decoder, "It was a", top_k=5)
    tokens = list(distribution.tokens)
    for i in np.argsort(-distribution.final)[:5]:
        tokens[i] = f"{tokens[i]}{label}"
    distribution = dataclasses.replace(distribution, tokens=tuple(tokens))
    info = _fuzzed_info(label)
    chart = distribution_panels(distribution, info=info, look=SLIDE)
    for fmt in export.FORMATS:
        check_export(fmt, export.export(chart, fmt, title=info.title()))
