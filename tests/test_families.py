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
KNOWN_GAPS: dict[tuple[str, str], str] = {}


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


def test_every_tiny_config_names_token_ids_within_its_vocabulary():
    """A family's default special ids beyond the tiny vocabulary are made valid (Marian's decoder start token, 58100,
    failed its embedding lookup): no tiny model is refused for an id of the test's own making."""
    for model_type in families.FAMILIES:
        config = families.tiny_config(model_type)
        size = config.get_text_config().vocab_size
        ids = {name: value for name, value in config.to_dict().items() if name.endswith("_token_id")}
        assert all(0 <= value < size for value in ids.values() if isinstance(value, int)), (model_type, ids)
    assert families.tiny_config("marian").decoder_start_token_id == families.IDS["pad_token_id"]  # as its pad
