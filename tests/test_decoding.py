"""``explorer.decode`` gives exactly what ``model.generate()`` gives, and records what generate() throws away.

References nobody here wrote: transformers' ``generate()`` with the same explicit settings (a
``GenerationConfig`` built here by hand from the settings), on tiny random GPT-2, Llama (grouped KV heads)
and T5 models, and on the bundled decoder.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import GenerationConfig

import explorer
from explorer.compute.decoding import path_to, tree_positions
from explorer.data.decoding import FINISHED, PRUNED, RETURNED, RUNNING
from explorer.models.decoding import generation_config_for, special_token_ids
from tests.devices import DEVICE

PROMPTS = {
    "gpt2": "the cat sat on the mat and",
    "llama": "time flies like an arrow",
    "t5": "the dog ran to the park",
    "prose": "It is a truth universally acknowledged",
}

CASES = {
    "greedy": dict(strategy="greedy", max_new_tokens=12),
    "greedy-penalties": dict(strategy="greedy", max_new_tokens=12, repetition_penalty=1.3, no_repeat_ngram_size=2),
    "beam-3": dict(strategy="beam", num_beams=3, max_new_tokens=10),
    "beam-4-lp-early": dict(
        strategy="beam",
        num_beams=4,
        max_new_tokens=10,
        length_penalty=0.5,
        early_stopping=True,
        num_return_sequences=2,
    ),
    "beam-3-never": dict(strategy="beam", num_beams=3, max_new_tokens=10, length_penalty=2.0, early_stopping="never"),
    "beam-ngram": dict(
        strategy="beam",
        num_beams=4,
        max_new_tokens=12,
        no_repeat_ngram_size=2,
        num_return_sequences=4,
        repetition_penalty=1.2,
    ),
    "beam-8": dict(strategy="beam", num_beams=8, max_new_tokens=8, num_return_sequences=3),
    "sample-all-warpers": dict(
        strategy="sample",
        max_new_tokens=12,
        temperature=0.7,
        top_k=12,
        top_p=0.9,
        min_p=0.05,
        seed=7,
        num_return_sequences=3,
    ),
    "sample-penalty": dict(strategy="sample", max_new_tokens=12, repetition_penalty=1.5, temperature=1.3, seed=11),
}


def reference_config(lm, case: dict) -> GenerationConfig:
    """generate()'s settings, written out from the case (top_k=0 and min_p=0 mean off, as in decode)."""
    ids = special_token_ids(lm)
    sample = case["strategy"] == "sample"
    return GenerationConfig(
        max_new_tokens=case["max_new_tokens"],
        do_sample=sample,
        num_beams=case.get("num_beams", 1),
        length_penalty=case.get("length_penalty", 1.0),
        early_stopping=case.get("early_stopping", False),
        no_repeat_ngram_size=case.get("no_repeat_ngram_size") or None,
        num_return_sequences=case.get("num_return_sequences", 1),
        repetition_penalty=case.get("repetition_penalty", 1.0),
        temperature=case.get("temperature", 1.0) if sample else None,
        top_k=case.get("top_k", 0) if sample else None,
        top_p=case.get("top_p", 1.0) if sample else None,
        min_p=case.get("min_p") if sample and case.get("min_p") else None,
        eos_token_id=ids["eos"],
        pad_token_id=ids["pad"],
        bos_token_id=ids["bos"],
        decoder_start_token_id=ids["decoder_start"],
        return_dict_in_generate=True,
        output_scores=True,
    )


def generate(lm, prompt: str, case: dict, use_cache: bool = True):
    ids = lm.tokenizer(prompt, return_tensors="pt")["input_ids"].to(DEVICE)
    if case["strategy"] == "sample":
        torch.manual_seed(case["seed"])
    with torch.inference_mode():
        return lm.model.generate(ids, generation_config=reference_config(lm, case), use_cache=use_cache)


def assert_same_as_generate(trace, reference, fill: set[int]) -> None:
    assert len(trace.sequences) == reference.sequences.shape[0]
    for ours, theirs in zip(trace.sequences, reference.sequences.tolist(), strict=True):
        assert ours.tolist() == theirs[: len(ours)]
        assert set(theirs[len(ours) :]) <= fill  # generate() pads the shorter sequences
    if trace.settings.strategy == "beam":
        np.testing.assert_allclose(trace.sequence_scores, reference.sequences_scores.cpu().numpy(), atol=1e-5)


def fill_tokens(lm) -> set[int]:
    """What generate() pads finished sequences with: the padding token, or (beam search) the end of sequence."""
    ids = special_token_ids(lm)
    return {ids["pad"], *ids["eos"]}


@pytest.fixture(scope="module")
def models(tiny_models):
    """Fresh loads (tests change generation settings on them); end of sequence made likely on the tiny ones."""
    loaded = {name: explorer.load_model(tiny_models[name], device=DEVICE) for name in ("gpt2", "llama", "t5")}
    loaded["prose"] = explorer.load_model(explorer.DEFAULT_DECODER, device=DEVICE)
    for name in ("gpt2", "llama", "t5"):
        _make_end_of_sequence_likely(loaded[name], PROMPTS[name])
    return loaded


def _make_end_of_sequence_likely(lm, prompt: str) -> None:
    """Random tiny models rarely pick their end-of-sequence token: name the token greedy search picks third
    as the end of sequence, so that early stops (and finished beams) happen in every case."""
    trace = explorer.decode(lm, prompt, strategy="greedy", max_new_tokens=4)
    third = int(trace.steps[2].chosen_ids[0])
    lm.model.generation_config.eos_token_id = third
    lm.model.generation_config.pad_token_id = 0


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("name", ["gpt2", "llama", "t5"])
def test_decode_equals_generate_on_tiny_models(models, name, case):
    lm = models[name]
    trace = explorer.decode(lm, PROMPTS[name], **CASES[case])
    assert_same_as_generate(trace, generate(lm, PROMPTS[name], CASES[case]), fill_tokens(lm))


@pytest.mark.parametrize("case", ["greedy", "beam-4-lp-early", "beam-ngram", "sample-all-warpers"])
def test_decode_equals_generate_on_the_bundled_decoder(models, case):
    lm = models["prose"]
    trace = explorer.decode(lm, PROMPTS["prose"], **CASES[case])
    assert_same_as_generate(trace, generate(lm, PROMPTS["prose"], CASES[case]), fill_tokens(lm))


def test_end_of_sequence_stops_early(models):
    lm = models["gpt2"]
    greedy = explorer.decode(lm, PROMPTS["gpt2"], strategy="greedy", max_new_tokens=12)
    eos = special_token_ids(lm)["eos"]
    assert greedy.sequences[0][-1] in eos and greedy.num_steps <= 3  # stopped at the end-of-sequence token
    beam = explorer.decode(lm, PROMPTS["gpt2"], strategy="beam", num_beams=3, max_new_tokens=12)
    assert any(node.status in (FINISHED, RETURNED) and node.token_id in eos for node in beam.tree)


def test_the_settings_map_onto_generate(models):
    lm = models["llama"]
    for case in CASES.values():
        trace = explorer.decode(lm, PROMPTS["llama"], **case)
        ours, theirs = generation_config_for(lm, trace.settings), reference_config(lm, case)
        assert ours.to_diff_dict() == theirs.to_diff_dict()


@pytest.mark.parametrize("name", ["gpt2", "t5"])
def test_the_beam_tree_is_complete_and_consistent(models, name):
    lm = models[name]
    case = CASES["beam-4-lp-early"]
    trace = explorer.decode(lm, PROMPTS[name], **case)
    nodes = {node.id: node for node in trace.tree}
    keep = max(2, 1 + len(special_token_ids(lm)["eos"])) * case["num_beams"]
    for step in range(trace.num_steps):
        assert sum(node.step == step for node in trace.tree) == keep  # every top-K candidate, pruned ones too
    assert {node.status for node in trace.tree[1:]} <= {RUNNING, PRUNED, FINISHED, RETURNED}
    for node in trace.tree[1:]:
        parent = nodes[node.parent]
        assert parent.step == node.step - 1 and parent.status in (RUNNING, RETURNED)
        # no processors here: a candidate's score is its parent's plus the model's log-probability of it
        assert node.score == pytest.approx(parent.score + node.token_logprob, abs=1e-4)
    start = trace.prompt_length
    for sequence, score, logprob in zip(trace.sequences, trace.sequence_scores, trace.sequence_logprobs, strict=True):
        path = [n for n in trace.tree if n.status == RETURNED and n.step == len(sequence) - start - 1]
        leaf = next(n for n in path if _tokens_to(nodes, n) == sequence[start:].tolist())
        assert leaf.normalized_score == pytest.approx(float(score), abs=1e-5)
        assert leaf.score / (len(sequence) - start) ** case["length_penalty"] == pytest.approx(float(score), abs=1e-5)
        assert logprob == pytest.approx(sum(nodes[i].token_logprob for i in _path_ids(nodes, leaf)), abs=1e-4)
        # One path function for the capture layer (the tree, a node's id its index) and the pages (a dict by id).
        assert path_to(trace.tree, leaf.id) == path_to(nodes, leaf.id) == _path_ids(nodes, leaf)
    assert set(tree_positions(trace.tree)) == set(nodes)  # the figure places every node
    assert trace.pool_history and all(len(pool) <= case["num_beams"] for pool in trace.pool_history)
    assert all(nodes[i].status in (FINISHED, RETURNED) for pool in trace.pool_history for i in pool)
    for node in trace.tree:
        if node.normalized_score is not None:  # only candidates that really entered the finished pool
            assert node.normalized_score > -1e8 and node.pool_step == node.step


def _path_ids(nodes, leaf) -> list[int]:
    ids, node = [], leaf
    while node.parent is not None:
        ids.append(node.id)
        node = nodes[node.parent]
    return ids[::-1]


def _tokens_to(nodes, leaf) -> list[int]:
    return [nodes[i].token_id for i in _path_ids(nodes, leaf)]


def test_ngram_bans_are_recorded_with_their_ngram(models):
    lm = models["prose"]
    trace = explorer.decode(
        lm, PROMPTS["prose"], strategy="beam", num_beams=4, max_new_tokens=16, no_repeat_ngram_size=2
    )
    assert trace.bans, "the bundled decoder repeats itself: bans must occur"
    for ban in trace.bans:
        assert len(ban.ngram) == 2 and ban.ngram[-1] == ban.token
        step = trace.steps[ban.step]
        assert ban.token_id not in step.candidate_ids[ban.row][np.isfinite(np.log(step.candidate_probs[ban.row]))]


def test_greedy_and_sampling_steps_record_the_candidates(models):
    lm = models["prose"]
    trace = explorer.decode(lm, PROMPTS["prose"], strategy="greedy", max_new_tokens=6, top_n=5)
    for step in trace.steps:
        assert step.candidate_ids.shape == (1, 5)
        assert step.chosen_ids[0] == step.candidate_ids[0, 0]  # greedy picks the most likely
        assert np.all(np.diff(step.candidate_probs[0]) <= 0)
        np.testing.assert_allclose(np.exp(step.candidate_logprobs), step.candidate_probs, rtol=1e-5)
        assert 0 < step.entropy[0] <= np.log(len(lm.tokenizer))
    np.testing.assert_allclose(
        trace.sequence_logprobs[0], sum(float(s.candidate_logprobs[0, 0]) for s in trace.steps), rtol=1e-5
    )


def test_sampling_leaves_the_global_random_state_alone_and_is_thread_safe(models):
    lm = models["prose"]
    before = torch.random.get_rng_state()
    alone = {seed: explorer.decode(lm, PROMPTS["prose"], strategy="sample", seed=seed).sequences[0] for seed in (1, 2)}
    assert torch.equal(before, torch.random.get_rng_state())
    results = {}

    def sample(seed):
        results[seed] = explorer.decode(lm, PROMPTS["prose"], strategy="sample", seed=seed).sequences[0]

    threads = [threading.Thread(target=sample, args=(seed,)) for seed in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(np.array_equal(results[seed], alone[seed]) for seed in (1, 2))
    unseeded = explorer.decode(lm, PROMPTS["prose"], strategy="sample")
    again = explorer.decode(lm, PROMPTS["prose"], strategy="sample", seed=unseeded.settings.seed)
    assert np.array_equal(unseeded.sequences[0], again.sequences[0])  # the drawn seed reproduces the trace


def _input_shapes_of_each_pass(lm, monkeypatch) -> list[tuple[int, ...]]:
    """A list that the model's forward passes append their input_ids' shapes to, from now on."""
    shapes = []
    real_forward = lm.model.forward

    def counting(*args, **kwargs):
        shapes.append(tuple(kwargs["input_ids"].shape))
        return real_forward(*args, **kwargs)

    monkeypatch.setattr(lm.model, "forward", counting)
    return shapes


def test_the_prompt_runs_once_and_each_step_feeds_one_token(models, monkeypatch):
    lm = models["gpt2"]
    shapes = _input_shapes_of_each_pass(lm, monkeypatch)
    trace = explorer.decode(lm, PROMPTS["gpt2"], strategy="beam", num_beams=4, max_new_tokens=6)
    prompt_length = len(trace.prompt_ids)
    assert shapes[0] == (1, prompt_length)  # the prompt once, not once per beam
    assert all(shape == (4, 1) for shape in shapes[1:]) and len(shapes) == trace.num_steps


@pytest.mark.parametrize("name", ["gpt2", "llama", "prose"])
def test_attention_while_generating_equals_one_pass_over_the_result(models, name):
    lm = models[name]
    trace = explorer.decode(lm, PROMPTS[name], strategy="greedy", max_new_tokens=6, record_attention=True)
    stack = trace.attention["decoder"]
    # The tokens fed: every one but the last, which generate() never feeds back (no pass, no row).
    sequence = torch.tensor(trace.sequences[0][:-1], device=DEVICE)[None]
    with torch.inference_mode():
        reference = lm.model(input_ids=sequence, output_attentions=True, use_cache=False).attentions
    expected = torch.stack([layer[0] for layer in reference]).cpu().numpy()
    assert stack.attentions.shape == expected.shape
    np.testing.assert_allclose(stack.attentions, expected, atol=1e-5)
    assert stack.verify() <= 1e-5 and stack.is_causal
    assert trace.prompt_length == len(trace.prompt_ids)


def test_attention_while_generating_a_seq2seq_model(models):
    lm = models["t5"]
    trace = explorer.decode(lm, PROMPTS["t5"], strategy="greedy", max_new_tokens=5, record_attention=True)
    assert set(trace.attention) == {"encoder", "decoder", "cross"}
    with torch.inference_mode():
        out = lm.model(
            input_ids=torch.tensor(trace.prompt_ids, device=DEVICE)[None],
            decoder_input_ids=torch.tensor(trace.sequences[0][:-1], device=DEVICE)[None],  # the last is never fed
            output_attentions=True,
            use_cache=False,
        )
    for name, layers in (("decoder", out.decoder_attentions), ("cross", out.cross_attentions)):
        np.testing.assert_allclose(
            trace.attention[name].attentions, torch.stack([a[0] for a in layers]).cpu().numpy(), atol=1e-5
        )
        assert trace.attention[name].verify() <= 1e-5


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (dict(strategy="nucleus"), "Unknown strategy"),
        (dict(strategy="sample", temperature=0), "above 0"),
        (dict(strategy="sample", top_p=1.5), "top-p"),
        (dict(strategy="sample", min_p=-0.1), "min-p"),
        (dict(strategy="sample", top_k=-3), "top-k"),
        (dict(strategy="beam", num_beams=2, num_return_sequences=3), "at most num_beams"),
        (dict(strategy="beam", num_beams=999), "num_beams"),
        (dict(strategy="greedy", max_new_tokens=0), "max_new_tokens"),
        (dict(strategy="greedy", max_new_tokens=10_000), "max_new_tokens"),
        (dict(strategy="beam", num_beams=3, record_attention=True), "one sequence"),
    ],
)
def test_bad_settings_get_a_clear_message(models, settings, message):
    with pytest.raises(explorer.InputError, match=message):
        explorer.decode(models["gpt2"], PROMPTS["gpt2"], **settings)


def test_an_encoder_cannot_generate_and_says_so(minilm):
    """Generating and the next token do not apply to an encoder (``NotApplicable``); an empty prompt is an input
    error."""
    with pytest.raises(explorer.NotApplicable, match="cannot generate"):
        explorer.decode(minilm, "hello", strategy="greedy")
    with pytest.raises(explorer.NotApplicable, match="predicts no next token"):
        explorer.next_token_distribution(minilm, "hello")
    with pytest.raises(explorer.InputError, match="Type a prompt"):
        explorer.decode(explorer.load_model(explorer.DEFAULT_DECODER, device=DEVICE), "  ", strategy="greedy")


def test_the_greedy_tables_input_column_shows_line_breaks_as_the_token_columns_do(models):
    """A prompt with a line break: the input column carries "↵" where the text breaks, like the tokens."""
    from explorer.compute.decoding import greedy_table

    lm = models["prose"]
    trace = explorer.decode(lm, "first line\nsecond  line", strategy="greedy", max_new_tokens=2, top_n=3)
    rows = greedy_table(trace, lm.tokenizer)
    assert rows[0]["input"] == "first line↵second line"
    assert all("\n" not in row["input"] for row in rows)


# Issue 40's families whose decoding needs more than a full-attention KV cache, built tiny by tests/families.py
# (windows of 4 tokens, so that FAMILY_PROMPT's 6 exceed them): a sliding window on every layer (Mistral), sliding
# and full layers with attention sinks (GPT-OSS), Gemma 3's mixed layers, Llama 4's chunked attention; hybrid caches:
# Qwen3-Next's linear attention (a layer without keys), Falcon-H1's state-space state beside its keys (its layers can
# repeat their keys' rows but not the state's), Mamba's state alone (its cache is "cache_params"); Switch
# Transformers, whose router reads the encoder's own output object.
WINDOWED = ("mistral", "gpt_oss", "gemma3_text", "llama4_text")
SEQ2SEQ_MOE = "switch_transformers"
# BART's generation config forces its end token at the length limit (forced_eos_token_id): generate() applies it.
# Families whose attention is not recorded but returned (output_attentions, weights only): GPT-Neo's local layers,
# OpenAI GPT (no cache: each step runs the whole sequence), MVP (an encoder-decoder), ProphetNet (n-gram streams).
WEIGHTS_ONLY = ("gpt_neo", "openai-gpt", "mvp", "prophetnet")
# XLNet prepares its own generation inputs (a token to predict appended, hidden by its permutation mask) and returns
# its cache (mems) as a new tuple after every pass.
OWN_INPUTS = "xlnet"
# RecurrentGemma built of recurrent layers alone (its attention comes every third layer, so 2 layers have none): a
# cache of them cannot say how many tokens it holds (transformers' get_seq_length raises), so generate() decodes it
# only with use_cache=False.
STATES_ONLY = "recurrent_gemma"
BUILT_WITH = {STATES_ONLY: {"block_types": ["recurrent", "recurrent", "attention"]}}  # the family's config values
FAMILY_PROMPT = "the cat sat on the mat"
FAMILY_CASES = {
    "beam": dict(strategy="beam", num_beams=3, max_new_tokens=4, num_return_sequences=2),
    "sample": dict(
        strategy="sample", max_new_tokens=4, seed=3, num_return_sequences=2, temperature=0.8, top_k=10, top_p=0.9,
        min_p=0.05,
    ),
}  # fmt: skip


# Config values that make a family's passes cheaper without changing its numbers: Falcon-H1's scan pads each pass
# to its chunk (256 tokens by default; 4 makes a pass about 50 times faster on a CPU).
CHEAPER = {"falcon_h1": {"mamba_chunk_size": 4}}


def build_cheap(name: str, folder) -> str:
    """tests/families.py's tiny ``name`` (built with ``BUILT_WITH``'s config values), saved in ``folder`` with
    ``CHEAPER``'s values in its config."""
    from tests.families import build_family

    build_family(name, folder, **BUILT_WITH.get(name, {}))
    config = Path(folder) / "config.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | CHEAPER.get(name, {})))
    return str(folder)


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    """{model_type: (the tiny model loaded through the public path, its folder)}."""
    root = tmp_path_factory.mktemp("families")
    names = (*WINDOWED, "qwen3_next", "falcon_h1", "mamba", SEQ2SEQ_MOE, *WEIGHTS_ONLY, "bart", OWN_INPUTS, STATES_ONLY)
    folders = {name: build_cheap(name, root / name) for name in names}
    return {name: (explorer.load_model(folder, device=DEVICE), folder) for name, folder in folders.items()}


@pytest.mark.parametrize("case", sorted(FAMILY_CASES))
@pytest.mark.parametrize("name", ["mamba", "falcon_h1", SEQ2SEQ_MOE, "openai-gpt", "bart"])
def test_decode_equals_generate_through_a_state_space_cache_and_a_moe_encoder(families, name, case):
    lm, _ = families[name]
    trace = explorer.decode(lm, FAMILY_PROMPT, **FAMILY_CASES[case])
    assert_same_as_generate(trace, generate(lm, FAMILY_PROMPT, FAMILY_CASES[case]), fill_tokens(lm))


def test_a_model_that_prepares_its_own_generation_inputs_decodes_as_generate(families):
    """XLNet's first pass too is prepared by its own prepare_inputs_for_generation, and each step takes the cache the
    pass before returned: greedy and beam search (scores too) equal generate(), forced tokens equal generate() given
    them, and the distribution before a forced token is generate()'s first one given the ids before it."""
    lm, _ = families[OWN_INPUTS]
    for case in (dict(strategy="greedy", max_new_tokens=6), FAMILY_CASES["beam"]):
        trace = explorer.decode(lm, FAMILY_PROMPT, **case)
        assert_same_as_generate(trace, generate(lm, FAMILY_PROMPT, case), fill_tokens(lm))
    forced = explorer.decode(lm, FAMILY_PROMPT, strategy="greedy", max_new_tokens=5, force=(7, 8))
    ids = torch.tensor(forced.sequences[0][: len(forced.prompt_ids) + 2], device=DEVICE)[None]
    with torch.inference_mode():
        reference = lm.model.generate(ids, generation_config=generation_config_for(lm, forced.settings))
        before_8 = lm.model.generate(ids[:, :-1], generation_config=reference_config(lm, GREEDY_ONE)).scores[0]
    assert forced.sequences[0].tolist() == reference.sequences[0].tolist()
    expected = torch.log_softmax(before_8[0].float(), dim=-1)[8]
    np.testing.assert_allclose(forced.steps[1].forced_logprob[0], expected.item(), atol=1e-5)


GREEDY_ONE = dict(strategy="greedy", max_new_tokens=1)


def test_a_cache_that_cannot_count_its_tokens_is_not_used_and_decoding_equals_generate_without_one(families):
    lm, _ = families[STATES_ONLY]
    with pytest.raises(ValueError, match="get_seq_length"):
        generate(lm, FAMILY_PROMPT, GREEDY_ONE)  # transformers' own decoding with the cache
    for case in (dict(strategy="greedy", max_new_tokens=4), *FAMILY_CASES.values()):
        trace = explorer.decode(lm, FAMILY_PROMPT, **case)
        assert any("generate(use_cache=False)" in note for note in trace.notes)
        assert_same_as_generate(trace, generate(lm, FAMILY_PROMPT, case, use_cache=False), fill_tokens(lm))


def test_a_model_without_attention_layers_says_attention_views_and_the_kv_cache_do_not_apply(families):
    """Its config's layer types are all state-carrying ones: its passes return no attention maps and its cache holds
    states, not keys per token. Capture, head ablation, attention while generating and the KV cache each say that
    they do not apply (``NotApplicable``), naming its layer types."""
    lm, _ = families[STATES_ONLY]
    with pytest.raises(explorer.NotApplicable, match="layer types are linear_attention, linear_attention"):
        explorer.capture(lm, FAMILY_PROMPT)
    with pytest.raises(explorer.NotApplicable, match=r"Head ablation does not apply: .* no attention layer"):
        explorer.head_ablation_effects(lm, FAMILY_PROMPT)
    with pytest.raises(explorer.NotApplicable, match="has no attention layer: its config's layer types are linear"):
        explorer.decode(lm, FAMILY_PROMPT, strategy="greedy", max_new_tokens=2, record_attention=True)
    with pytest.raises(explorer.NotApplicable, match="no KV cache to show"):
        explorer.kv_cache(lm, FAMILY_PROMPT, steps=2)


def test_a_hybrid_cache_runs_the_prompt_again_with_a_row_per_beam(families, monkeypatch):
    """Qwen3-Next's linear-attention layers cannot repeat their cache's rows: the prompt's pass, run once, is run
    again with a row per beam (as generate() runs it), then one token per row, and beam search equals generate()'s."""
    lm, _ = families["qwen3_next"]
    shapes = _input_shapes_of_each_pass(lm, monkeypatch)
    trace = explorer.decode(lm, FAMILY_PROMPT, **FAMILY_CASES["beam"])
    prompt = len(trace.prompt_ids)
    assert shapes[:2] == [(1, prompt), (3, prompt)] and all(shape == (3, 1) for shape in shapes[2:])
    monkeypatch.undo()
    assert_same_as_generate(trace, generate(lm, FAMILY_PROMPT, FAMILY_CASES["beam"]), fill_tokens(lm))


@pytest.mark.parametrize("name", [*WINDOWED, SEQ2SEQ_MOE])
def test_attention_recorded_past_a_window_equals_the_models_eager_attention_and_generate(families, name):
    """Stitched by absolute key position: a windowed layer's rows are 0 outside the window, as the model's eager
    attention over the whole sequence gives them, and each pass's rows are what generate(output_attentions=True)
    returned for that step."""
    from tests.families import model_class

    lm, folder = families[name]
    trace = explorer.decode(lm, FAMILY_PROMPT, strategy="greedy", max_new_tokens=4, record_attention=True)
    stack = trace.attention["decoder"]
    reference = model_class(name).from_pretrained(folder, attn_implementation="eager").to(DEVICE).eval()
    prompt = torch.tensor(trace.prompt_ids, device=DEVICE)[None]
    fed = torch.tensor(trace.sequences[0][:-1], device=DEVICE)[None]  # the last token is never fed
    inputs = {"input_ids": prompt, "decoder_input_ids": fed} if trace.is_seq2seq else {"input_ids": fed}
    config = generation_config_for(lm, trace.settings)
    config.output_attentions = True
    with torch.inference_mode():
        whole = reference(**inputs, output_attentions=True, use_cache=False)
        steps = reference.generate(prompt, generation_config=config)
    assert steps.sequences[0].tolist() == trace.sequences[0].tolist()
    layers = whole.decoder_attentions if trace.is_seq2seq else whole.attentions
    expected = np.stack([layer[0].cpu().numpy() for layer in layers])
    assert stack.attentions.shape == expected.shape
    np.testing.assert_allclose(stack.attentions, expected, atol=1e-5)
    assert stack.verify() <= 1e-5 and stack.is_causal
    row = 0
    for step in steps.decoder_attentions if trace.is_seq2seq else steps.attentions:
        end = row + step[0].shape[-2]  # this pass's queries; its keys end at its last query
        for ours, theirs in zip(stack.attentions, step, strict=True):
            first = end - theirs.shape[-1]
            np.testing.assert_allclose(ours[:, row:end, first:end], theirs[0].cpu().numpy(), atol=1e-6)
            np.testing.assert_array_equal(ours[:, row:end, :first], 0)  # before its window (or chunk)
        row = end
    assert row == stack.attentions.shape[-2]


def test_a_model_without_attention_decodes_but_records_none_and_says_so(families):
    lm, _ = families["mamba"]
    with pytest.raises(explorer.NotApplicable, match="has no attention layers"):
        explorer.decode(lm, FAMILY_PROMPT, strategy="greedy", max_new_tokens=4, record_attention=True)


@pytest.mark.parametrize("name", ["gpt_neo", "openai-gpt", "mvp"])
def test_attention_returned_while_generating_equals_the_models_eager_attention(families, name):
    """Weights only, from each pass's output_attentions, stitched as the recorded calls are."""
    from tests.families import model_class

    lm, folder = families[name]
    trace = explorer.decode(lm, FAMILY_PROMPT, strategy="greedy", max_new_tokens=4, record_attention=True)
    reference = model_class(name).from_pretrained(folder, attn_implementation="eager").to(DEVICE).eval()
    fed = torch.tensor(trace.sequences[0][:-1], device=DEVICE)[None]
    with torch.inference_mode():
        if trace.is_seq2seq:
            prompt = torch.tensor(trace.prompt_ids, device=DEVICE)[None]
            out = reference(input_ids=prompt, decoder_input_ids=fed, output_attentions=True, use_cache=False)
            named = {"decoder": out.decoder_attentions, "cross": out.cross_attentions}
            named["encoder"] = out.encoder_attentions
        else:
            named = {"decoder": reference(input_ids=fed, output_attentions=True, use_cache=False).attentions}
    assert set(trace.attention) == set(named)
    for stack, layers in named.items():
        expected = np.stack([layer[0].cpu().numpy() for layer in layers])
        assert trace.attention[stack].attentions.shape == expected.shape
        np.testing.assert_allclose(trace.attention[stack].attentions, expected, atol=1e-5)


def test_prophetnets_cross_attention_while_generating_is_its_main_streams(families):
    """ProphetNet's decoder runs its n-gram streams in rows after its main stream's: the cross attention recorded
    while generating is the main stream's rows of the model's own (one eager pass over what it generated), the
    decoder's self-attention is its own, and the capture says the streams are left out."""
    from tests.families import model_class

    lm, folder = families["prophetnet"]
    trace = explorer.decode(lm, FAMILY_PROMPT, strategy="greedy", max_new_tokens=4, record_attention=True)
    reference = model_class("prophetnet").from_pretrained(folder, attn_implementation="eager").to(DEVICE).eval()
    prompt = torch.tensor(trace.prompt_ids, device=DEVICE)[None]
    fed = torch.tensor(trace.sequences[0][:-1], device=DEVICE)[None]
    with torch.inference_mode():
        out = reference(input_ids=prompt, decoder_input_ids=fed, output_attentions=True, use_cache=False)
    rows = fed.shape[1]
    assert out.cross_attentions[0].shape[-2] == (1 + lm.model.config.ngram) * rows  # the streams' rows too
    cross = np.stack([layer[0, :, :rows].cpu().numpy() for layer in out.cross_attentions])
    np.testing.assert_allclose(trace.attention["cross"].attentions, cross, atol=1e-5)
    decoder = np.stack([layer[0].cpu().numpy() for layer in out.decoder_attentions])
    np.testing.assert_allclose(trace.attention["decoder"].attentions, decoder, atol=1e-5)
    cap = explorer.capture(lm, FAMILY_PROMPT, target="the dog")
    assert any("n-gram streams" in note for note in cap.notes)


@pytest.mark.parametrize("name", [OWN_INPUTS])
def test_attention_returned_as_a_pair_of_streams_is_said_not_to_apply(families, name):
    """XLNet returns two maps per layer at each step (its content and query streams), its positions attending to
    later ones: no causal map to stitch. The decoding runs as without recording, and a note says why its attention
    is left out (the matrix's n/a)."""
    lm, _ = families[name]
    plain = explorer.decode(lm, FAMILY_PROMPT, strategy="greedy", max_new_tokens=4)
    trace = explorer.decode(lm, FAMILY_PROMPT, strategy="greedy", max_new_tokens=4, record_attention=True)
    np.testing.assert_array_equal(trace.sequences, plain.sequences)
    assert not trace.attention
    assert any("does not apply" in note and "2 maps per layer" in note for note in trace.notes), trace.notes
    assert any("attend to later ones" in note for note in trace.notes), trace.notes


def test_attention_while_decoding_lays_out_an_encoder_returned_as_dicts(tmp_path):
    """Pegasus-X's encoder returns dicts of global and block-local maps (issue 40: left out before): while decoding,
    its text rows are laid out at their keys as capture lays them out, equal to the model's own dicts laid out by
    the matrix's reference, one by one; the global tokens' share is said; decoder and cross attention as before."""
    from tests import families

    subject = families.subject_for("pegasus_x", tmp_path)
    assert families.check_record_attention(subject) == families.Cell(families.Y)
    trace = explorer.decode(subject.lm, families.PROMPT, strategy="greedy", max_new_tokens=2, record_attention=True)
    assert set(trace.attention) == {"encoder", "decoder", "cross"}
    prompt = torch.as_tensor(trace.prompt_ids)[None]
    out = subject.run(prompt, subject.start(), output_attentions=True, use_cache=False)
    expected = families._global_local_text_rows(subject, out.encoder_attentions, prompt.shape[1])
    np.testing.assert_allclose(trace.attention["encoder"].attentions, expected, atol=1e-6)
    assert trace.attention["encoder"].key_tokens == trace.attention["cross"].key_tokens
    assert any("global tokens take" in note for note in trace.notes), trace.notes
