"""The real pretrained all-MiniLM-L6-v2 (from its PyPI package): capture equals its own eager attention."""

from __future__ import annotations

import numpy as np
import torch
from transformers import AutoModel

import explorer
from explorer.models.loading import resolve_source
from tests.devices import DEVICE


def test_default_encoder_loads_offline(minilm):
    assert (minilm.kind, minilm.num_layers, minilm.num_heads) == ("encoder", 6, 12)
    assert minilm.model.config._attn_implementation == "explorer_capture"


def test_minilm_matches_its_eager_attention(minilm):
    cap = explorer.capture(minilm, "time flies like an arrow", text_pair="fruit flies like a banana")
    reference = AutoModel.from_pretrained(resolve_source(explorer.DEFAULT_ENCODER), attn_implementation="eager")
    reference = reference.to(DEVICE).eval()
    encoded = minilm.tokenizer("time flies like an arrow", "fruit flies like a banana", return_tensors="pt").to(DEVICE)
    with torch.no_grad():
        expected = torch.stack([a[0] for a in reference(**encoded, output_attentions=True).attentions]).cpu().numpy()
    assert cap.tokens[:3] == ("[CLS]", "time", "flies")
    assert cap.segment_b_start == cap.tokens.index("[SEP]") + 1
    np.testing.assert_allclose(cap.attentions, expected, rtol=0, atol=1e-6)
    assert cap.verify() <= 1e-5
    np.testing.assert_allclose(cap.attentions.sum(-1), 1.0, atol=1e-5)


def test_long_text_is_truncated_with_a_count(minilm):
    cap = explorer.capture(minilm, "word " * 600)
    assert len(cap.tokens) == 512
    assert cap.truncated == 600 + 2 - 512
    assert cap.tokens[-1] == "[SEP]"


def test_empty_text_is_an_input_error(minilm):
    import pytest

    for text in ("", "   \n"):
        with pytest.raises(explorer.InputError, match="Type some text"):
            explorer.capture(minilm, text)


def test_captured_arrays_are_read_only(minilm):
    """Captures are cached and shared between sessions: nobody may write into them."""
    cap = explorer.capture(minilm, "time flies")
    assert not cap.attentions.flags.writeable
    assert not cap.queries.flags.writeable
