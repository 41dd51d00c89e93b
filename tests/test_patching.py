"""Activation patching against a reference written here: plain forward hooks on the model's own modules, one
patched run per cell, on a separate copy of the weights loaded the plain way (transformers' eager attention; for
BERT, ``BertForMaskedLM`` with its own head).

The reference patches a head at the input of its layer's output projection (the heads concatenated), where the
explorer patches the recording attention's output, and batches nothing.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, BertForMaskedLM, T5ForConditionalGeneration

import explorer
from explorer.errors import InputError
from explorer.models import patching as patching_module
from explorer.models import recorder
from explorer.models.decoding import special_token_ids
from explorer.models.loading import resolve_source
from tests.devices import DEVICE
from tests.test_lens import save_family
from tests.tiny_models import TINY, eager_reference

# name -> (clean, corrupted): one word changed. The bundled decoder's pair is the page's default (she / he).
PROMPTS = {
    "gpt2": ("the cat sat on the mat and", "the dog sat on the mat and"),
    "llama": ("time flies like an arrow and", "fruit flies like an arrow and"),
    "bert": ("the cat sat on the [MASK] .", "the dog sat on the [MASK] ."),
    "t5": ("the cat ran to the park", "the dog ran to the park"),
    "prose": ("The girl was sure that", "The boy was sure that"),
}
# The tiny models' weights drawn this many times wider than their configs say: at the default scale a 16-wide random
# model's logit difference moves by 1e-4 between the prompts, and the recovered fractions would be rounding over it.
WIDER = 10
# The reference's own modules: (layers, the MLP in a layer, the output projection in a layer, head_dim).
REFERENCE_SITES = {
    "gpt2": (lambda m: m.transformer.h, lambda b: b.mlp, lambda b: b.attn.c_proj, lambda c: c.n_embd // c.n_head),
    "llama": (lambda m: m.model.layers, lambda b: b.mlp, lambda b: b.self_attn.o_proj, lambda c: c.head_dim),
    "bert": (
        lambda m: m.bert.encoder.layer,
        lambda b: b.output.dense,
        lambda b: b.attention.output.dense,
        lambda c: c.hidden_size // c.num_attention_heads,
    ),
    "t5": (
        lambda m: m.encoder.block,
        lambda b: b.layer[1].DenseReluDense,
        lambda b: b.layer[0].SelfAttention.o,
        lambda c: c.d_kv,
    ),
}


def _heads_of(config) -> int:
    return config.hidden_size // config.num_attention_heads


# Families of tests/families.py (built by tests/test_lens.py's ``save_family``): where the module graph is not what
# the table above once assumed. OPT's fc2 reads positions flattened into rows; GPT-OSS's MLP returns a tuple;
# GraniteMoE's is ``block_sparse_moe``; GPT-Neo, BLOOM and Falcon compute attention in their own code (heads patched
# at their output projection's input); BLOOM's MLP adds the residual itself (its ``dense_4h_to_h`` is the output).
FAMILY_SITES = {
    "opt": (lambda m: m.model.decoder.layers, lambda b: b.fc2, lambda b: b.self_attn.out_proj, _heads_of),
    "gpt_oss": (lambda m: m.model.layers, lambda b: b.mlp, lambda b: b.self_attn.o_proj, lambda c: c.head_dim),
    "granitemoe": (
        lambda m: m.model.layers,
        lambda b: b.block_sparse_moe,
        lambda b: b.self_attn.o_proj,
        _heads_of,
    ),
    "gpt_neo": (lambda m: m.transformer.h, lambda b: b.mlp, lambda b: b.attn.attention.out_proj, _heads_of),
    "bloom": (lambda m: m.transformer.h, lambda b: b.mlp.dense_4h_to_h, lambda b: b.self_attention.dense, _heads_of),
    "falcon": (lambda m: m.transformer.h, lambda b: b.mlp, lambda b: b.self_attention.dense, _heads_of),
}
REFERENCE_SITES.update(FAMILY_SITES)
for family in FAMILY_SITES:
    PROMPTS[family] = PROMPTS["gpt2"]


def save_wider_tiny(name: str, folder) -> str:
    """The tiny ``name`` model of ``tests/tiny_models.py`` with ``WIDER`` initial weights; BERT with its masked-LM
    head and a [MASK] token (the word tokenizer has none)."""
    auto_class, make_config, make_tokenizer = TINY[name]
    tokenizer, config = make_tokenizer(), make_config()
    if name == "bert":
        tokenizer.add_special_tokens({"mask_token": "[MASK]"})
        config.vocab_size = len(tokenizer)
    for scale in ("initializer_range", "initializer_factor"):  # T5 calls it a factor
        if hasattr(config, scale):
            setattr(config, scale, getattr(config, scale) * WIDER)
    torch.manual_seed(0)
    build = {"bert": BertForMaskedLM, "t5": T5ForConditionalGeneration}.get(name)
    model = build(config) if build else auto_class.from_config(config, attn_implementation="eager")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    found = {name: save_wider_tiny(name, tmp_path_factory.mktemp(name)) for name in ("gpt2", "llama", "bert", "t5")}
    found |= {name: save_family(name, tmp_path_factory.mktemp(name)) for name in FAMILY_SITES}
    found["prose"] = resolve_source(explorer.DEFAULT_DECODER)
    return found


@pytest.fixture(scope="module")
def models(folders):
    return {name: explorer.load_model(folder, device=DEVICE) for name, folder in folders.items()}


# -- the reference --------------------------------------------------------------------------------------------


class Reference:
    """One model loaded the plain way, patched by hand with forward hooks, one run per cell."""

    def __init__(self, name: str, lm):
        self.lm, self.name = lm, name
        self.family = lm.model.config.model_type if name == "prose" else name
        folder = lm.model.config._name_or_path
        if name == "bert":
            self.model = BertForMaskedLM.from_pretrained(folder, attn_implementation="eager").to(DEVICE).eval()
        elif name in FAMILY_SITES:
            self.model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").to(DEVICE).eval()
        else:  # the bundled decoder by its architecture, from its config (whichever decoder is the default)
            self.model = eager_reference(self.family, folder)
        layers, mlp, projection, head_dim = REFERENCE_SITES[self.family]
        self.layers = list(layers(self.model))
        self.mlps = [mlp(layer) for layer in self.layers]
        self.projections = [projection(layer) for layer in self.layers]
        self.head_dim = head_dim(self.model.config)

    def ids(self, text: str) -> torch.Tensor:
        return self.lm.tokenizer(text, return_tensors="pt")["input_ids"].to(DEVICE)

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            if self.name == "t5":
                start = torch.tensor([[special_token_ids(self.lm)["decoder_start"]]], device=DEVICE)
                return self.model(input_ids=ids, decoder_input_ids=start).logits[0, -1].float().cpu()
            logits = self.model(input_ids=ids).logits[0]
            position = (ids[0] == self.lm.tokenizer.mask_token_id).nonzero()[0, 0] if self.name == "bert" else -1
            return logits[position].float().cpu()

    def record(self, ids: torch.Tensor) -> dict:
        """The clean run's layer inputs (and last output), MLP outputs and output projections' inputs."""
        found, handles = {}, []
        for layer, module in enumerate(self.layers):
            handles += [
                module.register_forward_pre_hook(partial(_keep_input, found, ("in", layer)), with_kwargs=True),
                self.mlps[layer].register_forward_hook(partial(_keep_whole_output, found, ("mlp", layer))),
                self.projections[layer].register_forward_pre_hook(partial(_keep_heads, found, ("heads", layer))),
            ]
        handles.append(self.layers[-1].register_forward_hook(partial(_keep_output, found, ("in", len(self.layers)))))
        try:
            self.logits(ids)
        finally:
            for handle in handles:
                handle.remove()
        return found

    def patched_ld(self, ids, clean: dict, tokens, site: str, layer: int, index) -> float:
        """LD with one cell of the clean run patched in: ("residual", layer, position), ("head", layer, head),
        ("mlp", layer, None)."""
        handle = self._hook(clean, site, layer, index)
        try:
            logits = self.logits(ids)
        finally:
            handle.remove()
        return float(logits[tokens[0]] - logits[tokens[1]])

    def _hook(self, clean, site, layer, index):
        if site == "mlp":
            # the clean run's whole output in place of this run's, in whatever shape the module returns it
            return self.mlps[layer].register_forward_hook(
                lambda m, a, o: (clean["mlp", layer], *o[1:]) if isinstance(o, tuple) else clean["mlp", layer]
            )
        if site == "head":
            cut = slice(index * self.head_dim, (index + 1) * self.head_dim)

            def head(module, args):
                patched = args[0].clone()
                patched[0, :, cut] = clean["heads", layer][:, cut]
                return (patched, *args[1:])

            return self.projections[layer].register_forward_pre_hook(head)

        def replace(hidden):
            hidden = hidden.clone()
            hidden[0, index] = clean["in", layer][index]
            return hidden

        if layer == len(self.layers):
            return self.layers[-1].register_forward_hook(
                lambda m, a, o: (replace(o[0]), *o[1:]) if isinstance(o, tuple) else replace(o)
            )

        def layer_input(module, args, kwargs):
            if args:
                return (replace(args[0]), *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": replace(kwargs["hidden_states"])}

        return self.layers[layer].register_forward_pre_hook(layer_input, with_kwargs=True)


def _keep_input(found, key, module, args, kwargs):
    found[key] = (args[0] if args else kwargs["hidden_states"])[0].clone()


def _keep_output(found, key, module, args, output):
    found[key] = (output[0] if isinstance(output, tuple) else output)[0].clone()


def _keep_whole_output(found, key, module, args, output):
    found[key] = (output[0] if isinstance(output, tuple) else output).clone()


def _keep_heads(found, key, module, args):
    found[key] = args[0][0].clone()


def widest_tokens(reference: Reference) -> tuple[int, int]:
    """(answer, counterfactual): the tokens whose logit difference the one changed word moves most, so that the
    recovered fractions are fractions of a real change. The bundled decoder's are its own top tokens (None)."""
    if reference.name == "prose":
        return None, None
    clean, corrupted = (reference.logits(reference.ids(text)) for text in PROMPTS[reference.name])
    moved = clean - corrupted
    return int(moved.argmax()), int(moved.argmin())


def reference_maps(reference: Reference, result) -> dict[str, np.ndarray]:
    """The three maps as the reference computes them, cell by cell, for the tokens the result measured."""
    clean_ids, corrupted_ids = (reference.ids(text) for text in PROMPTS[reference.name])
    tokens = (result.answer_id, result.counterfactual_id)
    clean = reference.record(clean_ids)
    lds = [reference.logits(ids) for ids in (clean_ids, corrupted_ids)]
    ld_clean, ld_corrupted = (float(x[tokens[0]] - x[tokens[1]]) for x in lds)

    def recovered(site, layer, index):
        ld = reference.patched_ld(corrupted_ids, clean, tokens, site, layer, index)
        return (ld - ld_corrupted) / (ld_clean - ld_corrupted)

    layers, positions, heads = result.num_layers, clean_ids.shape[1], result.heads.shape[1]
    return {
        "ld": np.array([ld_clean, ld_corrupted]),
        "residual": np.array([[recovered("residual", i, p) for p in range(positions)] for i in range(layers + 1)]),
        "heads": np.array([[recovered("head", i, h) for h in range(heads)] for i in range(layers)]),
        "mlp": np.array([recovered("mlp", i, None) for i in range(layers)]),
    }


@pytest.fixture(scope="module")
def references(models):
    return {name: Reference(name, lm) for name, lm in models.items()}


@pytest.fixture(scope="module")
def tokens(references):
    return {name: widest_tokens(reference) for name, reference in references.items()}


def run_patch(lm, name: str, tokens: dict, **extra):
    answer, counterfactual = tokens[name]
    return explorer.patch(lm, *PROMPTS[name], answer=answer, counterfactual=counterfactual, **extra)


# -- against the reference ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PROMPTS))
def test_patching_equals_the_hooked_reference(models, references, tokens, name):
    result = run_patch(models[name], name, tokens)
    expected = reference_maps(references[name], result)
    np.testing.assert_allclose([result.ld_clean, result.ld_corrupted], expected["ld"], atol=1e-5, rtol=0)
    for field in ("residual", "heads", "mlp"):
        np.testing.assert_allclose(getattr(result, field), expected[field], atol=1e-5, rtol=0, err_msg=field)
    print(name, "max error", max(np.abs(getattr(result, f) - expected[f]).max() for f in ("residual", "heads", "mlp")))
    assert abs(result.ld_clean - result.ld_corrupted) > 0.2  # the maps are fractions of a real difference
    assert np.abs(result.heads).max() > 1e-3 and np.abs(result.mlp).max() > 1e-3  # not all nothing
    assert result.clean_tokens != result.corrupted_tokens and len(result.clean_tokens) == result.residual.shape[1]


@pytest.mark.parametrize("name", list(PROMPTS))
def test_the_whole_stream_recovers_one_and_nothing_zero(models, tokens, name):
    """The whole residual stream at layer 0 is the clean run's input, at layer L its output: both give the clean
    LD back; patching nothing leaves the corrupted one. In batched rows, so up to rounding."""
    result = run_patch(models[name], name, tokens)
    assert result.verification() < 1e-5, result.summary()
    assert abs(result.whole_first - 1) < 1e-5 and abs(result.whole_last - 1) < 1e-5 and abs(result.nothing) < 1e-5
    if name in ("gpt2", "llama", "prose"):
        # a decoder's last layer at one position moves only that position's prediction: the last one's is all
        np.testing.assert_allclose(result.residual[-1, -1], 1, atol=1e-5)
        np.testing.assert_allclose(result.residual[-1, :-1], 0, atol=1e-5)
        # and a position cannot see the ones after it: only the last one matters at any layer for the last
        assert result.metric_position == len(result.clean_tokens) - 1


def test_the_prompts_tokens_are_the_default_answer_and_counterfactual(models):
    lm = models["prose"]
    clean, corrupted = PROMPTS["prose"]
    result = explorer.patch(lm, clean, corrupted)
    clean_top = explorer.next_token_logits(lm, clean).logits.argmax()
    corrupted_top = explorer.next_token_logits(lm, corrupted).logits.argmax()
    assert (result.answer_id, result.counterfactual_id) == (clean_top, corrupted_top)
    typed = explorer.patch(lm, clean, corrupted, answer=result.answer_token, counterfactual=int(corrupted_top))
    np.testing.assert_array_equal(typed.residual, result.residual)


def test_the_gateway_runs_it_once_for_every_session(models):
    """``gateway.run("patching", ...)``: the library's result, counted in runs, kept for the next caller."""
    from contextlib import contextmanager

    from explorer import gateway

    shown = []

    @contextmanager
    def progress(label, waiting, unit):
        steps = []
        shown.append((label, unit, steps))
        yield lambda done, total: steps.append((done, total))

    gateway.results_cache().clear()
    clean, corrupted = PROMPTS["prose"]
    result = gateway.run("patching", explorer.DEFAULT_DECODER, clean, corrupted, progress=progress)
    assert gateway.run("patching", explorer.DEFAULT_DECODER, clean, corrupted, None, None, progress=progress) is result
    [(label, unit, steps)] = shown  # the second call was a hit
    cells = result.residual.size + result.heads.size + result.mlp.size + 3
    assert (
        label.startswith("Patching") and "{done} of {total}" in unit and steps[-1] == (cells, cells) and len(steps) > 1
    )
    # The gateway's model is the app's (on the CPU), the test's is on the test device: equal within 1e-5 (on CUDA
    # the two differ by 2e-6; on the CPU they are the same numbers).
    np.testing.assert_allclose(
        result.residual, explorer.patch(models["prose"], clean, corrupted).residual, atol=1e-5, rtol=0
    )


# -- what the user is told -------------------------------------------------------------------------------------


def test_prompts_of_different_lengths_are_refused_with_both_lengths(models):
    with pytest.raises(InputError, match=r"clean prompt is 6 tokens and the corrupted prompt 8"):
        explorer.patch(models["gpt2"], "the cat sat on the mat", "the big dog sat on the mat ,", answer="and")


@pytest.mark.parametrize(
    ("name", "settings", "words"),
    [
        ("prose", dict(answer=" nevertheless unquestionably"), "one token"),
        ("prose", dict(answer=""), "0 tokens"),
        ("prose", dict(counterfactual=10**9), "id from 0 to"),
        ("prose", dict(answer=" the", counterfactual=" the"), "both ' the'"),
        ("gpt2", dict(answer="park", counterfactual=True), "id from 0 to"),
    ],
)
def test_bad_tokens_are_refused(models, name, settings, words):
    clean, corrupted = PROMPTS[name]
    with pytest.raises(InputError, match=words):
        explorer.patch(models[name], clean, corrupted, **settings)


def test_the_same_prompt_twice_is_refused(models):
    clean = PROMPTS["prose"][0]
    with pytest.raises(InputError, match="both"):  # same top token: answer == counterfactual
        explorer.patch(models["prose"], clean, clean)
    with pytest.raises(InputError, match=r"is .* on both prompts"):
        explorer.patch(models["prose"], clean, clean, answer=" the", counterfactual=" a")


def test_an_encoder_needs_one_mask_at_the_same_position(models):
    with pytest.raises(InputError, match=r"one \[MASK\] in each prompt"):
        explorer.patch(models["bert"], "the cat sat on the mat", "the dog sat on the mat")
    with pytest.raises(InputError, match=r"\[3\] in the clean prompt and \[6\]"):
        explorer.patch(models["bert"], "the cat [MASK] on the mat", "the dog sat on the [MASK]")


# -- the shared model -------------------------------------------------------------------------------------------


def hooks_of(model: torch.nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


@pytest.mark.parametrize("name", ["prose", "t5"])
def test_no_hook_is_left_on_the_model(models, tokens, name):
    lm = models[name]
    before = hooks_of(lm.model)
    run_patch(lm, name, tokens)
    assert hooks_of(lm.model) == before
    assert recorder._edits.get() is None and patching_module._active.get() is None

    def fail(done, total):
        assert hooks_of(lm.model) > before  # the hooks are there while the call runs
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        run_patch(lm, name, tokens, progress=fail)
    assert hooks_of(lm.model) == before
    assert recorder._edits.get() is None and patching_module._active.get() is None


def test_concurrent_calls_do_not_see_each_others_hooks(models):
    """Patching on many threads at once, beside plain runs of the same model: each gets its single-call result."""
    lm = models["prose"]
    clean, corrupted = PROMPTS["prose"]
    alone = explorer.patch(lm, clean, corrupted)
    plain = explorer.next_token_logits(lm, corrupted).logits
    start = threading.Barrier(6)

    def patching(_):
        start.wait()
        return explorer.patch(lm, clean, corrupted)

    def plain_run(_):
        start.wait()
        return [explorer.next_token_logits(lm, corrupted).logits for _ in range(5)]

    with ThreadPoolExecutor(6) as pool:
        patched = [pool.submit(patching, i) for i in range(3)]
        plains = [pool.submit(plain_run, i) for i in range(3)]
    for future in patched:
        result = future.result()
        np.testing.assert_array_equal(result.residual, alone.residual)
        np.testing.assert_array_equal(result.heads, alone.heads)
    for logits in (logits for future in plains for logits in future.result()):
        np.testing.assert_array_equal(logits, plain)


# -- families whose layers, streams or heads are unusual (tests/families.py's tiny models) ------------------------

# family -> what the matrix cell's note must say: ALBERT calls one layer module for every layer (hooks act on its
# k-th call); Llama 4's chunks of 4 keep the changed word from the last position (a pair changed inside it);
# Jamba's Mamba layer has no heads, Mamba has neither heads nor an MLP apart from its mixer; Longformer pads to a
# window multiple; BigBird switches itself to full attention (loaded as it runs, its heads are patched too);
# ProphetNet's encoder is patched though its decoder's n-gram heads are out of reach; XLNet predicts at a position
# its generation appends (its query stream there: the test below), its heads combined in its own code; OpenAI-GPT's
# layers return a list, not a tuple (its heads and MLP patched too); Pegasus-X's global-local encoder (its own code,
# beside a recorded decoder) has its heads patched at its output projection; LongT5's local encoder returns blocks,
# not maps per head, and its note says so.
UNUSUAL = {
    "albert": "reference checks the residual stream only",  # its heads and MLP: the test below
    "llama4_text": "a change in the last chunk",
    "jamba": "no heads in layer 0: no attention there",
    "mamba": "no MLP in layer 0, 1",
    "longformer": "",
    "big_bird": "",
    "prophetnet": "",
    "xlnet": "heads refused in layer 0, 1: The heads of",
    "openai-gpt": "",
    "pegasus_x": "",
    "longt5": "its encoder returns its attention weights as 5-dimensional tensors, not as maps",
}


@pytest.mark.parametrize("family", list(UNUSUAL))
def test_patching_unusual_families_equals_one_hooked_run_per_cell(tmp_path, family):
    from tests import families

    cell = families.check_patching(families.subject_for(family, tmp_path))
    assert cell.mark == families.Y, cell.note
    assert UNUSUAL[family] in cell.note if UNUSUAL[family] else cell.note == ""


def test_xlnet_patches_its_content_stream_at_the_text_and_its_query_stream_where_it_predicts(tmp_path):
    """XLNet predicts at a token its generate() appends after the text, from its query stream there: patching reads
    the logit difference of that first pass, patches the content stream under each token and the query stream under
    the column after them, and each MLP in both streams; every cell equals one run of the plain model's first pass
    patched by hooks on its own layers (the matrix's reference). The query stream starts as the same learned vector
    in both prompts (layer 0: nothing to recover) and is all the head reads (the last layer: the content stream
    recovers nothing, the query stream everything)."""
    from tests import families

    subject = families.subject_for("xlnet", tmp_path)
    assert families.check_patching(subject).mark == families.Y
    clean = explorer.next_token_logits(subject.lm, families.PROMPT).logits
    moved = clean - explorer.next_token_logits(subject.lm, families.CORRUPTED).logits
    found = explorer.patch(
        subject.lm, families.PROMPT, families.CORRUPTED, answer=int(moved.argmax()), counterfactual=int(moved.argmin())
    )
    assert found.columns == (*families.PROMPT.split(), "(next token)") and found.metric_position == 6
    assert found.residual.shape == (3, 7) and np.isfinite(found.mlp).all()
    np.testing.assert_allclose(found.residual[-1], [0, 0, 0, 0, 0, 0, 1], atol=1e-3)
    assert found.residual[0, -1] == pytest.approx(0, abs=1e-3)
    assert found.verification() <= 1e-3 and "query stream where it predicts" in found.streams


def test_xlnet_patching_and_lens_beside_other_calls_on_the_shared_model(tmp_path):
    """XLNet's patching, lens and next token run at once on one loaded model, on threads, give what each gives
    alone: the streams' hooks act only on their own call's passes, and the first pass's layout is probed once."""
    from tests import families

    lm = families.subject_for("xlnet", tmp_path).lm
    moved = (
        explorer.next_token_logits(lm, families.PROMPT).logits
        - explorer.next_token_logits(lm, families.CORRUPTED).logits
    )
    pair = dict(answer=int(moved.argmax()), counterfactual=int(moved.argmin()))
    calls = {
        "patch": lambda: explorer.patch(lm, families.PROMPT, families.CORRUPTED, **pair).residual,
        "lens": lambda: explorer.logit_lens(lm, families.PROMPT).top_logprobs,
        "next": lambda: explorer.next_token_logits(lm, families.CORRUPTED).logits,
    }
    alone = {name: call() for name, call in calls.items()}
    with ThreadPoolExecutor(max_workers=6) as pool:
        together = [(name, pool.submit(call)) for name, call in calls.items() for _ in range(2)]
    for name, future in together:
        np.testing.assert_allclose(future.result(), alone[name], atol=1e-6, err_msg=name)


def test_albert_patches_each_layer_on_its_own_call_of_the_shared_module(tmp_path):
    """ALBERT runs one layer module (shared weights) for every layer: each head and MLP cell of layer k patches the
    k-th call only, as hooks that count the calls of the reference's own attention projection and feed-forward
    output show."""
    from tests import families

    subject = families.subject_for("albert", tmp_path)
    shared = subject.reference.albert.encoder.albert_layer_groups[0].albert_layers[0]
    layers = subject.reference.config.num_hidden_layers
    patcher = families.Patcher(subject, [shared] * layers)
    patcher.mlps, patcher.projections = [shared.ffn_output] * layers, [shared.attention.dense] * layers
    cell = families.compare_patching(subject, patcher)
    assert cell == families.Cell(families.Y), cell.note


def test_a_summary_names_only_the_sites_a_model_has_and_says_why_the_rest_are_blank():
    """NaN marks a layer without heads (a hybrid's Mamba layer) or without an MLP (Mamba's mixer): the summary's
    strongest head and MLP come from the layers that have them, and the reason is said."""
    from explorer import views
    from explorer.data.patching import Patching

    def result(heads, mlp, headless):
        return Patching(
            model_name="m", clean_tokens=("a", "b"), corrupted_tokens=("a", "c"), answer_id=1, answer_token="x",
            counterfactual_id=2, counterfactual_token="y", ld_clean=1.0, ld_corrupted=0.0, stack="decoder",
            metric_position=1, residual=np.zeros((3, 2), np.float32), heads=np.asarray(heads, np.float32),
            mlp=np.asarray(mlp, np.float32), whole_first=1.0, whole_last=1.0, nothing=0.0, headless=headless,
        )  # fmt: skip

    hybrid = result([[np.nan, np.nan], [0.1, 0.7]], [0.2, 0.5], "Layer 0 computes no attention.")
    assert hybrid.has_heads and hybrid.has_mlps
    line = views.patching.summary(hybrid)
    assert "layer 1, head 1 (+0.70)" in line and "the MLP: layer 1" in line and "Layer 0 computes no attention." in line
    mamba = result(np.zeros((2, 0)), [np.nan, np.nan], "m has no attention.")
    assert not mamba.has_heads and not mamba.has_mlps
    mamba_line = views.patching.summary(mamba)
    assert "recovers the most alone" not in mamba_line and "the MLP:" not in mamba_line
    assert mamba_line.endswith("m has no attention.")


# -- Pegasus-X's global-local encoder ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pegasus_x(tmp_path_factory):
    """The matrix's tiny Pegasus-X with weights drawn wider (std 0.3): its heads move the logit difference by far
    more than the matrix's tolerance, so a head patched in one call of its output projection alone fails."""
    from tests import families

    model, tokenizer = families.build("pegasus_x")
    torch.manual_seed(0)
    with torch.no_grad():
        for weight in (p for p in model.parameters() if p.dim() == 2):
            weight.normal_(0, 0.3)
    folder = tmp_path_factory.mktemp("pegasus_x")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    subject = families.Subject("pegasus_x", families.FAMILIES["pegasus_x"].kind, model, tokenizer)
    subject.lm = explorer.load_model(str(folder), device="cpu")
    return subject


def test_pegasus_x_patches_each_encoder_head_in_both_calls_of_its_output_projection(pegasus_x):
    """Pegasus-X's encoder attention runs in its own code (its decoder's reaches the recording attention) and runs
    its output projection twice per layer, on its global tokens and then on the text's tokens, the heads side by side
    in its input both times (issue 40: its heads were refused). Each head cell equals one run of the plain model with
    that head's slice replaced by the clean run's in each call (the matrix's reference), and the page says what a
    head's cell patches."""
    from tests import families

    assert families.check_patching(pegasus_x) == families.Cell(families.Y)
    found = explorer.patch(pegasus_x.lm, families.PROMPT, families.CORRUPTED, answer=1, counterfactual=2)
    assert np.isfinite(found.heads).all() and found.heads.shape == (2, 4) and not found.headless
    assert "output projection 2 times" in found.streams and "32 and 8 rows" in found.streams
    assert found.verification() <= 1e-3


def test_pegasus_x_encoder_heads_are_ablated_in_both_calls_of_their_output_projection(pegasus_x):
    """A head of Pegasus-X's encoder switched off is zeroed in both calls of its output projection (the global tokens'
    and the text's): each head's ablated log-probability equals a plain run with that head's slice zeroed by a hook
    on every call."""
    from tests import families

    effects = explorer.head_ablation_effects(pegasus_x.lm, families.PROMPT, stack="encoder")
    ids = pegasus_x.ids(families.PROMPT)
    layers = families.layer_calls(pegasus_x, ids, pegasus_x.start(), effects.logprobs.shape[0], last=False)
    patcher = families.Patcher(pegasus_x, layers)
    heads = effects.logprobs.shape[1]
    expected = [
        [
            float(torch.log_softmax(patcher.patched(ids, patcher.head({}, layer, head, heads)), -1)[effects.target_id])
            for head in range(heads)
        ]
        for layer in range(len(layers))
    ]
    np.testing.assert_allclose(effects.logprobs, expected, atol=1e-4)
    assert np.ptp(effects.logprobs) > 1e-2  # the heads matter: a check that could fail
