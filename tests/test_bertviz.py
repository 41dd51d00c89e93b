"""BertViz's views built offline: nothing to fetch, a compact payload that decodes to the capture, inert tokens."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import explorer
from explorer.render.bertviz import (
    decode_payload,
    frame_height,
    head_view_html,
    head_view_zoom,
    model_view_html,
    payload,
)
from tests.devices import DEVICE

XSS = "</script><img src=x onerror=alert(1)>"


def _embedded(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="bertviz-data">(.*?)</script>', page, re.S)[1])


@pytest.mark.parametrize("view", [head_view_html, model_view_html])
def test_views_need_nothing_from_the_internet(minilm, view):
    page = view(explorer.capture(minilm, "time flies like an arrow"), uid="bertviz-pinned")
    assert not re.search(r"(src|href)\s*=\s*[\"']?https?://", page)
    assert "cdnjs" not in page.split("require.config")[0]  # the only CDN URLs left are in BertViz's inert config
    assert "d3js.org" in page and "jQuery" in page  # d3 and jQuery are inlined (their licence headers)
    assert 'id="bertviz-pinned"' in page


def test_the_payload_decodes_to_the_capture_within_8_bits(minilm):
    capture = explorer.capture(minilm, "time flies like an arrow", text_pair="fruit flies like a banana")
    filters = decode_payload(payload(capture))
    assert [f["name"] for f in filters] == [
        "All",
        "Sentence A -> Sentence A",
        "Sentence B -> Sentence B",
        "Sentence A -> Sentence B",
        "Sentence B -> Sentence A",
    ]
    np.testing.assert_allclose(filters[0]["attn"], capture.attentions, atol=1 / 510 + 1e-7)
    b = capture.segment_b_start
    np.testing.assert_allclose(filters[3]["attn"], capture.attentions[..., :b, b:], atol=1 / 510 + 1e-7)
    assert filters[3]["left_text"] == list(capture.tokens[:b]) and filters[3]["right_text"] == list(capture.tokens[b:])


def test_payload_is_far_smaller_than_bertvizs_json(minilm):
    from bertviz import head_view

    capture = explorer.capture(minilm, "the quick brown fox jumps over the lazy dog " * 6)
    ours = len(json.dumps(payload(capture)))
    import torch

    theirs = len(
        head_view(
            attention=[torch.tensor(a)[None] for a in capture.attentions],
            tokens=list(capture.tokens),
            html_action="return",
        ).data
    )
    assert ours * 5 < theirs


def test_encoder_decoder_filters(tiny_models):
    lm = explorer.load_model(tiny_models["t5"], device=DEVICE)
    capture = explorer.capture(lm, "the cat sat", target="a dog ran")
    filters = decode_payload(payload(capture))
    assert [f["name"] for f in filters] == ["Encoder", "Decoder", "Cross"]
    cross = filters[2]
    assert cross["attn"].shape[-2:] == (len(capture.target_tokens), len(capture.tokens))
    assert cross["left_text"] == list(capture.target_tokens)


def test_layers_and_heads_can_be_limited(minilm):
    capture = explorer.capture(minilm, "time flies like an arrow")
    filters = decode_payload(payload(capture, layers=[1, 3], heads=[0, 5]))
    assert filters[0]["attn"].shape[:2] == (2, 2)
    np.testing.assert_allclose(filters[0]["attn"][1, 1], capture.attentions[3, 5], atol=1 / 510 + 1e-7)


def test_tokens_cannot_close_the_script_or_inject_markup(tiny_models):
    lm = explorer.load_model(tiny_models["gpt2"], device=DEVICE)
    capture = explorer.capture(lm, "the cat")
    stack = capture.main
    import dataclasses

    hostile = dataclasses.replace(
        stack, query_tokens=(XSS, "[a](javascript:alert(1))"), key_tokens=(XSS, "[a](javascript:alert(1))")
    )
    capture = dataclasses.replace(capture, stacks={"decoder": hostile}, tokens=hostile.query_tokens)
    page = head_view_html(capture, uid="bertviz-x")
    data = re.search(r'id="bertviz-data">(.*?)</script>', page, re.S)[1]
    assert "</script>" not in data and "<img" not in data
    assert decode_payload(json.loads(data))[0]["left_text"][0] == XSS  # the text itself is intact


def test_the_head_view_opens_at_the_layer_asked_for(minilm):
    """BertViz finds the first layer by its number among the layers sent, not by its index in them."""
    capture = explorer.capture(minilm, "time flies like an arrow")
    params = _embedded(head_view_html(capture, layers=[3], heads=[1], layer=3))["params"]
    assert (params["layer"], params["include_layers"]) == (3, [3])
    assert _embedded(head_view_html(capture, layers=[2, 4]))["params"]["layer"] == 2


def test_a_zoomed_head_view_fills_the_room_it_is_given(minilm):
    capture = explorer.capture(minilm, "time flies like an arrow")
    zoom = head_view_zoom(capture, 600)
    assert 1 < zoom <= 3 and abs(frame_height("head", capture, zoom=zoom) - 600) <= 1
    assert "zoom: 1;" in head_view_html(capture) and "#vis line" not in head_view_html(capture)
    assert f"zoom: {zoom:g};" in head_view_html(capture, zoom=zoom) and "#vis line" in head_view_html(
        capture, zoom=zoom
    )
    assert head_view_zoom(capture, 10) == 1.0
