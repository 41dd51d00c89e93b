"""The data contract: what a capture returns, as frozen dataclasses of CPU NumPy arrays.

Axis names, stated once and used in every shape below and elsewhere in the package:

- ``layer``: attention layers of one stack, first to last.
- ``head``: query heads. With grouped-query attention several query heads share one key/value head;
  ``kv_head_of_query[head]`` says which.
- ``query``: positions that attend (rows of an attention map).
- ``key``: positions attended to (columns). Equal to ``query`` for self-attention; the encoder's
  positions for cross-attention.
- ``head_dim``: the width of one head's query, key and value vectors.
- ``token``: positions of the input (``hidden_states``); ``hidden``: the model's width (d_model).

Every float array is float32 on the CPU, whatever device or dtype the model ran in; ``device`` and ``dtype``
say which they were (``verify()`` recomputes on that device, and is judged by that dtype's ``tolerance``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from explorer.data._display import Displayed
from explorer.data._freeze import freeze_arrays

STACK_ENCODER = "encoder"
STACK_DECODER = "decoder"
STACK_CROSS = "cross"
# Each stack in words, as pages and figure titles name it.
STACK_LABELS = {
    STACK_ENCODER: "Encoder self-attention",
    STACK_DECODER: "Decoder self-attention",
    STACK_CROSS: "Cross-attention",
}


# What a capture of a model whose attention bypasses transformers' AttentionInterface says (its ``notes``; the
# pages show it): its weights are exact, and nothing else about its attention is known.
WEIGHTS_ONLY_REASON = (
    "its attention is computed in its own code, not through transformers' AttentionInterface, so only the "
    "weights it returns (output_attentions) can be read"
)
WEIGHTS_ONLY_NOTE = (
    "Weights as the model returns them; queries and keys are not available for this architecture "
    f"({WEIGHTS_ONLY_REASON}). The mask shown is the causal structure alone: a window the model applies in its "
    "own code shows as weights of exactly 0."
)


@dataclass(frozen=True, eq=False)
class AttentionStack:
    """One stack of attention layers (an encoder, a decoder, or the decoder's cross-attention).

    attentions  [layer, head, query, key]   the model's own softmax weights
    queries     [layer, head, query, head_dim]  exactly the vectors the scores were computed from:
                after rotary embeddings and q/k norms; None where the model's attention does not run through
                transformers' AttentionInterface (``weights_only``: the weights are its own output_attentions)
    keys        [layer, head, key, head_dim]    likewise (None with the queries); with grouped KV heads each
                query head is paired with the key head it shares
    values      [layer, head, key, head_dim] or None: the value vectors each query head read (shared
                like the keys), exactly as passed to the model's attention function
    scale       [layer]   multiplies q . k (1/sqrt(head_dim) for most models, 1.0 for T5); None with the queries
    position_bias  [layer, head, query, key] or None: added to the scores (T5's relative bias)
    mask        [query, key] bool: positions a query may attend to (causal, padding, window)
    layer_mask  [layer, query, key] bool or None: only when layers differ (sliding windows)
    softcap     [layer] or None: scores pass through softcap * tanh(score / softcap) (Gemma 2)
    sinks       [layer, head, query] or None: attention sinks (GPT-OSS): one more logit in each row's softmax,
                whose weight is dropped, so rows sum to less than 1; -inf in a layer without sinks
    kv_head_of_query [head] int: the key/value head each query head reads (the first layer's, where layers differ)
    layer_kv_head_of_query [layer, head] int or None: only when layers group their heads differently (MiMo-V2-Flash's
                sliding layers have twice the KV heads); ``kv_head_of(layer)`` reads either
    head_dims   [layer] int or None: only when layers' queries and keys differ in width (Gemma 4: 512 in global
                layers, 256 in sliding ones): each layer's own; the arrays are zero-padded to the widest, and zeros
                add nothing to q . k. ``value_dims`` likewise for the values. ``head_vectors(layer, head)`` cuts them
    device, dtype  where and in what precision the model ran ("cuda:0", "bfloat16"): ``verify()`` runs there
    layer_numbers [layer] int or None: the model's own number of each layer, only where some of its layers are left
                out (Funnel's pooled layers): ``layer_number(layer)`` reads either, for every label shown
    """

    query_tokens: tuple[str, ...]
    key_tokens: tuple[str, ...]
    attentions: np.ndarray
    queries: np.ndarray | None
    keys: np.ndarray | None
    scale: np.ndarray | None
    position_bias: np.ndarray | None
    mask: np.ndarray
    kv_head_of_query: np.ndarray
    layer_mask: np.ndarray | None = None
    softcap: np.ndarray | None = None
    values: np.ndarray | None = None
    device: str = "cpu"
    dtype: str = "float32"
    sinks: np.ndarray | None = None
    layer_kv_head_of_query: np.ndarray | None = None
    head_dims: np.ndarray | None = None
    value_dims: np.ndarray | None = None
    layer_numbers: np.ndarray | None = None

    def __post_init__(self):
        freeze_arrays(self)

    def layer_number(self, layer: int) -> int:
        """The model's own number of the stack's ``layer``-th layer (the same, unless layers are left out)."""
        return layer if self.layer_numbers is None else int(self.layer_numbers[layer])

    @property
    def tolerance(self) -> float:
        """The largest ``verify()`` that still means "the model's own weights", for the dtype it ran in."""
        return TOLERANCE[self.dtype]

    @property
    def num_layers(self) -> int:
        return self.attentions.shape[0]

    @property
    def weights_only(self) -> bool:
        """True where only the weights are known (the model's own output_attentions): no queries or keys to
        recompute them from, to draw scores with, or to show step by step."""
        return self.queries is None or self.keys is None

    @property
    def num_heads(self) -> int:
        return self.attentions.shape[1]

    @property
    def is_causal(self) -> bool:
        """True when no query sees a later key (the upper triangle of the mask is empty)."""
        square = self.mask.shape[0] == self.mask.shape[1]
        return square and not np.triu(self.mask, k=1).any()

    def masks_by_layer(self) -> np.ndarray:
        """[layer, query, key] bool, whether or not layers differ."""
        if self.layer_mask is not None:
            return self.layer_mask
        return np.broadcast_to(self.mask, (self.num_layers, *self.mask.shape))

    def kv_head_of(self, layer: int) -> np.ndarray:
        """[head] int: the key/value head each query head reads in ``layer``."""
        return self.kv_head_of_query if self.layer_kv_head_of_query is None else self.layer_kv_head_of_query[layer]

    def head_dim(self, layer: int) -> int:
        """The width of ``layer``'s queries and keys (narrower than the arrays where layers differ)."""
        return self.queries.shape[-1] if self.head_dims is None else int(self.head_dims[layer])

    def head_vectors(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(queries [query, head_dim], keys [key, head_dim], values [key, value width] or None) of one head, at
        its layer's own widths: views of the arrays without the padding of layers narrower than the widest."""
        width = self.head_dim(layer)
        values = None if self.values is None else self.values[layer, head]
        if values is not None and self.value_dims is not None:
            values = values[:, : int(self.value_dims[layer])]
        return self.queries[layer, head, :, :width], self.keys[layer, head, :, :width], values

    def verify(self, device: str | None = None) -> float:
        """Largest |recomputed - captured| over this stack's weights, recomputed on ``device`` (by default the
        one the model ran on; see ``AttentionCapture.verify``). NaN for a ``weights_only`` stack: nothing to
        recompute from, so nothing is claimed (NaN <= tolerance is False)."""
        if self.weights_only:
            return float("nan")
        # The recomputation is torch code (explorer.models.verification), imported when asked: the data
        # contract sits below the layers that compute, and stays importable without torch.
        from explorer.models.verification import max_recompute_error

        return max_recompute_error(self, device or self.device)


# verify()'s bound by the dtype the model ran in. float32: the model's own rounding, ~1e-7 on the tiny test
# models and ~1e-6 on the bundled ones; 1e-4 leaves room for long inputs. Half precision rounds every score to 11
# (float16) or 8 (bfloat16) significant bits before the softmax, so a weight moves by about 2^-11 or 2^-8 times
# the score's size, and scores reach the hundreds (T5 does not scale them): measured on the bundled models up to
# 4.0e-2 (float16, the T5's decoder, scores to 150) and 7.6e-2 (bfloat16, MiniLM at 256 tokens, scores to 70).
# Vectors that did not produce the weights are off by far more (0.86 to 1 on the same models: keys reversed, or
# another layer's vectors).
TOLERANCE = {"float32": 1e-4, "float16": 5e-2, "bfloat16": 1e-1}


@dataclass(frozen=True, eq=False)
class AttentionCapture(Displayed):
    """Everything one forward pass showed about attention.

    tokens           display labels of the input (encoder input, or the decoder-only model's text)
    token_ids        [query] int
    segment_b_start  index of the first token of ``text_pair``, or None
    stacks           {"encoder" | "decoder" | "cross": AttentionStack}
    truncated        how many input tokens were cut to fit the model (0 when none)
    hidden_states    [layer + 1, token, hidden] or None: the residual stream of the main stack after the
                     embeddings and after each layer, as the model's own ``output_hidden_states`` gives it
                     (for GPT-2-style models the last entry has the final layer norm applied)
    ablated          the heads whose outputs were zeroed, ((stack, layer, head), ...); () when none
    device, dtype    where and in what precision the model ran ("cuda:0", "bfloat16"): ``verify()`` runs there
    """

    model_name: str
    tokens: tuple[str, ...]
    token_ids: np.ndarray
    segment_b_start: int | None
    stacks: dict[str, AttentionStack]
    truncated: int = 0
    target_tokens: tuple[str, ...] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    hidden_states: np.ndarray | None = None
    ablated: tuple[tuple[str, int, int], ...] = ()
    device: str = "cpu"
    dtype: str = "float32"

    def __post_init__(self):
        freeze_arrays(self)

    @property
    def main(self) -> AttentionStack:
        """The main self-attention stack: the encoder's, or the decoder's for decoder-only models."""
        if STACK_ENCODER in self.stacks:
            return self.stacks[STACK_ENCODER]
        return self.stacks[STACK_DECODER]

    @property
    def attentions(self) -> np.ndarray:
        return self.main.attentions

    @property
    def queries(self) -> np.ndarray:
        return self.main.queries

    @property
    def keys(self) -> np.ndarray:
        return self.main.keys

    @property
    def values(self) -> np.ndarray | None:
        return self.main.values

    def verify(self) -> float:
        """Largest absolute difference, over all stacks, between the captured weights and
        softmax(scale * q . k + position_bias, masked) recomputed from the captured vectors, on the device
        the model ran on (in float64 there; see ``explorer.models.verification``). Compare it with
        ``tolerance``. NaN when a stack is ``weights_only`` (see ``AttentionStack.verify``)."""
        errors = [stack.verify() for stack in self.stacks.values()]
        return float("nan") if any(np.isnan(errors)) else max(errors)

    @property
    def weights_only(self) -> bool:
        """True where the model's attention does not run through transformers' AttentionInterface: the weights
        are exactly the model's own output_attentions, and there are no queries, keys or values (``notes``
        says so)."""
        return any(stack.weights_only for stack in self.stacks.values())

    @property
    def tolerance(self) -> float:
        """The largest ``verify()`` that still means "the model's own weights", for the dtype it ran in: float32
        rounding gives ~1e-7; half precision rounds the scores themselves before the softmax."""
        return TOLERANCE[self.dtype]
