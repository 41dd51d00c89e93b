"""The coverage matrix (issue 40): every text family of transformers, every feature, against plain transformers.

``tests/families.py`` builds each family's tiny model and marks each feature Y / clear error / n/a / FAIL against
its reference (see docs/supported-models.md, which is the matrix). A FAIL is a crash or a number off its reference:
silently wrong. Each one the explorer still has is listed in ``KNOWN_GAPS`` with the reason; the test fails on any
other FAIL, and on a listed gap that now passes (delete its entry), so that the list stays true.
"""

from __future__ import annotations

import difflib

import pytest

from tests import families

pytestmark = pytest.mark.slow  # some 200 families built and run: the full loop only (docs/contributing.md)

# (family, feature) -> why it fails today, measured with transformers 5.23 (the comment: the cell's note). Delete an
# entry when its fix lands: the test says which.
HYBRID_CACHE = "issue 40: a hybrid cache (linear-attention or SSM layers first): get_seq_length crashes"
FIRST_LAYER = "issue 40: the Tokens page's check is not what the first layer receives"
SUM_SHAPE = "issue 40: the Tokens page's summed rows have another shape than the first layer's input"
IG = "issue 40: integrated gradients miss completeness at the page's steps (item 4)"
GEMMA4_CAPTURE = "issue 40: capture crashes: the keys are wider than it allocates"
VERIFY = "issue 40: verify() is off although the weights are the model's own"
CACHE_LOGITS = "issue 40: the KV cache view's logits with and without the cache differ"
DECODE = "issue 40: decode() differs from generate() with the same settings"
KNOWN_GAPS: dict[tuple[str, str], str] = {
    ("bailing_hybrid", "greedy"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("bailing_hybrid", "input vectors"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("bamba", "greedy"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("bamba", "input vectors"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("cpmant", "input vectors"): FIRST_LAYER,  # the first layer's input off by 6.1
    ("deepseek_v4", "input vectors"): SUM_SHAPE,  # the summed rows: shape (6, 32), what the first layer receive
    ("falcon_mamba", "input vectors"): FIRST_LAYER,  # the first layer's input off by 0.067
    ("fsmt", "input vectors"): "issue 40: AttributeError: 'FSMTEncoder' object has no attribute 'get_input_embeddings'",
    ("gemma2", "attribution"): IG,  # completeness error +0.0088 (4%)
    ("gemma3n_text", "input vectors"): FIRST_LAYER,  # the first layer's input: shape (1, 6, 32), the reference's (
    ("gemma4_text", "capture"): GEMMA4_CAPTURE,  # ValueError: could not broadcast input array from shape (4,6,
    ("gemma4_text", "verify"): GEMMA4_CAPTURE,  # ValueError: could not broadcast input array from shape (4,6,
    ("gemma4_unified_text", "capture"): GEMMA4_CAPTURE,  # ValueError: could not broadcast input array from shape (4,6,
    ("gemma4_unified_text", "verify"): GEMMA4_CAPTURE,  # ValueError: could not broadcast input array from shape (4,6,
    ("gpt_oss", "attribution"): IG,  # completeness error -0.035 (16%)
    ("granite_swa", "verify"): VERIFY,  # verify() = 0.52 (tolerance 0.0001)
    ("granitemoe_swa", "verify"): VERIFY,  # verify() = 0.52 (tolerance 0.0001)
    ("granitemoehybrid", "greedy"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("granitemoehybrid", "input vectors"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("hy_v4", "input vectors"): SUM_SHAPE,  # the summed rows: shape (6, 32), what the first layer receive
    ("ibert", "input vectors"): "issue 40: AttributeError: 'tuple' object has no attribute 'shape'",
    ("kimi_linear", "greedy"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("kimi_linear", "input vectors"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("lfm3", "greedy"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("lfm3", "input vectors"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("longt5", "attribution"): IG,  # completeness error +0.0058 (7%)
    ("mamba", "input vectors"): FIRST_LAYER,  # the first layer's input off by 0.077
    ("mamba2", "input vectors"): FIRST_LAYER,  # the first layer's input off by 1.5
    ("mimo_v2_flash", "verify"): VERIFY,  # verify() = 0.01 (tolerance 0.0001)
    ("mixtral", "attribution"): IG,  # completeness error -0.0029 (1%)
    ("neomme", "input vectors"): SUM_SHAPE,  # the summed rows: shape (8, 256), what the first layer receiv
    ("pegasus_x", "input vectors"): SUM_SHAPE,  # the summed rows: shape (7, 32), what the first layer receive
    ("prophetnet", "kv cache"): CACHE_LOGITS,  # logits with and without the cache differ by 0.00034
    ("qwen3_5_moe_text", "greedy"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("qwen3_5_moe_text", "input vectors"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("qwen3_5_text", "greedy"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("qwen3_5_text", "input vectors"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("qwen3_moe", "attribution"): IG,  # completeness error -0.0097 (3%)
    ("qwen3_next", "attribution"): IG,  # completeness error +0.011 (5%)
    ("qwen4_exp_text", "greedy"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("qwen4_exp_text", "input vectors"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("recurrent_gemma", "greedy"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("recurrent_gemma", "input vectors"): HYBRID_CACHE,  # ValueError: `get_seq_length` can only be called on Attention
    ("switch_transformers", "attribution"): IG,  # completeness error -0.03 (17%)
    ("t5", "attribution"): IG,  # completeness error -0.0081 (5%)
    ("xlnet", "greedy"): DECODE,  # differs from generate(): [[14, 15, 16, 17, 14, 18, 18, 23, 2
    ("xlstm", "greedy"): "issue 40: ValueError: matC_old has wrong shape, got torch.Size([1, 4, 16, 16])",
    ("xlstm", "input vectors"): "issue 40: ValueError: matC_old has wrong shape, got torch.Size([1, 4, 16, 16])",
}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """{family: {feature: Cell}}, every family built, saved and loaded once for the module."""
    root = tmp_path_factory.mktemp("families")
    return str(root), families.coverage(root)


def test_no_feature_is_silently_wrong_outside_the_known_gaps(matrix):
    _, found = matrix
    failures = {
        (family, feature): cell.note
        for family, row in found.items()
        for feature, cell in row.items()
        if cell.mark == families.FAIL
    }
    new = {key: note for key, note in failures.items() if key not in KNOWN_GAPS}
    fixed = sorted(key for key in KNOWN_GAPS if key not in failures)
    assert not new, "FAIL outside KNOWN_GAPS:\n" + "\n".join(f"{key}: {note}" for key, note in sorted(new.items()))
    assert not fixed, f"these known gaps now pass: delete them from KNOWN_GAPS: {fixed}"


def test_every_error_says_why_and_every_na_gives_its_reason(matrix):
    _, found = matrix
    silent = [
        (family, feature)
        for family, row in found.items()
        for feature, cell in row.items()
        if cell.mark in (families.ERROR, families.NA) and not cell.note.strip()
    ]
    assert not silent


def test_the_families_the_issue_names_are_in_the_matrix(matrix):
    _, found = matrix
    assert set(families.ISSUE_FAMILIES) <= set(found)
    assert len(found) >= 88


def test_the_supported_models_page_is_the_matrix(matrix):
    root, found = matrix
    page, written = families.render(found, root), families.DOCS.read_text()
    changed = difflib.unified_diff(written.splitlines(), page.splitlines(), "written", "measured", n=0, lineterm="")
    assert written == page, "stale: python -m tests.families --write-docs\n" + "\n".join(list(changed)[:40])
