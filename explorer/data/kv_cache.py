"""The data contract of the KV cache while decoding: what a decoder keeps from every forward pass so that the next
pass runs only the newest token, what that costs in memory, and what decoding without it costs in time.

Axis names, stated once: ``pass`` runs over the forward passes of a greedy decoding: 0 is the prefill (one pass
over the whole prompt; for an encoder-decoder, the encoder over the prompt and the decoder over its start token),
then 1 … N the one-token steps (each feeds the token the pass before chose and reads the cache); ``layer`` over
the decoder's layers; ``kv`` over (keys, values); ``kv_head`` over the heads the cache stores (fewer than the
attention's query heads with grouped KV heads); ``token`` over the cached positions; ``head_dim`` over one head's
vector; ``run`` over the timed repeats of the whole decoding (times only). A cache after a pass is
``[layer, kv, kv_head, token, head_dim]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.data._display import Displayed
from explorer.data._freeze import freeze_arrays

KV = ("keys", "values")
# The largest |logit with the cache − logit without| that still means "the same logits", for the dtype the model
# ran in: the two runs add the same products in another order (a one-token matrix product against a whole
# prefix's). Measured in float32: 4e-6 on the bundled decoder, 1e-6 on the tiny test models, logits up to 30.
LOGIT_TOLERANCE = {"float32": 1e-4, "float16": 5e-2, "bfloat16": 2e-1}


@dataclass(frozen=True, eq=False)
class CachedStack:
    """One cache of a decoding, as the model's own cache object held it after each pass.

    stack     "decoder" (its self-attention: one more token each pass) or "cross" (an encoder-decoder's
              cross-attention: the encoder's keys and values, computed by the prefill and only read after it)
    kv_heads  [layer] int: the heads the cache keeps (the model's num_key_value_heads)
    head_dim  [layer] int
    tokens    [pass, layer] int: positions held after each pass
    nbytes    [pass, layer, kv] int: bytes of the keys and values after each pass (``numel() * element_size()`` of
              the cache's own tensors, at the model's dtype)
    """

    stack: str
    kv_heads: np.ndarray
    head_dim: np.ndarray
    tokens: np.ndarray
    nbytes: np.ndarray

    def __post_init__(self):
        freeze_arrays(self)

    @property
    def num_layers(self) -> int:
        return self.tokens.shape[1]

    @property
    def total_bytes(self) -> np.ndarray:
        """[pass] int: the whole cache's bytes after each pass."""
        return self.nbytes.sum(axis=(1, 2))

    def shape(self, index: int = -1) -> tuple[int | str, ...]:
        """[layer, kv, kv_head, token, head_dim] after pass ``index``; an axis that differs between layers (a
        sliding window's layers hold fewer tokens) is written as its range, "4–7"."""

        def size(values) -> int | str:
            low, high = int(np.min(values)), int(np.max(values))
            return low if low == high else f"{low}–{high}"

        return (self.num_layers, len(KV), size(self.kv_heads), size(self.tokens[index]), size(self.head_dim))


@dataclass(frozen=True, eq=False)
class KVCacheTrace(Displayed):
    """A greedy decoding of ``prompt`` run twice: with the model's KV cache (a prefill, then one-token steps), and
    without it (every pass runs the whole prefix again), with the same tokens fed to both.

    model_name        the model, as loaded
    prompt            the text decoded from
    dtype             the dtype the model and its cache ran in ("float32", ...)
    num_heads         the attention's query heads (num_attention_heads): what the cache would keep per layer
                      without grouped KV heads
    stacks            the caches (``CachedStack``): the decoder's self-attention, then an encoder-decoder's
                      cross-attention
    prefill_tokens    labels of what the prefill ran through the decoder (the prompt; a seq2seq start token)
    encoder_tokens    positions the encoder read (0 for a decoder-only model)
    chosen_ids        [pass] int: the token each pass chose (the argmax of its logits with the cache)
    chosen_tokens     their labels
    cached_reads      [pass] int: decoder positions each pass with the cache runs through the model
    uncached_reads    [pass] int: the same without the cache (the whole prefix: prompt + pass)
    cached_times      [run, pass] float: wall time of each pass with the cache in each timed run (measured on
                      the model's device, the runs interleaved with those without the cache, after a warm-up)
    uncached_times    [run, pass] float: without it
    logit_difference  [pass] float: max |logits with the cache − logits without| over the vocabulary
    truncated         prompt tokens left out so that prompt + steps fit the model
    notes             sentences a reader needs (layers whose cache holds no keys and values, ...)
    """

    model_name: str
    prompt: str
    dtype: str
    num_heads: int
    stacks: tuple[CachedStack, ...]
    prefill_tokens: tuple[str, ...]
    encoder_tokens: int
    chosen_ids: np.ndarray
    chosen_tokens: tuple[str, ...]
    cached_reads: np.ndarray
    uncached_reads: np.ndarray
    cached_times: np.ndarray
    uncached_times: np.ndarray
    logit_difference: np.ndarray
    truncated: int = 0
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        freeze_arrays(self)

    @property
    def steps(self) -> int:
        """N: the one-token steps after the prefill."""
        return len(self.chosen_ids) - 1

    @property
    def cached_seconds(self) -> np.ndarray:
        """[pass] float: each pass's median time with the cache over the timed runs."""
        return np.median(self.cached_times, axis=0)

    @property
    def uncached_seconds(self) -> np.ndarray:
        """[pass] float: each pass's median time without the cache."""
        return np.median(self.uncached_times, axis=0)

    @property
    def tolerance(self) -> float:
        return LOGIT_TOLERANCE[self.dtype]

    @property
    def decoder(self) -> CachedStack:
        return self.stacks[0]

    @property
    def total_bytes(self) -> np.ndarray:
        """[pass] int: every cache's bytes after each pass."""
        return sum(stack.total_bytes for stack in self.stacks)

    @property
    def ungrouped_bytes(self) -> np.ndarray:
        """[pass] int: what the caches would take with a key and a value per query head (num_attention_heads)."""
        return sum((stack.nbytes.sum(axis=2) * self.num_heads // stack.kv_heads).sum(axis=1) for stack in self.stacks)

    @property
    def grouping_saving(self) -> float:
        """How many times smaller grouped KV heads make the cache (1 without grouping)."""
        return float(self.ungrouped_bytes[-1] / self.total_bytes[-1])

    @property
    def bytes_per_token(self) -> float:
        """What one more decoder token adds to the cache (every layer's keys and values)."""
        decoder = self.decoder
        return float(decoder.total_bytes[-1] / decoder.tokens[-1].sum() * decoder.num_layers)

    def first(self, steps: int) -> KVCacheTrace:
        """The prefill and the first ``steps`` steps: what the same decoding to ``steps`` records (each pass reads
        only the tokens before it), with the times measured here."""
        keep = slice(0, steps + 1)
        stacks = tuple(
            CachedStack(s.stack, s.kv_heads, s.head_dim, s.tokens[keep].copy(), s.nbytes[keep].copy())
            for s in self.stacks
        )
        arrays = {
            name: getattr(self, name)[keep].copy()
            for name in (
                "chosen_ids",
                "cached_reads",
                "uncached_reads",
                "logit_difference",
            )
        }
        times = {name: getattr(self, name)[:, keep].copy() for name in ("cached_times", "uncached_times")}
        return KVCacheTrace(
            model_name=self.model_name,
            prompt=self.prompt,
            dtype=self.dtype,
            num_heads=self.num_heads,
            stacks=stacks,
            prefill_tokens=self.prefill_tokens,
            encoder_tokens=self.encoder_tokens,
            chosen_tokens=self.chosen_tokens[keep],
            truncated=self.truncated,
            notes=self.notes,
            **arrays,
            **times,
        )
