"""``decode_together``: greedy search and sampling variants of one prompt in one batched decoding give, for each
variant, exactly what ``generate()`` gives with its settings, and what ``decode`` gives alone (Compare strategies
computes greedy search and its temperature slider's values this way: a move then runs no model)."""

from __future__ import annotations

import numpy as np
import pytest

import explorer
from explorer.models.decoding import MAX_VARIANTS, decode_together
from tests.devices import DEVICE
from tests.test_decoding import (  # noqa: F401
    FAMILY_PROMPT,
    PROMPTS,
    assert_same_as_generate,
    build_cheap,
    fill_tokens,
    generate,
    models,
)

TEMPERATURES = (0.01, 0.25, 0.5, 1.0, 1.5, 2.5)  # 0.01: nearly greedy, so it ends at the end token made likely
# Greedy search, then sampling at each temperature (each variant with its own seed), then one with its own penalties.
VARIANTS = (
    {"strategy": "greedy"},
    *({"strategy": "sample", "temperature": t, "seed": 5 + index} for index, t in enumerate(TEMPERATURES)),
    {"strategy": "sample", "temperature": 0.8, "seed": 2, "repetition_penalty": 1.3, "no_repeat_ngram_size": 3},
)
CASES = {
    "plain": dict(max_new_tokens=12),
    "penalty-and-ban": dict(max_new_tokens=10, no_repeat_ngram_size=2, repetition_penalty=1.2),
}


def assert_same_trace(batched, alone) -> None:
    """The same tokens, steps and candidates; the numbers up to float32 rounding (a batch's matrix products
    may add in another order than one row's)."""
    assert [s.tolist() for s in batched.sequences] == [s.tolist() for s in alone.sequences]
    assert batched.settings == alone.settings and batched.continuations == alone.continuations
    assert batched.num_steps == alone.num_steps
    for ours, theirs in zip(batched.steps, alone.steps, strict=True):
        np.testing.assert_array_equal(ours.chosen_ids, theirs.chosen_ids)
        np.testing.assert_array_equal(ours.candidate_ids, theirs.candidate_ids)
        np.testing.assert_allclose(ours.candidate_probs, theirs.candidate_probs, atol=1e-5)
        np.testing.assert_allclose(ours.candidate_logprobs, theirs.candidate_logprobs, atol=1e-4)
        np.testing.assert_allclose(ours.entropy, theirs.entropy, atol=1e-4)
    np.testing.assert_allclose(batched.sequence_logprobs, alone.sequence_logprobs, rtol=1e-5)
    assert [(b.step, b.row, b.token_id) for b in batched.bans] == [(b.step, b.row, b.token_id) for b in alone.bans]


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("name", ["gpt2", "llama", "t5", "prose"])
def test_each_variant_equals_generate_and_decode_alone(models, name, case):  # noqa: F811
    lm = models[name]  # the tiny ones end early (their end of sequence made likely): lanes stop at different steps
    common = {"max_new_tokens": CASES[case]["max_new_tokens"], "top_n": 4}
    own = {k: v for k, v in CASES[case].items() if k != "max_new_tokens"}  # the case's settings, for every sample
    variants = [variant if variant["strategy"] == "greedy" else {**variant, **own} for variant in VARIANTS]
    traces = decode_together(lm, PROMPTS[name], variants, **common)
    assert len(traces) == len(variants)
    for variant, trace in zip(variants, traces, strict=True):
        settings = {**common, **variant}
        reference = generate(lm, PROMPTS[name], {"seed": 0, **settings})
        assert_same_as_generate(trace, reference, fill_tokens(lm))
        assert_same_trace(trace, explorer.decode(lm, PROMPTS[name], **settings))
    if name in ("gpt2", "t5"):  # there the nearly greedy lane ends early, the others go on: each stops alone
        assert len({trace.num_steps for trace in traces}) > 1


def test_the_variants_share_every_forward_pass(models, monkeypatch):  # noqa: F811
    lm = models["prose"]
    rows = []
    real_forward = lm.model.forward

    def counting(*args, **kwargs):
        rows.append(kwargs["input_ids"].shape[0])
        return real_forward(*args, **kwargs)

    monkeypatch.setattr(lm.model, "forward", counting)
    traces = decode_together(lm, PROMPTS["prose"], VARIANTS, max_new_tokens=6)
    assert rows[0] == 1  # the prompt once
    assert rows[1:] == [len(VARIANTS)] * (max(trace.num_steps for trace in traces) - 1)


def test_forced_tokens_and_ablated_heads_apply_to_every_variant(models):  # noqa: F811
    lm = models["prose"]
    force = tuple(lm.tokenizer(" the river", add_special_tokens=False)["input_ids"])
    shared = dict(max_new_tokens=8, force=force, ablate=(("decoder", 0, 1),))
    traces = decode_together(lm, PROMPTS["prose"], VARIANTS, **shared)
    for variant, trace in zip(VARIANTS, traces, strict=True):
        assert_same_trace(trace, explorer.decode(lm, PROMPTS["prose"], **variant, **shared))
        assert trace.sequences[0][len(trace.prompt_ids) : len(trace.prompt_ids) + len(force)].tolist() == list(force)


def test_variants_through_a_state_space_cache_equal_generate_and_decode_alone(tmp_path):
    """Mamba's cache cannot repeat its rows: the prompt runs with a row per variant's sequence, as in generate()."""
    lm = explorer.load_model(build_cheap("mamba", tmp_path / "mamba"), device=DEVICE)
    variants = [VARIANTS[0], VARIANTS[3], {**VARIANTS[5], "no_repeat_ngram_size": 2}]
    traces = decode_together(lm, FAMILY_PROMPT, variants, max_new_tokens=4, top_n=4)
    for variant, trace in zip(variants, traces, strict=True):
        settings = {"max_new_tokens": 4, "top_n": 4, **variant}
        assert_same_as_generate(trace, generate(lm, FAMILY_PROMPT, {"seed": 0, **settings}), fill_tokens(lm))
        assert_same_trace(trace, explorer.decode(lm, FAMILY_PROMPT, **settings))


SAMPLE = {"strategy": "sample", "temperature": 0.5}


@pytest.mark.parametrize(
    ("variants", "shared", "message"),
    [
        ((), {}, "1 to"),
        ((SAMPLE,) * (MAX_VARIANTS + 1), {}, "1 to"),
        ((SAMPLE, {"strategy": "beam", "num_beams": 2}), {}, "greedy search or sampling"),
        ((SAMPLE, {"strategy": "sample", "max_new_tokens": 4}), {}, "sets only"),
        ((SAMPLE, {"strategy": "sample", "temperature": 0.0}), {}, "temperature"),
        ((SAMPLE, {"strategy": "sample", "repetition_penalty": float("nan")}), {}, "repetition_penalty"),
        ((SAMPLE, {"strategy": "sample", "top_p": 0.9}), {}, "sets only"),
        ((SAMPLE,), {"top_k": 5}, "decode alone"),
        ((SAMPLE,), {"min_p": 0.1}, "decode alone"),
        ((SAMPLE,), {"max_new_tokens": 10_000}, "max_new_tokens"),
    ],
)
def test_bad_variants_get_a_clear_message(models, variants, shared, message):  # noqa: F811
    with pytest.raises(explorer.InputError, match=message):
        decode_together(models["prose"], PROMPTS["prose"], variants, **shared)
