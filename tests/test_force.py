"""Branch and force: ``explorer.decode(..., force=ids)`` continues exactly as ``generate()`` does from the prompt
followed by the forced ids, and records what the model wanted at each forced step.

References nobody here wrote: transformers' ``generate()`` given the prompt + forced ids as its input (for
seq2seq models, the forced ids after the decoder start token as ``decoder_input_ids``), with the same
explicit settings and seed; the model's own ``logits`` for the prefix before each forced token and for the
whole generated sequence (teacher forcing). Tiny random GPT-2 and Llama (grouped KV heads), the bundled
decoder, and the bundled dates-t5.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

import explorer
from explorer.compute.decoding import forced_table, greedy_table, mark_leading_space
from explorer.data.decoding import RETURNED
from explorer.models.decoding import special_token_ids
from explorer.models.tokens import token_labels
from explorer.render.decoding import beam_tree_figure, candidates_figure
from explorer.render.style import FigureInfo
from tests.devices import DEVICE, as_numpy
from tests.test_decoding import (
    CASES,
    PROMPTS,
    _make_end_of_sequence_likely,
    assert_same_as_generate,
    fill_tokens,
    reference_config,
)

DATES_SOURCE = "Thursday, March 5, 2021"
FORCED_CASES = ["greedy", "greedy-penalties", "beam-3", "beam-4-lp-early", "beam-ngram", "sample-all-warpers"]


@pytest.fixture(scope="module")
def models(tiny_models):
    """Fresh loads; end of sequence made likely on the tiny ones (so forced branches meet early stops too)."""
    loaded = {name: explorer.load_model(tiny_models[name], device=DEVICE) for name in ("gpt2", "llama", "t5")}
    for name in ("gpt2", "llama", "t5"):
        _make_end_of_sequence_likely(loaded[name], PROMPTS[name])
    loaded["prose"] = explorer.load_model(explorer.DEFAULT_DECODER, device=DEVICE)
    loaded["dates"] = explorer.load_model(explorer.DEFAULT_SEQ2SEQ, device=DEVICE)
    return loaded


def prompt_of(name: str) -> str:
    return DATES_SOURCE if name == "dates" else PROMPTS[name]


def branch(lm, prompt: str, count: int = 2) -> tuple[int, ...]:
    """Tokens the model did not want: at each of the first ``count`` greedy steps, its third candidate (the
    first ordinary one from there down), so that the branch leaves the greedy path at once."""
    special = {*special_token_ids(lm)["eos"], *lm.tokenizer.all_special_ids}
    forced: list[int] = []
    for _ in range(count):
        step = explorer.decode(lm, prompt, strategy="greedy", max_new_tokens=len(forced) + 1, force=forced).steps[-1]
        forced.append(next(int(t) for t in step.candidate_ids[0, 2:] if int(t) not in special))
    return tuple(forced)


def strategy_settings(strategy: str, **extra) -> dict:
    """Settings for each strategy, two sequences where it can return several."""
    several = {
        "greedy": {},
        "beam": dict(num_beams=3, num_return_sequences=2),
        "sample": dict(seed=5, num_return_sequences=2),
    }
    return dict(strategy=strategy, **several[strategy], **extra)


def generate_forced(lm, prompt: str, case: dict, force: tuple[int, ...]):
    """generate() given the prompt followed by the forced ids, for the steps left after them."""
    ids = lm.tokenizer(prompt, return_tensors="pt")["input_ids"].to(DEVICE)
    forced = torch.tensor([force], dtype=torch.long, device=DEVICE)
    config = reference_config(lm, {**case, "max_new_tokens": case["max_new_tokens"] - len(force)})
    if lm.kind == "encoder-decoder":
        start = torch.tensor([[special_token_ids(lm)["decoder_start"]]], device=DEVICE)
        inputs = {"input_ids": ids, "decoder_input_ids": torch.cat([start, forced], dim=1)}
    else:
        inputs = {"input_ids": torch.cat([ids, forced], dim=1)}
    if case["strategy"] == "sample":
        torch.manual_seed(case["seed"])
    with torch.inference_mode():
        return lm.model.generate(**inputs, generation_config=config)


def next_token_logprobs(lm, trace, decoder_ids: list[int]) -> torch.Tensor:
    """[position, vocab] the model's own log_softmax(logits) at every decoder position of one forward pass."""
    with torch.inference_mode():
        if trace.is_seq2seq:
            out = lm.model(
                input_ids=torch.tensor(trace.prompt_ids, device=DEVICE)[None],
                decoder_input_ids=torch.tensor([decoder_ids], device=DEVICE),
            )
        else:
            out = lm.model(input_ids=torch.tensor([decoder_ids], device=DEVICE))
    return torch.log_softmax(out.logits[0].double(), dim=-1)


@pytest.mark.parametrize("case", FORCED_CASES)
@pytest.mark.parametrize("name", ["gpt2", "llama", "t5", "prose", "dates"])
def test_a_forced_branch_continues_as_generate_from_the_prompt_and_the_forced_ids(models, name, case):
    lm, prompt = models[name], prompt_of(name)
    force = branch(lm, prompt)
    trace = explorer.decode(lm, prompt, **CASES[case], force=force)
    reference = generate_forced(lm, prompt, CASES[case], force)
    assert_same_as_generate(trace, reference, fill_tokens(lm))
    for sequence in trace.sequences:  # every returned sequence starts with the forced tokens
        assert sequence[trace.prompt_length : trace.prompt_length + len(force)].tolist() == list(force)
    assert [step.forced for step in trace.steps] == [True] * len(force) + [False] * (trace.num_steps - len(force))


@pytest.mark.parametrize("name", ["gpt2", "llama", "prose", "dates"])
@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_forced_steps_record_the_models_own_distribution(models, name, strategy):
    lm, prompt = models[name], prompt_of(name)
    force = branch(lm, prompt, count=3)
    trace = explorer.decode(lm, prompt, force=force, **strategy_settings(strategy, max_new_tokens=6, top_n=8))
    decoder_ids = trace.sequences[0][: trace.prompt_length + len(force)].tolist()
    reference = next_token_logprobs(lm, trace, decoder_ids)
    for step, token in zip(trace.steps, force, strict=False):
        expected = reference[trace.prompt_length - 1 + step.step]  # the position before the forced token
        assert step.forced and np.all(step.chosen_ids == token)
        for row in range(step.num_rows):  # every row holds the same prefix at a forced step
            assert step.prefix_ids[row].tolist() == decoder_ids[: trace.prompt_length + step.step]
            assert step.candidate_ids[row].tolist() == torch.topk(expected, k=8).indices.tolist()
            ranked = as_numpy(expected[step.candidate_ids[row].tolist()])
            np.testing.assert_allclose(step.candidate_logprobs[row], ranked, atol=2e-5)
            assert step.forced_logprob[row] == pytest.approx(float(expected[token]), abs=2e-5)
            assert step.forced_rank[row] == int((expected > expected[token]).sum())
        assert step.forced_rank[0] >= 2  # the branch took a token the model did not want most
    assert all(step.forced_rank is None for step in trace.steps[len(force) :])


@pytest.mark.parametrize("name", ["llama", "prose", "dates"])
@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_sequence_logprobs_count_the_forced_tokens(models, name, strategy):
    """Each returned sequence's log-probability is the sum, over every generated token forced ones included, of
    the model's log-probability of it in one teacher-forced pass over the whole sequence."""
    lm, prompt = models[name], prompt_of(name)
    force = branch(lm, prompt)
    trace = explorer.decode(lm, prompt, force=force, **strategy_settings(strategy, max_new_tokens=7))
    for sequence, logprob in zip(trace.sequences, trace.sequence_logprobs, strict=True):
        ids = sequence.tolist()
        reference = next_token_logprobs(lm, trace, ids)
        positions = range(trace.prompt_length, len(ids))
        expected = sum(float(reference[p - 1, ids[p]]) for p in positions)
        assert float(logprob) == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("name", ["gpt2", "dates"])
def test_the_beam_tree_starts_with_the_forced_chain(models, name):
    lm, prompt = models[name], prompt_of(name)
    force = branch(lm, prompt)
    case = {**CASES["beam-4-lp-early"], "max_new_tokens": 9}
    trace = explorer.decode(lm, prompt, **case, force=force)
    nodes = {node.id: node for node in trace.tree}
    chain = [node for node in trace.tree if node.forced]
    assert [node.token_id for node in chain] == list(force) and [node.step for node in chain] == [0, 1]
    assert [node.parent for node in chain] == [0, chain[0].id]
    assert all(sum(node.step == step for node in trace.tree) == 1 for step in range(len(force)))
    assert all(node.status == RETURNED and node.score == 0.0 for node in chain)  # on every returned path
    for node, step in zip(chain, trace.steps, strict=False):
        assert node.rank == step.forced_rank[0]
        assert node.token_logprob == pytest.approx(float(step.forced_logprob[0]), abs=1e-6)
    for node in trace.tree[1:]:
        if not node.forced:  # the search's scores start after the forced tokens (no processors here)
            parent = nodes[node.parent]
            assert node.score == pytest.approx(parent.score + node.token_logprob, abs=1e-4)
        if node.normalized_score is not None:  # normalised by the length the search generated
            length = node.step + 1 - len(force)
            assert node.normalized_score == pytest.approx(node.score / length ** case["length_penalty"], abs=1e-5)
    assert len(trace.pool_history) == trace.num_steps and trace.pool_history[: len(force)] == ((), ())


@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_no_force_is_exactly_no_force(models, strategy):
    lm = models["prose"]
    settings = dict(strategy=strategy, max_new_tokens=8, num_beams=4, seed=9, no_repeat_ngram_size=2)
    plain = explorer.decode(lm, PROMPTS["prose"], **settings)
    empty = explorer.decode(lm, PROMPTS["prose"], force=(), **settings)
    assert plain.settings == empty.settings and empty.settings.force == ()
    assert _fields(plain) == _fields(empty)
    assert not any(step.forced for step in empty.steps) and not any(node.forced for node in empty.tree)


def _fields(value):
    """Every field of a record, recursively, arrays as (dtype, shape, bytes): equal only if exactly equal."""
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if dataclasses.is_dataclass(value):
        return tuple((f.name, _fields(getattr(value, f.name))) for f in dataclasses.fields(value))
    if isinstance(value, tuple | list):
        return tuple(_fields(v) for v in value)
    return value


def test_forced_sampling_draws_nothing_at_forced_steps(models):
    """With the same seed, a branch forced at step 0 continues as sampling from prompt + forced token does: the
    generator was not moved by the forced step."""
    lm = models["prose"]
    force = branch(lm, PROMPTS["prose"], count=1)
    forced = explorer.decode(lm, PROMPTS["prose"], strategy="sample", max_new_tokens=9, seed=21, force=force)
    text = PROMPTS["prose"] + lm.tokenizer.decode(list(force))
    assert lm.tokenizer(text)["input_ids"] == forced.sequences[0][: len(forced.prompt_ids) + 1].tolist()
    unforced = explorer.decode(lm, text, strategy="sample", max_new_tokens=8, seed=21)
    assert forced.sequences[0].tolist() == unforced.sequences[0].tolist()


def test_settings_with_force_are_hashable_and_hold_python_ints(models):
    lm = models["gpt2"]
    force = branch(lm, PROMPTS["gpt2"])
    trace = explorer.decode(lm, PROMPTS["gpt2"], strategy="greedy", max_new_tokens=4, force=np.array(force))
    assert trace.settings.force == force and all(type(t) is int for t in trace.settings.force)
    assert hash(trace.settings) == hash(dataclasses.replace(trace.settings))
    assert trace.num_forced == 2


def test_attention_while_generating_a_forced_branch_equals_one_pass(models):
    lm = models["llama"]
    force = branch(lm, PROMPTS["llama"])
    trace = explorer.decode(
        lm, PROMPTS["llama"], strategy="greedy", max_new_tokens=6, force=force, record_attention=True
    )
    with torch.inference_mode():
        out = lm.model(
            input_ids=torch.tensor(trace.sequences[0][:-1], device=DEVICE)[None],  # the last token is never fed
            output_attentions=True,
            use_cache=False,
        )
    expected = torch.stack([layer[0] for layer in out.attentions]).cpu().numpy()
    np.testing.assert_allclose(trace.attention["decoder"].attentions, expected, atol=1e-5)


@pytest.mark.parametrize(
    ("force", "settings", "message"),
    [
        ((-1,), {}, "not in .* vocabulary"),
        ((10**6,), {}, "not in .* vocabulary"),
        (("cat",), {}, "token ids"),
        ("cat", {}, "token ids"),
        ((1.5,), {}, "token ids"),
        ((True,), {}, "token ids"),
        ((5, 6, 7, 8), {"max_new_tokens": 4}, "at least 5"),
        ((5,), {"max_new_tokens": 1}, "at least 2"),
    ],
)
def test_bad_forced_tokens_get_a_clear_message(models, force, settings, message):
    with pytest.raises(explorer.InputError, match=message):
        explorer.decode(models["gpt2"], PROMPTS["gpt2"], strategy="greedy", force=force, **settings)


@pytest.mark.parametrize("name", ["gpt2", "prose", "dates"])
def test_special_tokens_cannot_be_forced(models, name):
    lm = models[name]
    ids = special_token_ids(lm)
    for token in {*ids["eos"], ids["pad"]} - {None}:
        with pytest.raises(explorer.InputError, match="special token"):
            explorer.decode(lm, prompt_of(name), strategy="beam", num_beams=2, force=(token,))


def test_the_tables_name_the_forced_token_and_what_the_model_wanted(models):
    lm = models["prose"]
    force = branch(lm, PROMPTS["prose"])
    trace = explorer.decode(lm, PROMPTS["prose"], strategy="greedy", max_new_tokens=5, force=force, top_n=2)
    reference = next_token_logprobs(lm, trace, trace.sequences[0].tolist())
    start = trace.prompt_length
    rows = forced_table(trace)
    assert [row["step"] for row in rows] == [1, 2]
    for row, token, position in zip(rows, force, range(start - 1, start + 1), strict=True):
        assert row["forced"] == mark_leading_space(token_labels(lm.tokenizer, [token])[0])
        assert row["model's rank"] == int((reference[position] > reference[position, token]).sum()) + 1
        assert row["model's probability"] == pytest.approx(float(reference[position, token].exp()), rel=1e-4)
        assert row["its probability"] == pytest.approx(float(reference[position].exp().max()), rel=1e-4)
    # top_n=2: the forced tokens (third choices) are not among the candidates, yet the greedy table names them
    assert [row["chosen"] for row in greedy_table(trace, lm.tokenizer)[:2]] == [row["forced"] for row in rows]


def test_the_figures_mark_forced_steps(models):
    lm = models["prose"]
    force = branch(lm, PROMPTS["prose"])
    info = FigureInfo("forced", model=lm.name, text=PROMPTS["prose"])
    beam = explorer.decode(lm, PROMPTS["prose"], strategy="beam", num_beams=3, max_new_tokens=6, force=force)
    spec = json.loads(beam_tree_figure(beam, info=info).to_json())
    marked = next(t for t in spec["data"] if t.get("name") == "forced token")
    assert marked["x"] == [0, 1] and marked["y"] == [0, 0]  # rings around the two forced nodes
    hovers = [
        data[0]  # (hover, node id)
        for t in spec["data"]
        for data in t.get("customdata") or ()
        if isinstance(data, list) and "first choice here" in str(data[0])
    ]
    wanted = [step.candidate_tokens[0][0] for step in beam.steps[: len(force)]]
    assert len(hovers) == 2 and all(token in text for token, text in zip(wanted, hovers, strict=True))
    greedy = explorer.decode(lm, PROMPTS["prose"], strategy="greedy", max_new_tokens=6, force=force)
    ticks = json.loads(candidates_figure(greedy, info=info).to_json())["layout"]["xaxis2"]["ticktext"]
    assert [("forced" in str(tick)) for tick in ticks] == [True, True, False, False, False, False]
