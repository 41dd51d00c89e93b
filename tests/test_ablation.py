"""Head ablation equals a copy of the model whose output projection ignores those heads.

Reference nobody here wrote: a deep copy of the model, run with transformers' own eager attention, whose
output projection has the input columns of the ablated heads set to 0 (GPT-2's ``c_proj`` is a Conv1D
stored [in, out], so its rows; Llama's ``o_proj``, BERT's ``attention.output.dense`` and T5's ``o`` are
``nn.Linear``, so columns). Its logits, attention, hidden states and ``generate()`` output are what the
explorer must give with ``ablate=`` on the shared model.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

import explorer
from explorer.models import ablation, recorder
from explorer.models.decoding import special_token_ids
from tests.devices import DEVICE, as_numpy
from tests.test_decoding import reference_config

TEXTS = {
    "gpt2": "the cat sat on the mat and",
    "llama": "time flies like an arrow",
    "bert": "time flies like an arrow",
    "t5": "the dog ran to the park",
    "prose": "It is a truth universally acknowledged",
}


@pytest.fixture(scope="module")
def models(tiny_models):
    loaded = {name: explorer.load_model(tiny_models[name], device=DEVICE) for name in ("gpt2", "llama", "bert", "t5")}
    loaded["prose"] = explorer.load_model(explorer.DEFAULT_DECODER, device=DEVICE)
    return loaded


# -- the reference: a copy with the heads' columns of the output projection set to 0 -------------------------


def _output_projection(model, stack: str, layer: int):
    """(weight, head_dim, axis of the weight that reads the heads) of one layer's attention output projection."""
    config = model.config
    if config.model_type == "gpt2":
        return model.transformer.h[layer].attn.c_proj.weight, config.n_embd // config.n_head, 0  # Conv1D: [in, out]
    if config.model_type == "llama":
        return model.model.layers[layer].self_attn.o_proj.weight, config.head_dim, 1
    if config.model_type == "bert":
        dense = model.encoder.layer[layer].attention.output.dense
        return dense.weight, config.hidden_size // config.num_attention_heads, 1
    if config.model_type in OWN_CODE_PROJECTIONS:
        weight = OWN_CODE_PROJECTIONS[config.model_type](model, layer)
        return weight, config.hidden_size // config.num_attention_heads, 1
    block = (model.encoder if stack == "encoder" else model.decoder).block[layer]  # T5
    attention = block.layer[1].EncDecAttention if stack == "cross" else block.layer[0].SelfAttention
    return attention.o.weight, config.d_kv, 1


# Families that compute attention in their own code (nothing reaches the recording attention): their output
# projections, nn.Linear each.
OWN_CODE_PROJECTIONS = {
    "gpt_neo": lambda model, layer: model.transformer.h[layer].attn.attention.out_proj.weight,
    "bloom": lambda model, layer: model.transformer.h[layer].self_attention.dense.weight,
    "falcon": lambda model, layer: model.transformer.h[layer].self_attention.dense.weight,
}


def zeroed_copy(lm, heads):
    """A deep copy of the model, with eager attention, whose output projections ignore ``heads``:
    ((layer, head), ...) of the main stack or ((stack, layer, head), ...)."""
    reference = copy.deepcopy(lm.model)
    with contextlib.suppress(ValueError):  # GPT-Neo, BLOOM, Falcon: eager already, and no other to switch from
        reference.set_attn_implementation("eager")
    main = "encoder" if lm.kind == "encoder" else "decoder"
    with torch.no_grad():
        for item in heads:
            stack, layer, head = item if len(item) == 3 else (main, *item)
            weight, head_dim, axis = _output_projection(reference, stack, layer)
            weight.narrow(axis, head * head_dim, head_dim).zero_()
    return reference.eval()


def reference_logits(lm, model, text: str) -> np.ndarray:
    ids = lm.tokenizer(text, return_tensors="pt")["input_ids"].to(DEVICE)
    with torch.inference_mode():
        if lm.kind == "encoder-decoder":
            start = torch.tensor([[special_token_ids(lm)["decoder_start"]]], device=DEVICE)
            return model(input_ids=ids, decoder_input_ids=start).logits[0, -1].cpu().numpy()
        return model(input_ids=ids).logits[0, -1].cpu().numpy()


# -- next-token logits ---------------------------------------------------------------------------------------

LOGIT_CASES = [
    ("gpt2", ((0, 1),)),
    ("gpt2", ((0, 0), (1, 1))),
    ("llama", ((0, 1),)),  # query head 1 shares KV head 0 with query head 0, which keeps running
    ("llama", ((0, 2), (1, 0), (1, 3))),
    ("prose", ((2, 4),)),
    ("prose", ((0, 0), (1, 3), (3, 5), (4, 1))),
    ("t5", (("encoder", 0, 1),)),
    ("t5", (("encoder", 1, 0), ("decoder", 0, 1), ("cross", 1, 0))),
]


@pytest.mark.parametrize(("name", "heads"), LOGIT_CASES)
def test_next_token_logits_equal_the_zeroed_copy(models, name, heads):
    lm = models[name]
    ablated = explorer.next_token_logits(lm, TEXTS[name], ablate=heads).logits
    expected = reference_logits(lm, zeroed_copy(lm, heads), TEXTS[name])
    np.testing.assert_allclose(ablated, expected, atol=1e-5, rtol=0)
    plain = explorer.next_token_logits(lm, TEXTS[name]).logits
    assert np.abs(plain - ablated).max() > 1e-4  # the ablation did change the prediction
    distribution = explorer.next_token_distribution(lm, TEXTS[name], temperature=0.7, ablate=heads)
    np.testing.assert_array_equal(distribution.logits, ablated)


def test_grouped_kv_heads_are_ablated_per_query_head(models):
    """Ablating both query heads of one KV group equals zeroing both; one alone is not the same."""
    lm = models["llama"]
    one = explorer.next_token_logits(lm, TEXTS["llama"], ablate=((1, 0),)).logits
    group = explorer.next_token_logits(lm, TEXTS["llama"], ablate=((1, 0), (1, 1))).logits
    np.testing.assert_allclose(
        group, reference_logits(lm, zeroed_copy(lm, ((1, 0), (1, 1))), TEXTS["llama"]), atol=1e-5
    )
    assert np.abs(one - group).max() > 1e-4


@pytest.fixture(scope="module")
def own_code_models(tmp_path_factory):
    from tests.test_lens import save_family

    return {
        name: explorer.load_model(save_family(name, tmp_path_factory.mktemp(name)), device=DEVICE)
        for name in OWN_CODE_PROJECTIONS
    }


@pytest.mark.parametrize("name", list(OWN_CODE_PROJECTIONS))
def test_heads_of_attention_computed_in_the_models_own_code_are_ablated_at_its_output_projection(own_code_models, name):
    """GPT-Neo, BLOOM and Falcon bypass the recording attention: the heads are found in the module graph (the
    module that returns each attention map, its last projection) and zeroed there, as the zeroed copy is."""
    lm, heads, text = own_code_models[name], ((0, 1), (1, 2)), TEXTS["gpt2"]
    ablated = explorer.next_token_logits(lm, text, ablate=heads).logits
    np.testing.assert_allclose(ablated, reference_logits(lm, zeroed_copy(lm, heads), text), atol=1e-5, rtol=0)
    assert np.abs(explorer.next_token_logits(lm, text).logits - ablated).max() > 1e-4
    effects = explorer.head_ablation_effects(lm, text)
    plain = torch.log_softmax(torch.tensor(reference_logits(lm, lm.model, text)), dim=-1)
    one = torch.log_softmax(torch.tensor(reference_logits(lm, zeroed_copy(lm, ((1, 3),)), text)), dim=-1)
    target = effects.target_id
    assert effects.changes[1, 3] == pytest.approx(float(one[target] - plain[target]), abs=2e-5)


# -- capture: every later layer sees the model without the heads ----------------------------------------------


@pytest.mark.parametrize(("name", "heads"), [("bert", ((0, 1),)), ("gpt2", ((0, 0),)), ("llama", ((0, 1), (0, 3)))])
def test_capture_with_ablation_equals_the_zeroed_copy(models, name, heads):
    lm = models[name]
    ablated = explorer.capture(lm, TEXTS[name], ablate=heads)
    plain = explorer.capture(lm, TEXTS[name])
    ids = lm.tokenizer(TEXTS[name], return_tensors="pt").to(DEVICE)
    with torch.inference_mode():
        out = zeroed_copy(lm, heads)(input_ids=ids["input_ids"], output_attentions=True, output_hidden_states=True)
    expected_attentions = np.stack([a[0].cpu().numpy() for a in out.attentions])
    np.testing.assert_allclose(ablated.attentions, expected_attentions, atol=1e-5, rtol=0)
    np.testing.assert_allclose(
        ablated.hidden_states, np.stack([h[0].cpu().numpy() for h in out.hidden_states]), atol=1e-5
    )
    # layer 0's weights come before any head's output is used; layer 1's see the ablated residual stream
    np.testing.assert_array_equal(ablated.attentions[0], plain.attentions[0])
    assert np.abs(ablated.attentions[1] - plain.attentions[1]).max() > 0  # (tiny BERT's weights are nearly flat)
    assert np.abs(ablated.hidden_states[1:] - plain.hidden_states[1:]).max() > 1e-3
    assert ablated.verify() < 1e-5
    assert ablated.ablated == tuple(sorted(("encoder" if name == "bert" else "decoder", *h) for h in heads))


def test_t5_capture_addresses_each_stack(models):
    lm = models["t5"]
    heads = (("encoder", 0, 0), ("cross", 0, 1), ("decoder", 1, 0))
    ablated = explorer.capture(lm, TEXTS["t5"], target="the cat sat", ablate=heads)
    ids = lm.tokenizer(TEXTS["t5"], return_tensors="pt")["input_ids"].to(DEVICE)
    labels = lm.tokenizer(text_target="the cat sat", return_tensors="pt")["input_ids"].to(DEVICE)
    reference = zeroed_copy(lm, heads)
    with torch.inference_mode():
        out = reference(input_ids=ids, labels=labels, output_attentions=True, use_cache=False)
    for stack, expected in (("encoder", out.encoder_attentions), ("decoder", out.decoder_attentions)):
        np.testing.assert_allclose(
            ablated.stacks[stack].attentions, np.stack([as_numpy(a[0]) for a in expected]), atol=1e-5
        )
    np.testing.assert_allclose(
        ablated.stacks["cross"].attentions, np.stack([as_numpy(a[0]) for a in out.cross_attentions]), atol=1e-5
    )


# -- no ablation is exactly no ablation --------------------------------------------------------------------------


@pytest.mark.parametrize("empty", [(), [], None])
def test_an_empty_ablation_is_bit_for_bit_none(models, empty):
    lm = models["prose"]
    plain, nothing = explorer.capture(lm, TEXTS["prose"]), explorer.capture(lm, TEXTS["prose"], ablate=empty)
    np.testing.assert_array_equal(plain.attentions, nothing.attentions)
    np.testing.assert_array_equal(plain.hidden_states, nothing.hidden_states)
    assert nothing.ablated == ()
    np.testing.assert_array_equal(
        explorer.next_token_logits(lm, TEXTS["prose"]).logits,
        explorer.next_token_logits(lm, TEXTS["prose"], ablate=empty).logits,
    )
    for case in (dict(strategy="greedy"), dict(strategy="beam", num_beams=3)):
        a = explorer.decode(lm, TEXTS["prose"], max_new_tokens=6, **case)
        b = explorer.decode(lm, TEXTS["prose"], max_new_tokens=6, ablate=empty, **case)
        assert [s.tolist() for s in a.sequences] == [s.tolist() for s in b.sequences]
        np.testing.assert_array_equal(a.steps[-1].candidate_logprobs, b.steps[-1].candidate_logprobs)
    assert recorder._keep.get() is None


def test_the_ablation_is_canonical_and_hashable(models):
    lm = models["gpt2"]
    first = explorer.next_token_logits(lm, TEXTS["gpt2"], ablate=[[1, 1], (0, 0), (1, 1)])
    second = explorer.next_token_logits(lm, TEXTS["gpt2"], ablate=(("decoder", 0, 0), (np.int64(1), 1)))
    assert first.ablated == second.ablated == (("decoder", 0, 0), ("decoder", 1, 1))
    assert hash(first.ablated) == hash(second.ablated)
    np.testing.assert_array_equal(first.logits, second.logits)


@pytest.mark.parametrize(
    ("name", "ablate", "words"),
    [
        ("gpt2", ((2, 0),), "layer 2"),
        ("gpt2", ((0, 2),), "head 2"),
        ("gpt2", ((-1, 0),), "layer -1"),
        ("gpt2", ((0, True),), "head True"),
        ("gpt2", ((0.0, 1),), "layer 0.0"),
        ("gpt2", ("01",), "(layer, head)"),
        ("gpt2", ((0, 1, 2, 3),), "(layer, head)"),
        ("gpt2", (("cross", 0, 0),), "no 'cross'"),
        ("t5", ((0, 0),), "name each head with its stack"),
        ("t5", (("decoder", 0, 5),), "heads 0 to 1"),
    ],
)
def test_heads_the_model_lacks_are_refused_with_a_sentence(models, name, ablate, words):
    with pytest.raises(explorer.InputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        explorer.next_token_logits(models[name], TEXTS[name], ablate=ablate)


def test_shared_layers_are_refused(models):
    """A model whose layers reuse one attention module (as ALBERT's do) cannot ablate one layer."""
    lm = models["gpt2"]
    shared = copy.copy(lm)
    object.__setattr__(shared, "model", copy.deepcopy(lm.model))
    shared.model.transformer.h[1].attn = shared.model.transformer.h[0].attn
    with pytest.raises(explorer.InputError, match="share one attention module"):
        explorer.capture(shared, "the cat", ablate=((0, 0),))


# -- decoding: every forward pass is ablated --------------------------------------------------------------------


DECODE_CASES = {
    "greedy": dict(strategy="greedy", max_new_tokens=10),
    "beam": dict(strategy="beam", num_beams=3, num_return_sequences=2, max_new_tokens=8),
}


def generate_on(lm, model, prompt: str, case: dict):
    ids = lm.tokenizer(prompt, return_tensors="pt")["input_ids"].to(DEVICE)
    with torch.inference_mode():
        return model.generate(ids, generation_config=reference_config(lm, case))


@pytest.mark.parametrize("case", sorted(DECODE_CASES))
@pytest.mark.parametrize(
    ("name", "heads"),
    [("gpt2", ((0, 1), (1, 0))), ("llama", ((1, 1),)), ("prose", ((1, 3), (2, 4))), ("t5", (("cross", 1, 1),))],
)
def test_decode_with_ablation_equals_generate_on_the_zeroed_copy(models, name, heads, case):
    lm = models[name]
    trace = explorer.decode(lm, TEXTS[name], ablate=heads, **DECODE_CASES[case])
    reference = generate_on(lm, zeroed_copy(lm, heads), TEXTS[name], DECODE_CASES[case])
    fill = {special_token_ids(lm)["pad"], *special_token_ids(lm)["eos"]}
    for ours, theirs in zip(trace.sequences, reference.sequences.tolist(), strict=True):
        assert ours.tolist() == theirs[: len(ours)] and set(theirs[len(ours) :]) <= fill
    if case == "beam":
        np.testing.assert_allclose(trace.sequence_scores, reference.sequences_scores.cpu().numpy(), atol=1e-5)
        plain = explorer.decode(lm, TEXTS[name], **DECODE_CASES[case])
        assert np.abs(plain.sequence_scores - trace.sequence_scores).max() > 1e-5
    assert trace.settings.ablate == ablation.normalize(lm, heads)


# -- each head's effect on the next token --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "heads", "target"),
    [
        ("llama", ((0, 0), (0, 3), (1, 2)), None),
        ("prose", ((0, 0), (2, 4), (4, 5)), None),
        ("prose", ((1, 1), (3, 2)), 17),
        ("t5", ((0, 1), (1, 0)), None),
    ],
)
def test_head_ablation_effects_equal_zeroed_copies(models, name, heads, target):
    lm = models[name]
    reports = []
    effects = explorer.head_ablation_effects(
        lm, TEXTS[name], target_token=target, progress=lambda *a: reports.append(a)
    )
    stack = ablation.layout(lm).heads["decoder"]
    assert effects.logprobs.shape == effects.changes.shape == effects.top_ids.shape == (len(stack), stack[0])
    total = len(stack) * stack[0]
    assert reports[-1] == (total, total) and [done for done, _ in reports] == sorted({done for done, _ in reports})
    plain = torch.log_softmax(torch.tensor(reference_logits(lm, lm.model, TEXTS[name])), dim=-1)
    expected_target = int(plain.argmax()) if target is None else target
    assert effects.target_id == expected_target
    assert effects.baseline_logprob == pytest.approx(float(plain[expected_target]), abs=1e-5)
    for layer, head in heads:
        spec = (("decoder", layer, head),) if lm.kind == "encoder-decoder" else ((layer, head),)
        logprobs = torch.log_softmax(torch.tensor(reference_logits(lm, zeroed_copy(lm, spec), TEXTS[name])), dim=-1)
        change = float(logprobs[expected_target] - plain[expected_target])
        assert effects.changes[layer, head] == pytest.approx(change, abs=2e-5)
        assert effects.top_ids[layer, head] == int(logprobs.argmax())
        assert (
            effects.top_tokens[layer][head]
            == explorer.next_token_logits(lm, TEXTS[name]).tokens[int(logprobs.argmax())]
        )
    assert np.abs(effects.changes).max() > 1e-4


def test_head_ablation_effects_refuse_what_they_cannot_measure(models):
    with pytest.raises(explorer.InputError, match="encoder"):
        explorer.head_ablation_effects(models["bert"], TEXTS["bert"])
    with pytest.raises(explorer.InputError, match="target_token"):
        explorer.head_ablation_effects(models["gpt2"], TEXTS["gpt2"], target_token=10**6)
    with pytest.raises(explorer.InputError, match="no 'cross'"):
        explorer.head_ablation_effects(models["gpt2"], TEXTS["gpt2"], stack="cross")


# -- one shared model, many threads ---------------------------------------------------------------------------------


def test_threads_ablating_different_heads_at_once_get_their_own_results(models):
    lm = models["prose"]
    jobs = [((0, 0),), ((2, 4), (3, 1)), (), ((4, 5),), ((1, 2),), ()] * 2
    sequential = [explorer.capture(lm, TEXTS["prose"], ablate=job) for job in jobs]
    barrier = threading.Barrier(len(jobs))

    def run(job):
        barrier.wait()  # every thread starts its forward pass at the same moment
        return explorer.capture(lm, TEXTS["prose"], ablate=job)

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        concurrent = list(pool.map(run, jobs))
    for alone, together in zip(sequential, concurrent, strict=True):
        assert alone.ablated == together.ablated
        np.testing.assert_array_equal(alone.attentions, together.attentions)
        np.testing.assert_array_equal(alone.hidden_states, together.hidden_states)
    assert np.abs(sequential[0].hidden_states - sequential[2].hidden_states).max() > 1e-4
    assert recorder._keep.get() is None


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ([[-2e-5, 1e-5]], "No single head matters here: ablating any one of them changes its log-probability "
         "(-1.2e-06) by at most 2e-05, less than 1e-04, what rounding alone can do in float32."),
        ([[-2e-5, -0.5]], "Ablating layer 0, head 1 alone costs it the most: log-probability -1.2e-06 → -0.5 (-0.5)."),
        ([[3e-4, 2e-3]], "No head helps it: ablating any one of them leaves its log-probability (-1.2e-06) as it is or "
         "raises it (by up to 0.002)."),
    ],
)  # fmt: skip
def test_the_ablation_summary_says_what_its_numbers_are(changes, says):
    from explorer.compute.ablation import ablation_summary

    assert ablation_summary(np.array(changes), -1.2e-6, tolerance=1e-4, dtype="float32") == says


def test_probabilities_stay_true_near_one_and_zero():
    from explorer.compute.ablation import probability

    assert probability(np.log(0.25)) == "25.0%"
    assert probability(-1.2e-6) == "1 − 1.2e-06"
    assert probability(np.log(2e-5)) == "2e-05"


@pytest.mark.parametrize("family", ["led", "prophetnet"])
def test_heads_computed_in_the_models_own_code_are_zeroed_at_their_output_projection(tmp_path, family):
    """LED returns its encoder's maps transposed and cut to the text (a view of what its attention returned);
    ProphetNet's decoder projects the main stream and the predicting streams ([batch, stream, query, ...]) with one
    output projection, called twice: each ablated log-probability equals one plain run with the head zeroed at
    that projection's input (the matrix's reference, hooks on every call)."""
    from tests import families

    assert families.check_ablation(families.subject_for(family, tmp_path)) == families.Cell(families.Y)


def test_xlnet_switches_a_head_off_at_its_attention_weights_and_patching_says_why_it_cannot_replace_one(tmp_path):
    """XLNet's attention combines its heads with a weight parameter of its own (``o``, [hidden, head, head_dim]), not
    a module: no module's input holds the heads' outputs side by side. Its weights pass its attention dropout with
    the heads side by side, so a head is switched off there: each ablated log-probability (read on the first pass
    generate() prepares) equals a copy of the model with that head's slice of ``o`` set to 0 (the matrix's reference),
    and no two heads give the same. Patching, which replaces a head's output, still says why it cannot."""
    from tests import families

    subject = families.subject_for("xlnet", tmp_path)
    effects = explorer.head_ablation_effects(subject.lm, families.PROMPT)
    assert families.check_ablation(subject) == families.Cell(families.Y)
    assert len(set(effects.logprobs.ravel().tolist())) == effects.logprobs.size
    assert not np.isclose(effects.logprobs, effects.baseline_logprob, rtol=0, atol=1e-6).any()
    patched = explorer.patch(subject.lm, families.PROMPT, families.CORRUPTED, counterfactual="mat")
    assert "no hook can replace one head's output (head ablation switches a head off" in patched.headless


@pytest.mark.parametrize("family", ["jamba", "qwen3_next"])
def test_a_hybrid_ablates_the_heads_of_its_attention_layers_only(tmp_path, family):
    """Jamba (a Mamba layer, then an attention layer) and Qwen3-Next (linear attention, then full attention): head
    ablation numbers the attention layers alone, and each ablated log-probability equals one plain run with that head
    zeroed at the input of the output projection of the layer that returns the attention map (the matrix's
    reference); no two heads give the same, and none leaves the prediction as it was."""
    from tests import families

    subject = families.subject_for(family, tmp_path)
    effects = explorer.head_ablation_effects(subject.lm, families.PROMPT)
    assert effects.logprobs.shape == (1, subject.reference.config.num_attention_heads)
    assert families.check_ablation(subject) == families.Cell(families.Y)
    assert len(set(effects.logprobs.ravel().tolist())) == effects.logprobs.size
    assert not np.isclose(effects.logprobs, effects.baseline_logprob, rtol=0, atol=1e-6).any()


def test_a_hybrids_ablation_map_says_which_of_the_models_layers_its_rows_are(tmp_path):
    """Jamba's first layer is a Mamba layer, with no heads: the map counts its attention layers only, and says that
    its layer 0 is the model's layer 1 (its config's ``layer_types``)."""
    from explorer import views
    from explorer.compute.ablation import ablation_summary
    from tests import families

    subject = families.subject_for("jamba", tmp_path)
    effects = explorer.head_ablation_effects(subject.lm, families.PROMPT)
    types = subject.lm.model.config.layer_types
    with_maps = [number for number, kind in enumerate(types) if kind == "full_attention"]
    assert effects.logprobs.shape[0] == len(with_maps) and effects.layer_numbers.tolist() == with_maps == [1]
    assert "the map's rows are its layer 1, by the model's own numbers" in views.ablation.numbering_caption(effects)
    figure = views.ablation.Map(subject.lm.name, families.PROMPT, ((0, 2),)).figure(effects)()
    assert list(figure.layout.yaxis.ticktext) == ["1"] and list(figure.layout.yaxis.tickvals) == [0]
    assert figure.data[0].hovertext[2].startswith("<b>layer 1, head 2</b>")
    assert figure.data[0].customdata[2] == [0, 2]  # a click still names the map's row
    after = views.ablation.BeforeAfter(subject.lm.name, families.PROMPT, ((0, 2),), layer_numbers=(1,))
    assert after.info().where == ("layer 1 · head 2",)
    hurt = np.array([[0.0, 0.0, -0.5, 0.0]])  # the summary names the head that costs the most by its model's number
    said = ablation_summary(hurt, -1.0, tolerance=1e-4, dtype="float32", layer_numbers=effects.layer_numbers)
    assert said.startswith("Ablating layer 1, head 2 alone costs it the most")
    gpt2 = explorer.head_ablation_effects(families.subject_for("gpt2", tmp_path).lm, families.PROMPT)
    assert gpt2.layer_numbers is None and views.ablation.numbering_caption(gpt2) == ""
    plain = views.ablation.Map("gpt2", families.PROMPT).figure(gpt2)()
    assert plain.layout.yaxis.tickmode == "linear" and plain.data[0].hovertext[0].startswith("<b>layer 0, head 0</b>")
