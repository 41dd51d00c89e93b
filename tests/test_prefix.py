"""Greedy search is prefix-consistent: a decoding to N steps cut to its first k (``first_steps``) is, field for
field, ``explorer.decode`` run to k steps, and its tokens are ``generate(max_new_tokens=k, do_sample=False)``'s.

The greedy page decodes once to its slider's maximum and cuts: these tests are why a move of its Steps slider
may skip the model. Tiny random GPT-2, Llama (grouped KV heads) and T5 with their end of sequence made likely
(decodings that stop early), the bundled decoder, the bundled dates-t5; plain, with penalties, with forced tokens.
"""

from __future__ import annotations

import pytest

import explorer
from explorer.compute.decoding import first_steps, prefix_consistent
from tests.test_decoding import PROMPTS, _make_end_of_sequence_likely, assert_same_as_generate, fill_tokens, generate
from tests.test_force import DATES_SOURCE, _fields, branch, generate_forced

LONGEST = 12
SETTINGS = {
    "plain": {},
    "penalties": dict(repetition_penalty=1.3, no_repeat_ngram_size=2),
}
# The tiny models' own prompts stop early (their third greedy token is their end of sequence); others too.
LONG_PROMPTS = {"gpt2": "time flies like an arrow", "llama": "the cat sat on the mat", "t5": "a banana"}


@pytest.fixture(scope="module")
def models(tiny_models):
    loaded = {name: explorer.load_model(tiny_models[name]) for name in ("gpt2", "llama", "t5")}
    for name in ("gpt2", "llama", "t5"):
        _make_end_of_sequence_likely(loaded[name], PROMPTS[name])
    loaded["prose"] = explorer.load_model(explorer.DEFAULT_DECODER)
    loaded["dates"] = explorer.load_model(explorer.DEFAULT_SEQ2SEQ)
    return loaded


def prompts_of(name: str) -> list[str]:
    if name == "dates":
        return [DATES_SOURCE]
    return [PROMPTS[name], *([LONG_PROMPTS[name]] if name in LONG_PROMPTS else [])]


@pytest.mark.parametrize("settings", sorted(SETTINGS))
@pytest.mark.parametrize("name", ["gpt2", "llama", "t5", "prose", "dates"])
def test_a_greedy_decoding_cut_to_k_steps_is_the_decoding_to_k_steps(models, name, settings):
    lm = models[name]
    for prompt in prompts_of(name):
        longest = explorer.decode(lm, prompt, strategy="greedy", max_new_tokens=LONGEST, **SETTINGS[settings])
        assert prefix_consistent(longest)
        for k in range(1, LONGEST + 1):
            cut = first_steps(longest, k, lm.tokenizer)
            fresh = explorer.decode(lm, prompt, strategy="greedy", max_new_tokens=k, **SETTINGS[settings])
            assert _fields(cut) == _fields(fresh), (prompt, k)
            case = dict(strategy="greedy", max_new_tokens=k, **SETTINGS[settings])
            assert_same_as_generate(cut, generate(lm, prompt, case), fill_tokens(lm))


def test_the_tiny_models_cover_decodings_that_end_before_the_maximum(models):
    """The cases above include an end of sequence before the maximum (cuts past it return it whole)."""
    ended = [explorer.decode(models[n], PROMPTS[n], strategy="greedy", max_new_tokens=LONGEST) for n in LONG_PROMPTS]
    assert all(trace.num_steps < LONGEST for trace in ended)
    long = explorer.decode(models["prose"], PROMPTS["prose"], strategy="greedy", max_new_tokens=LONGEST)
    assert long.num_steps == LONGEST


@pytest.mark.parametrize("name", ["gpt2", "llama", "t5", "prose", "dates"])
def test_a_forced_branch_cut_to_k_steps_is_the_branch_decoded_to_k_steps(models, name):
    lm = models[name]
    prompt = prompts_of(name)[-1]
    force = branch(lm, prompt)
    longest = explorer.decode(lm, prompt, strategy="greedy", max_new_tokens=LONGEST, force=force)
    for k in range(len(force) + 1, LONGEST + 1):
        cut = first_steps(longest, k, lm.tokenizer)
        assert _fields(cut) == _fields(explorer.decode(lm, prompt, strategy="greedy", max_new_tokens=k, force=force))
        reference = generate_forced(lm, prompt, dict(strategy="greedy", max_new_tokens=k), force)
        assert_same_as_generate(cut, reference, fill_tokens(lm))
    with pytest.raises(ValueError):  # decode itself refuses: the forced tokens must leave one step to choose
        first_steps(longest, len(force), lm.tokenizer)


def test_what_is_not_prefix_consistent_is_not_cut(models):
    lm = models["prose"]
    prompt = PROMPTS["prose"]
    for strategy in ("beam", "sample"):
        trace = explorer.decode(lm, prompt, strategy=strategy, max_new_tokens=6, num_beams=3, seed=1)
        assert not prefix_consistent(trace)
        with pytest.raises(ValueError):
            first_steps(trace, 3, lm.tokenizer)
    # A prompt too long for prompt + maximum is cut from the left by the room the maximum leaves: a shorter
    # maximum keeps more of it, so the decoding to fewer steps starts from a different prompt.
    words = " and".join([" it was a truth"] * (lm.max_tokens // 2))  # past the model's context, whatever its length
    longest = explorer.decode(lm, words, strategy="greedy", max_new_tokens=LONGEST)
    shorter = explorer.decode(lm, words, strategy="greedy", max_new_tokens=4)
    assert len(shorter.prompt_ids) > len(longest.prompt_ids) and longest.notes
    assert not prefix_consistent(longest)
    with pytest.raises(ValueError):
        first_steps(longest, 4, lm.tokenizer)
    with pytest.raises(ValueError):  # past the maximum, nothing to cut from
        first_steps(explorer.decode(lm, prompt, strategy="greedy", max_new_tokens=4), 5, lm.tokenizer)
