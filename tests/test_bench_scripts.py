"""Every benchmark in bench/ runs, on a tiny setting: its command line is parsed, it measures, and it prints its
table with a row for each case asked. How fast is never asserted (bench/ measures that, as ratios in one run);
what this guards is a benchmark that no longer starts after a change elsewhere. bench_class.py and bench_lecture.py
have tests of their own (test_bench_class.py, test_bench_lecture.py), which drive their students and presenter.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.browser import ROOT, browser_test

pytestmark = pytest.mark.slow  # a whole program or export per test: the full loop only (docs/contributing.md)

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
NUMBER = r"[0-9][0-9.,]*"


def bench(script: str, *args: str) -> str:
    """``python bench/<script> <args>`` from the repository's root, offline: its standard output."""
    done = subprocess.run(
        [sys.executable, f"bench/{script}", *args],
        cwd=ROOT,
        env={**os.environ, **OFFLINE},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def table_rows(output: str) -> list[list[str]]:
    """The cells of each row of the Markdown table printed, header and rule left out."""
    lines = [line for line in output.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_capture_against_a_plain_forward():
    output = bench("bench_capture.py", "--repeats", "1", "--lengths", "16", "--gpt2", "2", "2", "16")
    rows = table_rows(output)
    assert [row[:2] for row in rows] == [["MiniLM-L6 (6x12)", "16"], ["GPT-2-shaped (2x2)", "16"]]
    for row in rows:  # three times in ms, two ratios
        assert all(re.fullmatch(NUMBER, cell) for cell in row[2:5]), row
        assert all(re.fullmatch(NUMBER + "x", cell) for cell in row[5:]), row


def test_decode_against_generate():
    output = bench(
        "bench_decode.py", "--repeats", "1", "--new-tokens", "2", "--prompt-lengths", "8", "--beams", "1", "2",
        "--gpt2", "2", "2", "16",
    )  # fmt: skip
    rows = table_rows(output)
    assert [row[:3] for row in rows] == [["8", "1", "2"], ["8", "2", "2"]]  # prompt tokens, beams, steps
    assert all(re.fullmatch(NUMBER + "x", row[5]) for row in rows), rows
    assert re.search(rf"geometric mean decode / generate: {NUMBER}x", output)


def test_payload_against_bertviz():
    rows = table_rows(bench("bench_payload.py", "--lengths", "16"))
    assert len(rows) == 1 and rows[0][0] == "16"
    assert all(re.fullmatch(rf"{NUMBER} kB|{NUMBER}x", cell) for cell in rows[0][1:]), rows


def test_integrated_gradients_path_on_the_tiny_t5():
    output = bench("bench_ig_path.py", "--model", "tiny T5", "--repeats", "1")
    assert "tiny T5" in output and "dates-t5" not in output
    (row,) = table_rows(output.split("\n## tiny T5")[0])  # against Captum: change, three errors, counts, times
    assert row[0] == "tiny T5" and all(re.fullmatch(r"[-+]?[0-9.]+e[-+][0-9]+|[-+][0-9.]+", c) for c in row[1:5]), row
    assert all(re.fullmatch(r"[0-9]+ / [0-9]+", c) for c in row[5:7]) and re.fullmatch(NUMBER + "x", row[9]), row
    assert re.search(r"explorer\.attribute delta / change, 64: [-+]\S+, 256: [-+]\S+", output), output


@browser_test
def test_pages_in_a_browser(app_url):
    """One page, once, on the worker's running server (`--url`): opened in Chromium, its figure timed and its
    exports clicked."""
    rows = table_rows(bench("bench_pages.py", "--page", "attention_heatmaps", "--repeats", "1", "--url", app_url))
    assert rows and rows[-1][0] == "attention_heatmaps", rows
    assert len(rows[-1]) == 6, rows
