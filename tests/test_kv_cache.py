"""``explorer.kv_cache`` against references written here with the library's own eager models: the logits of a
greedy decoding with the model's cache equal those of re-running the whole prefix at every step, within the
dtype's tolerance; the bytes equal the cache tensors' own sizes and the formula layers × 2 × KV heads × tokens ×
head_dim × element size; the grouped-KV saving is num_attention_heads / num_key_value_heads; the attention scores
counted per pass are the entries of the attention weights the eager model returns. Timings are shown to people,
never asserted: the sentences about them are checked on times set by the test."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, DynamicCache, EncoderDecoderCache

import explorer
from explorer import gateway
from explorer.compute.kv_cache import attention_scores, cost_rows, measured_order, speedup
from explorer.data.kv_cache import LOGIT_TOLERANCE
from explorer.models.kv_cache import REPEATS
from explorer.models.loading import BUNDLED_MODELS
from explorer.views.kv_cache import CacheSize, PassTimes, PassWork
from tests.devices import DEVICE
from tests.tiny_models import eager_reference

TEXT = "the cat sat on the mat and the dog"
PROSE = "It is a truth universally acknowledged, that"
FAMILY_PROMPT = "the cat sat on the mat"  # 6 tokens: past tests/families.py's windows of 4
STEPS = 6


def reference_decoder(name: str, tiny_models, dtype=torch.float32):
    """(the model loaded the plain way, with eager attention; its folder)."""
    if name == "prose":
        folder = BUNDLED_MODELS[explorer.DEFAULT_DECODER]()
        model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=dtype)
        return model.to(DEVICE).eval(), str(folder)
    return eager_reference(name, tiny_models[name], dtype), tiny_models[name]


def loaded(name: str, tiny_models, **options):
    return explorer.load_model(
        explorer.DEFAULT_DECODER if name == "prose" else tiny_models[name], device=DEVICE, **options
    )


def cache_bytes(cache) -> int:
    """Σ numel × element_size over every tensor the cache object holds, read here from its layers."""
    parts = (
        [cache.self_attention_cache, cache.cross_attention_cache] if hasattr(cache, "self_attention_cache") else [cache]
    )
    layers = [layer for part in parts for layer in part.layers]
    kv_layers = [layer for layer in layers if isinstance(getattr(layer, "keys", None), torch.Tensor)]  # not states
    return sum(t.numel() * t.element_size() for layer in kv_layers for t in (layer.keys, layer.values))


def reference_passes(model, prompt_ids: torch.Tensor, chosen: list[int]):
    """Per pass: (logits with a cache the test feeds one token at a time, logits of the whole prefix without a
    cache, the cache's bytes after the pass)."""
    cache, passes = DynamicCache(config=model.config), []
    with torch.inference_mode():
        for index in range(len(chosen)):
            fed = prompt_ids if index == 0 else torch.tensor([[chosen[index - 1]]], device=DEVICE)
            cached = model(input_ids=fed, past_key_values=cache, use_cache=True).logits[0, -1].float()
            prefix = torch.cat([prompt_ids, torch.tensor([chosen[:index]], dtype=torch.long, device=DEVICE)], dim=1)
            whole = model(input_ids=prefix, use_cache=False).logits[0, -1].float()
            passes.append((cached, whole, cache_bytes(cache)))
    return passes


@pytest.mark.parametrize("name", ["gpt2", "llama", "prose"])
def test_with_and_without_the_cache_the_logits_are_equal_at_every_step(tiny_models, name):
    model, _ = reference_decoder(name, tiny_models)
    lm = loaded(name, tiny_models)
    prompt = PROSE if name == "prose" else TEXT
    trace = explorer.kv_cache(lm, prompt, steps=STEPS)
    prompt_ids = lm.tokenizer(prompt, return_tensors="pt")["input_ids"].to(DEVICE)
    passes = reference_passes(model, prompt_ids, trace.chosen_ids.tolist())
    assert len(passes) == STEPS + 1 and trace.tolerance == LOGIT_TOLERANCE["float32"]
    for index, (cached, whole, nbytes) in enumerate(passes):
        assert float((cached - whole).abs().max()) <= trace.tolerance  # the reference's own claim
        assert trace.chosen_ids[index] == int(cached.argmax())  # greedy search, the model's own choices
        assert trace.logit_difference[index] <= trace.tolerance
        assert trace.total_bytes[index] == nbytes
    assert (trace.cached_reads == [prompt_ids.shape[1]] + [1] * STEPS).all()
    assert (trace.uncached_reads == prompt_ids.shape[1] + np.arange(STEPS + 1)).all()
    assert trace.cached_reads.sum() == prompt_ids.shape[1] + STEPS  # T + N positions with the cache
    assert trace.uncached_reads.sum() == sum(prompt_ids.shape[1] + i for i in range(STEPS + 1))
    assert (trace.cached_seconds > 0).all() and (trace.uncached_seconds > 0).all()  # measured, never compared
    assert trace.cached_times.shape == trace.uncached_times.shape == (REPEATS, STEPS + 1)
    np.testing.assert_array_equal(trace.cached_seconds, np.median(trace.cached_times, axis=0))
    check_scores(trace, *reference_scores(model, prompt_ids, trace.chosen_ids.tolist()))


def reference_scores(model, prompt_ids: torch.Tensor, chosen: list[int], encoded=None) -> tuple[list, list]:
    """Per pass, with a cache the test feeds one token at a time and without one: the entries of the attention
    weights the eager model returns (its self-attention and, for an encoder-decoder, its cross-attention; batch 1)."""
    config = model.config
    cache = DynamicCache(config=config)
    if encoded is not None:
        cache = EncoderDecoderCache(cache, DynamicCache(config=config))
        encoder = model.get_encoder()(input_ids=encoded)
    counted = ([], [])
    with torch.inference_mode():
        for index in range(len(chosen)):
            fed = prompt_ids if index == 0 else torch.tensor([[chosen[index - 1]]], device=DEVICE)
            prefix = torch.cat([prompt_ids, torch.tensor([chosen[:index]], dtype=torch.long, device=DEVICE)], dim=1)
            for runs, ids, kept in ((counted[0], fed, cache), (counted[1], prefix, None)):
                options = {"past_key_values": kept, "use_cache": kept is not None, "output_attentions": True}
                if encoded is None:
                    out = model(input_ids=ids, **options)
                    weights = out.attentions
                else:
                    out = model(encoder_outputs=encoder, decoder_input_ids=ids, **options)
                    weights = out.decoder_attentions + out.cross_attentions
                runs.append(sum(w[0].numel() for w in weights if w is not None))  # None: a layer without attention
    return counted


@pytest.mark.parametrize("name", ["mistral", "qwen3_next", "falcon_h1"])
def test_a_sliding_window_and_layers_without_keys_are_read_from_the_models_own_cache(tmp_path, monkeypatch, name):
    """Mistral's layers keep only their window's last keys, yet each step attends to one more; Qwen3-Next's
    linear-attention layer keeps a state and no keys: the trace holds its attention layer alone and says so;
    Falcon-H1's layers keep a state-space state beside their keys: counted without it, and said so."""
    from tests.families import model_class
    from tests.test_decoding import build_cheap

    monkeypatch.setattr("explorer.models.kv_cache.REPEATS", 1)  # times are not checked here
    folder = build_cheap(name, tmp_path / name)
    model = model_class(name).from_pretrained(folder, attn_implementation="eager").to(DEVICE).eval()
    lm = explorer.load_model(folder, device=DEVICE)
    trace = explorer.kv_cache(lm, FAMILY_PROMPT, steps=1)
    prompt_ids = lm.tokenizer(FAMILY_PROMPT, return_tensors="pt")["input_ids"].to(DEVICE)
    for index, (cached, _, nbytes) in enumerate(reference_passes(model, prompt_ids, trace.chosen_ids.tolist())):
        assert trace.chosen_ids[index] == int(cached.argmax()) and trace.logit_difference[index] <= trace.tolerance
        assert trace.total_bytes[index] == nbytes  # the reference cache's keys and values, its layers with keys
    check_scores(trace, *reference_scores(model, prompt_ids, trace.chosen_ids.tolist()))
    if name == "mistral":  # every layer a window of 4: after the prefill, each keeps the last 3 tokens
        assert trace.notes == () and trace.decoder.num_layers == 2 and (trace.decoder.tokens == 3).all()
    elif name == "falcon_h1":
        assert trace.decoder.num_layers == 2 and trace.notes == (
            "Layers 0, 1 also carry a linear-attention or state-space state, fixed in size, besides keys and values: "
            "it is not counted here.",
        )
    else:
        assert trace.decoder.num_layers == 1 and trace.notes == (
            "Layer 0 of 2 keeps no keys and values: linear-attention or state-space layers carry a fixed-size state "
            "instead, which does not grow with the text. The sizes, shapes and counts here are the KV cache of the "
            "other 1.",
        )


def test_logits_that_the_model_itself_computes_otherwise_without_its_cache_are_shown_and_said(tmp_path, monkeypatch):
    """transformers' ProphetNet gathers its n-gram stream's relative-position terms in another order over a whole
    prefix than for one cached step: its own logits with and without its cache differ by more than rounding. The
    trace shows the differences plain transformers gives, and a note says they are the model's."""
    from tests.families import build_family, model_class

    monkeypatch.setattr("explorer.models.kv_cache.REPEATS", 1)  # times are not checked here
    folder = build_family("prophetnet", tmp_path / "prophetnet")
    model = model_class("prophetnet").from_pretrained(folder).to(DEVICE).eval()
    lm = explorer.load_model(folder, device=DEVICE)
    trace = explorer.kv_cache(lm, FAMILY_PROMPT, steps=2)
    chosen = trace.chosen_ids.tolist()
    start = torch.tensor([[model.config.decoder_start_token_id]], device=DEVICE)
    prompt_ids = lm.tokenizer(FAMILY_PROMPT, return_tensors="pt")["input_ids"].to(DEVICE)
    own, cache = [], None
    with torch.inference_mode():
        encoder = model.get_encoder()(input_ids=prompt_ids)
        for index in range(len(chosen)):
            fed = start if index == 0 else torch.tensor([[chosen[index - 1]]], device=DEVICE)
            out = model(encoder_outputs=encoder, decoder_input_ids=fed, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            prefix = torch.cat([start, torch.tensor([chosen[:index]], dtype=torch.long, device=DEVICE)], dim=1)
            whole = model(encoder_outputs=encoder, decoder_input_ids=prefix, use_cache=False).logits[0, -1]
            own.append(float((out.logits[0, -1] - whole).abs().max()))
    np.testing.assert_allclose(trace.logit_difference, own, atol=1e-6)
    largest = trace.logit_difference.max()
    assert max(own) > trace.tolerance  # the model's own: more than rounding
    assert trace.notes == (
        f"The logits with the cache and without it differ by up to {largest:.1e}, more than rounding (0.0001 for "
        "float32): both runs are this model's own forward passes over the same tokens, so the model itself computes "
        "a step from its cache otherwise than from the whole prefix. The tokens here are chosen with the cache, as "
        "generate() chooses them.",
    )


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("mamba", "keeps no keys and values"),
        ("rwkv", "has no attention layers, so it keeps no keys and values"),  # its cache: a list of states
        ("xlstm", "has no attention layers, so it keeps no keys and values"),
        ("openai-gpt", "keeps no KV cache"),
    ],
)
def test_a_model_that_keeps_no_keys_says_it_has_no_kv_cache(tmp_path, name, says):
    from tests.families import build_family

    lm = explorer.load_model(build_family(name, tmp_path / name), device=DEVICE)
    with pytest.raises(explorer.NotApplicable, match=says):
        explorer.kv_cache(lm, FAMILY_PROMPT, steps=2)


def check_scores(trace, with_cache: list[int], without: list[int]) -> None:
    """The counts equal the reference's, and the sentence beside them says their totals and ratios."""
    counted = attention_scores(trace)
    np.testing.assert_array_equal(counted[0], with_cache)
    np.testing.assert_array_equal(counted[1], without)
    assert counted[0][0] == counted[1][0] and (counted[0][1:] < counted[1][1:]).all()  # the prefill: the same pass
    said = PassWork.for_result(trace).caption(trace)
    total = (sum(with_cache), sum(without))
    assert f"compute {total[1]:,} attention scores instead of {total[0]:,} ({total[1] / total[0]:.1f}×)" in said
    reads = (int(trace.cached_reads.sum()), int(trace.uncached_reads.sum()))
    assert f"run {reads[1]:,} positions through the decoder instead of {reads[0]:,}" in said
    assert f"The prefill is the same pass both ways ({with_cache[0]:,} scores)" in said


def with_times(trace, cached_ms, uncached_ms):
    """The trace with every pass of each timed run taking the given milliseconds (a run's total: × passes)."""
    passes = trace.steps + 1
    cached = np.repeat(np.array(cached_ms, dtype=float)[:, None] / 1000 / passes, passes, axis=1)
    uncached = np.repeat(np.array(uncached_ms, dtype=float)[:, None] / 1000 / passes, passes, axis=1)
    return dataclasses.replace(trace, cached_times=cached, uncached_times=uncached)


def test_a_speed_up_is_said_only_when_every_run_without_the_cache_took_longer(tiny_models):
    trace = explorer.kv_cache(loaded("gpt2", tiny_models), TEXT, steps=3)
    faster = with_times(trace, [10, 11, 12, 10, 13], [20, 22, 25, 40, 31])
    assert measured_order(faster) == 1 and speedup(faster) == pytest.approx(25 / 11)
    said = PassTimes.for_result(faster).caption(faster)
    assert "11.0 ms with the cache and 25.0 ms without (medians), 2.3× the time without it" in said
    overlapping = with_times(trace, [10, 11, 12, 10, 30], [20, 22, 25, 40, 29])  # a run with the cache: slow
    said = PassTimes.for_result(overlapping).caption(overlapping)
    assert measured_order(overlapping) == 0 and "×" not in said
    assert "the runs overlap (runs 10.0–30.0 ms with, 20.0–40.0 ms without), so these times show no speed-up" in said
    slower = with_times(trace, [50, 60, 55, 52, 51], [20, 22, 25, 40, 31])
    said = PassTimes.for_result(slower).caption(slower)
    assert measured_order(slower) == -1 and "×" not in said and "every run with the cache took longer here" in said
    # The figure draws what the sentence reads: each pass's median over the runs, bars to the fastest and slowest.
    drawn = PassTimes.for_result(faster).figure(faster)()
    np.testing.assert_allclose(drawn.data[0].y, 1000 * np.median(faster.cached_times, axis=0))
    np.testing.assert_allclose(drawn.data[1].error_y.array + drawn.data[1].y, 1000 * faster.uncached_times.max(0))
    rows = cost_rows(faster)
    assert [row["total (ms, median of 5 runs)"] for row in rows] == ["11.0", "25.0"]
    assert [row["fastest–slowest run (ms)"] for row in rows] == ["10.0–13.0", "20.0–40.0"]


@pytest.mark.parametrize("name", ["gpt2", "llama", "prose"])
def test_the_bytes_are_layers_keys_and_values_kv_heads_tokens_head_dim_at_the_dtype(tiny_models, name):
    model, _ = reference_decoder(name, tiny_models)
    config = model.config
    trace = explorer.kv_cache(loaded(name, tiny_models), PROSE if name == "prose" else TEXT, steps=STEPS)
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    tokens = len(trace.prefill_tokens) + np.arange(STEPS + 1)
    expected = config.num_hidden_layers * 2 * kv_heads * tokens * head_dim * 4  # float32: 4 bytes a number
    np.testing.assert_array_equal(trace.total_bytes, expected)
    assert trace.decoder.shape() == (config.num_hidden_layers, 2, kv_heads, tokens[-1], head_dim)
    assert trace.bytes_per_token == config.num_hidden_layers * 2 * kv_heads * head_dim * 4
    # 2 for the tiny Llama (4 query heads, 2 KV heads), 1 for the tiny GPT-2, the bundled decoder's from its config
    assert trace.grouping_saving == heads / kv_heads
    np.testing.assert_array_equal(trace.ungrouped_bytes, expected * heads // kv_heads)
    if name != "prose":
        assert (trace.grouping_saving > 1) == (name == "llama")


def test_a_half_precision_cache_takes_half_the_bytes_with_the_half_precision_tolerance(tiny_models):
    single = explorer.kv_cache(loaded("llama", tiny_models), TEXT, steps=3)
    half = explorer.kv_cache(loaded("llama", tiny_models, dtype="float16"), TEXT, steps=3)
    assert half.dtype == "float16" and half.tolerance == LOGIT_TOLERANCE["float16"]
    np.testing.assert_array_equal(half.total_bytes * 2, single.total_bytes)
    model, _ = reference_decoder("llama", tiny_models, torch.float16)
    prompt_ids = loaded("llama", tiny_models).tokenizer(TEXT, return_tensors="pt")["input_ids"].to(DEVICE)
    for index, (cached, whole, nbytes) in enumerate(reference_passes(model, prompt_ids, half.chosen_ids.tolist())):
        assert float((cached - whole).abs().max()) <= half.tolerance
        assert half.logit_difference[index] <= half.tolerance and half.total_bytes[index] == nbytes


def test_an_encoder_decoder_shows_the_decoders_cache_and_the_cross_attention_cache(tiny_models):
    model = eager_reference("t5", tiny_models["t5"])
    lm = loaded("t5", tiny_models)
    trace = explorer.kv_cache(lm, TEXT, steps=STEPS)
    config = model.config
    encoded = lm.tokenizer(TEXT, return_tensors="pt")["input_ids"].to(DEVICE)
    assert [stack.stack for stack in trace.stacks] == ["decoder", "cross"]
    assert trace.encoder_tokens == encoded.shape[1] and len(trace.prefill_tokens) == 1  # the decoder start token
    decoder, cross = trace.stacks
    per_token = config.num_decoder_layers * 2 * config.num_heads * config.d_kv * 4
    np.testing.assert_array_equal(decoder.total_bytes, per_token * (1 + np.arange(STEPS + 1)))
    np.testing.assert_array_equal(cross.total_bytes, per_token * encoded.shape[1])  # filled once, never grown
    # The reference: the encoder once, then the decoder fed one token at a time with a cache the test made, and
    # the whole decoder prefix without one, as generate() does with use_cache True and False.
    start = torch.tensor([[config.decoder_start_token_id]], device=DEVICE)
    chosen = trace.chosen_ids.tolist()
    cache = EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))
    with torch.inference_mode():
        encoder = model.get_encoder()(input_ids=encoded)
        for index in range(STEPS + 1):
            fed = start if index == 0 else torch.tensor([[chosen[index - 1]]], device=DEVICE)
            out = model(encoder_outputs=encoder, decoder_input_ids=fed, past_key_values=cache, use_cache=True)
            prefix = torch.cat([start, torch.tensor([chosen[:index]], dtype=torch.long, device=DEVICE)], dim=1)
            whole = model(encoder_outputs=encoder, decoder_input_ids=prefix, use_cache=False).logits[0, -1]
            cached = out.logits[0, -1]
            assert float((cached - whole).abs().max()) <= trace.tolerance
            assert trace.chosen_ids[index] == int(cached.argmax())
            assert trace.logit_difference[index] <= trace.tolerance
            assert trace.total_bytes[index] == cache_bytes(cache)
    check_scores(trace, *reference_scores(model, start, chosen, encoded))


def test_the_first_steps_of_a_longer_measurement_are_the_shorter_measurement(tiny_models):
    lm = loaded("llama", tiny_models)
    long, short = explorer.kv_cache(lm, TEXT, steps=8), explorer.kv_cache(lm, TEXT, steps=3)
    cut = long.first(3)
    assert cut.steps == 3 and cut.chosen_tokens == short.chosen_tokens
    for name in ("chosen_ids", "cached_reads", "uncached_reads", "total_bytes", "ungrouped_bytes"):
        np.testing.assert_array_equal(getattr(cut, name), getattr(short, name))
    np.testing.assert_array_equal(cut.decoder.tokens, short.decoder.tokens)


@pytest.mark.parametrize(
    ("prompt", "steps", "says"),
    [
        ("", 4, "Type a prompt"),
        ("   ", 4, "Type a prompt"),
        (TEXT, 0, "steps must be a whole number from 1 to 64"),
        (TEXT, 65, "steps must be a whole number"),
        (TEXT, True, "steps must be a whole number"),
        (TEXT, "3", "steps must be a whole number"),
        (TEXT, 2.5, "steps must be a whole number"),
    ],
)
def test_bad_settings_raise_input_error(tiny_models, prompt, steps, says):
    with pytest.raises(explorer.InputError, match=says):
        explorer.kv_cache(loaded("gpt2", tiny_models), prompt, steps=steps)


def test_an_encoder_keeps_no_cache_and_says_so(tiny_models):
    lm = explorer.load_model(tiny_models["bert"], device=DEVICE)
    with pytest.raises(explorer.NotApplicable, match=r"encoder.*keeps no KV cache"):
        explorer.kv_cache(lm, TEXT, steps=2)


def test_one_measurement_serves_every_steps_value_through_the_gateway(monkeypatch, tiny_models):
    """The page's views to 1 … 32 steps read one gateway job (keyed on the model, the prompt and the maximum)."""
    calls = []
    real = explorer.kv_cache
    monkeypatch.setattr(explorer, "kv_cache", lambda *a, **k: calls.append(k["steps"]) or real(*a, **k))
    gateway.results_cache().clear()
    name = tiny_models["gpt2"]
    shown = [CacheSize(name, TEXT, steps, measured=10).result() for steps in (2, 7, 10)]
    shown.append(PassTimes(name, TEXT, 4, measured=10).result())
    assert calls == [10]
    assert [trace.steps for trace in shown] == [2, 7, 10, 4]
    assert gateway.run("kv cache", name, TEXT, 10) is gateway.run("kv cache", name, TEXT, steps=10)
    assert calls == [10]


def test_a_memory_of_hidden_states_is_said_not_to_be_a_kv_cache(tmp_path):
    """XLNet's cache (``mems``) keeps each layer's hidden states, from which every step computes keys and values
    again: not applicable, and said so, rather than an unknown cache class."""
    from explorer.errors import NotApplicable
    from tests import families

    subject = families.subject_for("xlnet", tmp_path)
    with pytest.raises(NotApplicable, match="memory of hidden states, not a KV cache"):
        explorer.kv_cache(subject.lm, families.PROMPT, steps=2)
