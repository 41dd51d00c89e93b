"""``kv_cache``: what the model's own KV cache holds while greedy search decodes, and what decoding costs without it.

How it works: greedy search runs twice over the same tokens. With the cache, as ``generate()`` does: a prefill
(one pass over the prompt) returns the model's cache object, and each step feeds only the token the pass before
chose, with that cache; after every pass the cache's own tensors are read (their shapes, and
``numel() * element_size()`` for the bytes at the model's dtype). Without it, every pass runs the whole prefix
again, as ``generate(use_cache=False)`` does, fed the tokens the cached run chose, so that the two runs' logits
can be compared pass by pass (they must be equal up to rounding: the cache stores exactly the keys and values the
longer pass recomputes). Every pass is timed on the model's device (synchronised on an accelerator): after one
untimed run of each decoding (the warm-up: a first pass allocates and picks kernels), ``REPEATS`` runs of each,
interleaved so that a shared machine's passing load falls on both alike; the pages show each pass's median. The
prefill is the same pass both ways and is timed the same way both ways.

Which caches a cache object holds depends on its class (a table): a decoder's ``DynamicCache`` has one per layer,
an encoder-decoder's ``EncoderDecoderCache`` the decoder's self-attention cache and the cross-attention cache
(the encoder's keys and values, computed once by the prefill). Encoders have no cache, nor have models that keep
none (OpenAI-GPT) or only fixed-size states (Mamba): ``NotApplicable``. A hybrid model's linear-attention or
state-space layers keep a fixed-size state instead of keys and values: layers without keys are left out of the
stacks and named in the trace's notes, as is a state kept beside keys (not counted).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable

import numpy as np
import torch
from transformers.cache_utils import LinearAttentionCacheLayerMixin

from explorer.checks import given_text
from explorer.data import STACK_CROSS, STACK_DECODER
from explorer.data.kv_cache import KV, LOGIT_TOLERANCE, CachedStack, KVCacheTrace
from explorer.errors import InputError, NotApplicable
from explorer.models import recorder
from explorer.models.architectures import KIND_DECODER, KIND_ENCODER_DECODER
from explorer.models.decoding import MAX_NEW_TOKENS, cache_name, counts_tokens, special_token_ids
from explorer.models.tokens import token_labels

# Where a cache object keeps each stack's layers, by the cache's class: (stack, attribute holding a cache whose
# ``layers`` have ``keys`` and ``values`` [batch, kv_head, token, head_dim]; "" for the object itself).
CACHE_STACKS = {
    "DynamicCache": ((STACK_DECODER, ""),),
    "EncoderDecoderCache": ((STACK_DECODER, "self_attention_cache"), (STACK_CROSS, "cross_attention_cache")),
}
REPEATS = 3  # timed runs of each decoding, with and without the cache, after the warm-up (a median of 3)
# Waiting for an accelerator's queued work, by device type, so that a pass's time is the pass's own.
SYNCHRONIZE: dict[str, Callable[[], None]] = {"cuda": torch.cuda.synchronize, "mps": lambda: torch.mps.synchronize()}


def kv_cache(lm, prompt: str, *, steps: int = 8) -> KVCacheTrace:
    """Greedy search from ``prompt``: a prefill, then ``steps`` one-token steps with the model's KV cache, and the
    same passes without it (see the module's docstring), each timed in ``REPEATS`` runs after a warm-up.
    ``NotApplicable`` for a model that keeps no keys and values (an encoder, Mamba); ``InputError`` for an empty
    prompt or ``steps`` outside 1 … ``MAX_NEW_TOKENS``."""
    _check(lm, prompt, steps)
    passes = PASSES[lm.kind](lm, prompt, steps)
    with torch.inference_mode():
        # The first run of each is the warm-up: its logits, choices and caches are read, its times dropped.
        cached = _cached_run(passes, steps)
        uncached = _uncached_run(passes, cached["chosen"])
        # Interleaved, with then without: a load that comes and goes falls on both decodings alike.
        times = [
            (_cached_run(passes, steps)["seconds"], _uncached_run(passes, cached["chosen"])["seconds"])
            for _ in range(REPEATS)
        ]
    chosen = np.array(cached["chosen"], dtype=np.int64)
    prefill = passes.prefill_ids[0].tolist()
    dtype = str(next(lm.model.parameters()).dtype).removeprefix("torch.")
    difference = np.array(
        [float((a - b).abs().max()) for a, b in zip(cached["logits"], uncached["logits"], strict=True)]
    )
    return KVCacheTrace(
        model_name=lm.name,
        prompt=prompt,
        dtype=dtype,
        num_heads=lm.num_heads,
        stacks=_stacks(cached["caches"]),
        prefill_tokens=token_labels(lm.tokenizer, prefill),
        encoder_tokens=passes.encoder_tokens,
        chosen_ids=chosen,
        chosen_tokens=token_labels(lm.tokenizer, chosen.tolist()),
        cached_reads=np.array([len(prefill)] + [1] * steps, dtype=np.int64),
        uncached_reads=np.arange(steps + 1, dtype=np.int64) + len(prefill),
        cached_times=np.array([with_cache for with_cache, _ in times]),
        uncached_times=np.array([without for _, without in times]),
        logit_difference=difference,
        truncated=passes.truncated,
        notes=(*cached["notes"], *_unequal(difference, dtype)),
    )


def _unequal(difference: np.ndarray, dtype: str) -> tuple[str, ...]:
    """A note where the logits with and without the cache differ by more than rounding. Both runs are the model's own
    forward passes over the same tokens, so the difference is the model's: transformers' ProphetNet, for one, gathers
    its n-gram stream's relative-position terms in another order over a whole prefix than for one cached step."""
    largest, tolerance = float(difference.max()), LOGIT_TOLERANCE[dtype]
    if largest <= tolerance:
        return ()
    return (
        f"The logits with the cache and without it differ by up to {largest:.1e}, more than rounding ({tolerance:g} "
        f"for {dtype}): both runs are this model's own forward passes over the same tokens, so the model itself "
        "computes a step from its cache otherwise than from the whole prefix. The tokens here are chosen with the "
        "cache, as generate() chooses them.",
    )


def _check(lm, prompt: str, steps: int) -> None:
    if lm.kind not in PASSES:
        raise NotApplicable(
            f"{lm.name} is an encoder: it reads the whole text in one pass and generates nothing, so it keeps no KV "
            "cache. Load a decoder (the bundled prose-llama, gpt2, ...) or an encoder-decoder (t5-small)."
        )
    if not recorder.attends(lm):  # RWKV's, xLSTM's caches: states only
        raise NotApplicable(
            f"{lm.name} has no attention layers, so it keeps no keys and values: its cache holds each layer's running "
            "state (a recurrence or a state space), fixed in size, so there is no KV cache to show."
        )
    if lm.kind == KIND_DECODER and not counts_tokens(lm.model, cache_name(lm.model)):
        raise NotApplicable(
            f"{lm.name}'s layers are all linear-attention or state-space layers: its cache holds a running state, "
            "not keys and values per token, and transformers' generate() cannot decode with it, so there is no KV "
            "cache to show."
        )
    if not given_text(prompt, "prompt").strip():
        raise InputError("Type a prompt to decode from.")
    if not isinstance(steps, int | np.integer) or isinstance(steps, bool) or not 1 <= steps <= MAX_NEW_TOKENS:
        raise InputError(f"steps must be a whole number from 1 to {MAX_NEW_TOKENS} (got {steps!r}).")


def _cached_run(passes, steps: int) -> dict:
    """The prefill and ``steps`` one-token steps with the cache: each pass's logits, choice, time and the caches'
    (shapes, bytes) read right after it."""
    run = {"logits": [], "chosen": [], "seconds": [], "caches": []}
    (logits, cache), seconds = passes.timed(passes.prefill)
    if cache is None:
        raise NotApplicable(
            f"{passes.lm.name} keeps no KV cache: every step of its decoding runs the whole text again (generate() "
            "does the same), so there is no cache to show."
        )
    _refuse_hidden_state_memory(passes, cache)
    for index in range(steps + 1):
        if index:
            (logits, cache), seconds = passes.timed(passes.step, run["chosen"][-1], cache)
        run["logits"].append(logits)
        run["chosen"].append(int(logits.argmax()))
        run["seconds"].append(seconds)
        run["caches"].append(_read(cache))
        if not index:  # before the other passes: a model without keys stops here
            run["notes"] = _state_notes(passes.lm, cache)
    return run


def _refuse_hidden_state_memory(passes, cache) -> None:
    """XLNet's cache (``mems``) is one tensor per layer of the hidden states' width: the layers' inputs kept, from
    which each step computes keys and values again. A memory of hidden states, not a KV cache: said so."""
    width = passes.model.config.get_text_config().hidden_size
    layers = cache if isinstance(cache, tuple | list) else ()
    if layers and all(isinstance(t, torch.Tensor) and t.dim() == 3 and t.shape[-1] == width for t in layers):
        raise NotApplicable(
            f"{passes.lm.name} keeps no keys and values: its cache ({passes.cache_name}) holds each layer's hidden "
            f"states ({len(layers)} tensors of width {width}), and every step computes its keys and values from them "
            "again. That is a memory of hidden states, not a KV cache, so there is no KV cache to show."
        )


def _uncached_run(passes, chosen: list[int]) -> dict:
    """Every pass again without the cache: the prefix so far (the prefill's input and the tokens chosen before)."""
    run = {"logits": [], "seconds": []}
    for index in range(len(chosen)):
        logits, seconds = passes.timed(passes.whole, chosen[:index])
        run["logits"].append(logits)
        run["seconds"].append(seconds)
    return run


def _read(cache) -> dict[str, list[tuple[tuple[int, ...], tuple[int, int]] | None]]:
    """{stack: per layer ((batch, kv_head, token, head_dim), (bytes of the keys, of the values))}, from the cache's
    own tensors; None for a layer whose cache holds no keys (a linear-attention or state-space layer's state)."""
    stacks = CACHE_STACKS.get(type(cache).__name__)
    if stacks is None:
        raise InputError(f"The explorer does not know how to read a {type(cache).__name__} (see CACHE_STACKS).")
    read = {}
    for stack, attribute in stacks:
        part = getattr(cache, attribute) if attribute else cache
        read[stack] = [
            (tuple(layer.keys.shape), tuple(_nbytes(getattr(layer, name)) for name in KV))
            if _holds_keys(layer)
            else None
            for layer in part.layers
        ]
    return read


def _holds_keys(layer) -> bool:
    return isinstance(getattr(layer, "keys", None), torch.Tensor)


def _state_notes(lm, cache) -> tuple[str, ...]:
    """Notes on the decoder's layers whose cache holds a linear-attention or state-space state (fixed in size, not
    keys and values): those without keys are left out of the stacks, the others' state is not counted.
    ``NotApplicable`` when no layer holds keys."""
    part = dict(CACHE_STACKS[type(cache).__name__])[STACK_DECODER]
    # A slot no layer wrote is none of the decoder's layers (ProphetNet's cache has as many as its encoder's layers).
    every = (getattr(cache, part) if part else cache).layers
    layers = [(index, layer) for index, layer in enumerate(every) if getattr(layer, "is_initialized", True)]
    keyless = [str(index) for index, layer in layers if not _holds_keys(layer)]
    stateful = [str(index) for index, layer in layers if _holds_state(layer) and _holds_keys(layer)]
    if len(keyless) == len(layers):
        raise NotApplicable(
            f"{lm.name} keeps no keys and values: each of its layers carries a fixed-size state (a linear-attention "
            "or state-space layer) instead of a KV cache, so there is no KV cache to show."
        )
    notes = []
    if keyless:
        notes.append(
            f"{_layers(keyless)} of {len(layers)} {_verb('keep', keyless)} no keys and values: linear-attention or "
            "state-space layers carry a fixed-size state instead, which does not grow with the text. The sizes, "
            f"shapes and counts here are the KV cache of the other {len(layers) - len(keyless)}."
        )
    if stateful:
        notes.append(
            f"{_layers(stateful)} also {_verb('carry', stateful)} a linear-attention or state-space state, fixed in "
            "size, besides keys and values: it is not counted here."
        )
    return tuple(notes)


def _layers(indices: list[str]) -> str:
    return f"Layer{'s' if len(indices) > 1 else ''} {', '.join(indices)}"


def _verb(verb: str, subjects: list) -> str:
    """``verb`` agreeing with one subject or several: "keeps" / "keep", "carries" / "carry"."""
    if len(subjects) > 1:
        return verb
    return verb[:-1] + "ies" if verb.endswith("y") else verb + "s"


def _holds_state(layer) -> bool:
    return isinstance(layer, LinearAttentionCacheLayerMixin)


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _stacks(caches: list[dict]) -> tuple[CachedStack, ...]:
    """Each stack's arrays over the passes (``caches``: one ``_read`` per pass)."""
    stacks = []
    for stack in caches[0]:
        layers = [[layer for layer in read[stack] if layer is not None] for read in caches]  # the KV layers
        shapes = np.array([[shape for shape, _ in read] for read in layers])  # [pass, layer, 4]
        nbytes = np.array([[sizes for _, sizes in read] for read in layers], dtype=np.int64)
        stacks.append(CachedStack(stack, shapes[-1, :, 1].copy(), shapes[-1, :, 3].copy(), shapes[..., 2], nbytes))
    return tuple(stacks)


class _Passes:
    """A decoder's forward passes: the prefill, a one-token step with the cache, and a whole prefix without."""

    def __init__(self, lm, prompt: str, steps: int):
        self.lm, self.model = lm, lm.model
        self.synchronize = SYNCHRONIZE.get(torch.device(lm.device).type, lambda: None)
        parameters = inspect.signature(self.model.forward).parameters
        keeps = "logits_to_keep" in parameters
        # What the model calls its cache (state-space models: "cache_params", a state that holds no keys).
        self.cache_name = cache_name(self.model)
        # As generate() does: only the last position's logits (the others cost a vocabulary-wide product each).
        self.last_only = {"logits_to_keep": 1} if keeps else {}
        ids = lm.tokenizer(prompt, return_tensors="pt")["input_ids"]
        if ids.shape[1] == 0:
            raise InputError("The prompt produced no tokens for this model.")
        self.prompt_ids, self.truncated = self._fitted(ids, steps)
        self.encoder_tokens = 0

    def _fitted(self, ids: torch.Tensor, steps: int) -> tuple[torch.Tensor, int]:
        """The prompt cut from the left so that it and the ``steps`` tokens fed after it fit the model."""
        room = self.lm.max_tokens - steps
        return ids[:, -room:].to(self.lm.device), max(ids.shape[1] - room, 0)

    @property
    def prefill_ids(self) -> torch.Tensor:
        return self.prompt_ids

    def timed(self, run: Callable, *args):
        """(what ``run(*args)`` returns, its wall time in seconds, the device's queued work included)."""
        self.synchronize()
        start = time.perf_counter()
        result = run(*args)
        self.synchronize()
        return result, time.perf_counter() - start

    def _logits(self, outputs) -> torch.Tensor:
        return outputs.logits[0, -1].float()

    def prefill(self):
        outputs = self.model(input_ids=self.prompt_ids, use_cache=True, **self.last_only)
        return self._logits(outputs), getattr(outputs, self.cache_name, None)

    def step(self, token: int, cache):
        ids = torch.tensor([[token]], device=self.lm.device)
        outputs = self.model(input_ids=ids, use_cache=True, **{self.cache_name: cache}, **self.last_only)
        return self._logits(outputs), getattr(outputs, self.cache_name)

    def whole(self, chosen: list[int]) -> torch.Tensor:
        ids = torch.cat([self.prefill_ids, torch.tensor([chosen], dtype=torch.long, device=self.lm.device)], dim=1)
        return self._logits(self.model(input_ids=ids, use_cache=False, **self.last_only))


class _Seq2SeqPasses(_Passes):
    """An encoder-decoder's: the prefill runs the encoder over the prompt and the decoder over its start token
    (the cross-attention cache is filled then); without the cache, each pass runs the encoder's output through
    the whole decoder prefix again (as ``generate(use_cache=False)`` does, the encoder once per decoding)."""

    def __init__(self, lm, prompt: str, steps: int):
        super().__init__(lm, prompt, steps)
        start = special_token_ids(lm)["decoder_start"]
        if start is None:
            raise InputError(f"{lm.name} names no decoder start token, so it cannot generate.")
        self.start = torch.tensor([[start]], device=lm.device)
        self.encoder_tokens = self.prompt_ids.shape[1]
        self.encoded = self.uncached_encoded = None  # the encoder's output, for each run

    def _fitted(self, ids: torch.Tensor, steps: int) -> tuple[torch.Tensor, int]:
        room = self.lm.max_tokens  # the encoder's input; the decoder's positions are relative (T5) or its own
        return ids[:, :room].to(self.lm.device), max(ids.shape[1] - room, 0)

    @property
    def prefill_ids(self) -> torch.Tensor:
        return self.start

    def _encode(self):
        return self.model.get_encoder()(input_ids=self.prompt_ids, return_dict=True)

    def prefill(self):
        self.encoded = self._encode()
        outputs = self.model(
            encoder_outputs=self.encoded, decoder_input_ids=self.start, use_cache=True, **self.last_only
        )
        return self._logits(outputs), outputs.past_key_values

    def step(self, token: int, cache):
        ids = torch.tensor([[token]], device=self.lm.device)
        outputs = self.model(
            encoder_outputs=self.encoded, decoder_input_ids=ids, past_key_values=cache, use_cache=True, **self.last_only
        )
        return self._logits(outputs), outputs.past_key_values

    def whole(self, chosen: list[int]) -> torch.Tensor:
        if not chosen:  # the first pass: the encoder runs here too, as in the prefill
            self.uncached_encoded = self._encode()
        ids = torch.cat([self.start, torch.tensor([chosen], dtype=torch.long, device=self.lm.device)], dim=1)
        outputs = self.model(encoder_outputs=self.uncached_encoded, decoder_input_ids=ids, use_cache=False)
        return self._logits(outputs)


# The passes of each kind of model that keeps a cache (an encoder keeps none).
PASSES = {KIND_DECODER: _Passes, KIND_ENCODER_DECODER: _Seq2SeqPasses}
