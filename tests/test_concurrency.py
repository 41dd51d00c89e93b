"""One cached model serves every visitor: concurrent captures must not see each other's records."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

import explorer

TEXTS = [
    "time flies like an arrow",
    "fruit flies like a banana and a much longer sentence follows here",
    "the cat sat",
    "a completely different text with its own attention pattern, longer still than the others",
] * 3


def test_threads_get_exactly_what_sequential_calls_get(minilm):
    sequential = [explorer.capture(minilm, text) for text in TEXTS]
    with ThreadPoolExecutor(max_workers=6) as pool:
        concurrent = list(pool.map(lambda text: explorer.capture(minilm, text), TEXTS))
    for alone, together in zip(sequential, concurrent, strict=True):
        assert alone.tokens == together.tokens
        np.testing.assert_array_equal(alone.attentions, together.attentions)
        np.testing.assert_array_equal(alone.queries, together.queries)
        np.testing.assert_array_equal(alone.keys, together.keys)
    assert minilm.model.config._attn_implementation == "explorer_capture"


def test_no_recording_outside_capture(minilm):
    from explorer.models import recorder

    assert recorder._recording.get() is None
    explorer.capture(minilm, "time flies")
    assert recorder._recording.get() is None
