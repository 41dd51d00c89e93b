"""The two decoding controls that used to run the model on every move answer from the cache: the greedy page's
Steps (its decoding to the slider's maximum, cut: greedy search is prefix-consistent) and Compare strategies'
temperature (every value of the slider sampled at once, one row each of one batch). What the page shows after a move
equals a fresh ``explorer.decode`` to those settings (itself equal to generate(), tests/test_decoding.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from explorer.compute.decoding import greedy_table, mark_leading_space
from explorer.models.decoding import decode
from explorer.ui.decoding import PAGE_MAX_STEPS, TEMPERATURES, slider_values
from explorer.ui.text import literal, literal_table
from tests.figures import decode_plotly_array
from tests.test_app_decoding import DECODER, PROMPT, count_runs, figure, open_page, prose  # noqa: F401 (fixtures)
from tests.test_decoding import assert_same_as_generate, fill_tokens, generate


def shows_greedy(at, lm, trace) -> None:
    """The greedy page shows ``trace``: its table, its candidates grid, its log-probability and its tokens."""
    assert not at.exception
    expected = literal_table(pd.DataFrame(greedy_table(trace, lm.tokenizer, context_chars=48)).drop(columns="chosen"))
    shown_table = at.table[0].value  # the page's wrapping table (no "chosen" column without a branch)
    assert list(shown_table.columns) == list(expected.columns)
    assert shown_table.astype(str).values.tolist() == expected.astype(str).values.tolist()
    shown = decode_plotly_array(figure(at)["data"][0]["z"])
    np.testing.assert_array_equal(shown, np.array([s.candidate_probs[0] for s in trace.steps]).T)
    assert at.metric[0].value == f"{float(trace.sequence_logprobs[0]):.2f}"
    tokens = " · ".join(literal(mark_leading_space(token)) for token in trace.generated_tokens[0])
    assert any(caption.value == f"Tokens: {tokens}" for caption in at.caption)


def test_moving_greedy_steps_never_runs_the_model_again(prose, count_runs):  # noqa: F811
    at = open_page("pages/greedy_search.py", model=DECODER, steps="6")
    assert count_runs == [("decode", "greedy")]  # one decoding, to the slider's maximum
    shows_greedy(at, prose, decode(prose, PROMPT, strategy="greedy", max_new_tokens=6, top_n=5))
    for steps in (3, 12, 1, PAGE_MAX_STEPS, 7):
        at.slider(key="steps").set_value(steps).run()
        shows_greedy(at, prose, decode(prose, PROMPT, strategy="greedy", max_new_tokens=steps, top_n=5))
    assert count_runs == [("decode", "greedy")]


def test_moving_steps_on_a_branch_never_runs_the_model_again(prose, count_runs):  # noqa: F811
    own = decode(prose, PROMPT, strategy="greedy", max_new_tokens=4, top_n=5)
    force = (int(own.steps[0].chosen_ids[0]), int(own.steps[1].candidate_ids[0][2]))
    at = open_page("pages/greedy_search.py", model=DECODER, steps="5", force=",".join(map(str, force)))
    assert count_runs == [("decode", "greedy")] * 2  # the model's own continuation and the branch
    for steps in (9, 2, 5):
        at.slider(key="steps").set_value(steps).run()
        assert not at.exception
        mine = decode(prose, PROMPT, strategy="greedy", max_new_tokens=steps, top_n=5)
        longer = max(steps, len(force) + 1)
        branch = decode(prose, PROMPT, strategy="greedy", max_new_tokens=longer, top_n=5, force=force)
        assert [m.value for m in at.metric][:2] == [f"{float(t.sequence_logprobs[0]):.2f}" for t in (mine, branch)]
    assert count_runs == [("decode", "greedy")] * 2


def test_compare_strategies_temperature_moves_are_answered_from_the_cache(prose, count_runs):  # noqa: F811
    at = open_page("pages/compare_strategies.py", model=DECODER, steps="6", beams="3", seed="2")
    assert not at.exception
    values = len(slider_values(*TEMPERATURES))
    # Greedy search and every temperature in one batched decoding: beam search alone runs on its own.
    assert sorted(count_runs) == sorted([("decode", "beam"), ("decode together", ("greedy",) + ("sample",) * values)])
    count_runs.clear()
    for temperature in (0.5, 2.5, 0.25, 1.25):
        at.slider(key="temperature").set_value(temperature).run()
        assert not at.exception
        case = dict(strategy="sample", max_new_tokens=6, temperature=temperature, seed=2)
        fresh = decode(prose, PROMPT, top_n=5, **case)
        assert at.subheader[2].value == f"Sampling (T = {temperature:g}, seed 2)"
        assert at.metric[2].value == f"{float(fresh.sequence_logprobs[0]):.2f}"
        assert at.caption[2].value == f"{len(fresh.generated_tokens[0])} tokens generated"
        assert_same_as_generate(fresh, generate(prose, PROMPT, case), fill_tokens(prose))
        assert fresh.continuations[0].strip()[:20] in at.markdown[2].value.replace("\\", "")
    assert count_runs == []
