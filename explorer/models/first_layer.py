"""What a stack does between its token ids and its first layer, found in the module graph.

One probe pass of a short input, every module of the stack recorded (``sites.record_calls``), gives:

first layer       the first call of the ``ModuleList`` whose elements run once per layer (the stack's layers)
token projection  a ``Linear`` that reads the embedding table's rows (a factorized embedding: NeoMME's)
norm              the last module called before the first layer whose output is what that layer reads, changed from
                  its input (a norm of the summed rows: NeoMME's ``embedding_norm``)

``first_layer_rows`` reads the first layer's input with a pre-hook on that module, so that it is what the layer
really receives, whatever the model reports as its hidden states (Mamba's start after its first layer).
``explorer.compute.inputs.reconcile`` compares it with the summed rows.
"""

from __future__ import annotations

import threading
import weakref
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
import torch

from explorer.models.architectures import KIND_DECODER, KIND_ENCODER_DECODER
from explorer.models.sites import layer_input, probe_ids, record_calls, same

_entries: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_reading: ContextVar = ContextVar("explorer_first_layer_input", default=None)


@dataclass(frozen=True)
class Entry:
    """The stack's first layer (None where no module list runs once per layer) and the modules (names) found
    between its embedding table and that layer."""

    first_layer: torch.nn.Module | None
    token_projection: str | None = None
    norm: str | None = None


def embedding_stack(lm) -> torch.nn.Module:
    """The module whose embeddings feed the first layer the page shows: an encoder-decoder's encoder, else the
    model."""
    return lm.model.get_encoder() if lm.kind == KIND_ENCODER_DECODER else lm.model


def input_table(lm) -> torch.nn.Module:
    """The stack's token embedding table; the model's where the stack has no accessor (FSMT's encoder). Where what
    the model names its input embeddings is no lookup module (Perceiver's: its latent array, a parameter), the
    stack's table of one row per word of its vocabulary (Perceiver's text preprocessor's)."""
    stack = embedding_stack(lm)
    table = (stack if hasattr(stack, "get_input_embeddings") else lm.model).get_input_embeddings()
    if isinstance(table, torch.nn.Module):
        return table
    words = lm.model.config.get_text_config().vocab_size
    found = (m for m in stack.modules() if isinstance(m, torch.nn.Embedding) and m.num_embeddings == words)
    return next(found, table)


def entry(lm) -> Entry:
    """The stack's ``Entry``, probed once per model."""
    with _lock:
        if lm.model not in _entries:
            _entries[lm.model] = _probe(lm)
    return _entries[lm.model]


def _forward(lm, ids: torch.Tensor, **extra):
    """The stack's forward on ``ids`` [1, position], with its hidden states."""
    with torch.inference_mode():
        if lm.kind == KIND_ENCODER_DECODER:
            return embedding_stack(lm)(input_ids=ids, output_hidden_states=True, return_dict=True)
        # No cache: one pass needs none, and a model whose layers are all linear-attention or state-space ones cannot
        # count the tokens of the cache it would make (its get_seq_length raises).
        cache = {"use_cache": False} if lm.kind == KIND_DECODER else {}
        return lm.model(input_ids=ids, output_hidden_states=True, return_dict=True, **cache, **extra)


def _probe(lm) -> Entry:
    stack = embedding_stack(lm)
    with record_calls(stack) as calls:
        _forward(lm, probe_ids(lm))
    first = _first_layer_call(stack, calls, getattr(lm, "num_layers", None))
    if first is None:
        return Entry(None)
    names = {id(module): name for name, module in stack.named_modules()}
    before = [call for call in calls if call.end < first.start]
    table = input_table(lm)
    rows = next((call.output for call in before if call.module is table), None)
    inside = {id(module) for module in table.modules()}  # the table's own norm is in its rows (Inkling's)
    norm = next((c for c in reversed(before) if _maps_to(c, first.input) and id(c.module) not in inside), None)
    fed = (first.input, None if norm is None else norm.input)  # what reaches the first layer (through the norm)
    projection = next(
        (
            c
            for c in before
            if isinstance(c.module, torch.nn.Linear) and same(c.input, rows) and any(same(c.output, t) for t in fed)
        ),
        None,  # not Gemma 3n's per-layer projection, which reads the token rows for something else
    )
    if norm is projection:
        norm = None  # the first layer reads the projection's rows as they are
    return Entry(
        first.module,
        None if projection is None else names.get(id(projection.module)),
        None if norm is None else names.get(id(norm.module)),
    )


def _maps_to(call, received: torch.Tensor) -> bool:
    """Whether ``call`` changes a tensor into what the first layer receives, keeping its shape (a norm)."""
    kept_shape = call.input is not None and call.input.shape == received.shape
    return same(call.output, received) and kept_shape and call.changes()


def _first_layer_call(stack, calls, layers: int | None):
    """The first call of the module list whose elements are called ``layers`` times in all (the stack's layers; a
    shared layer, ALBERT's, counts once per call), the earliest where several are; None where none is."""
    if not layers:
        return None
    found = []
    for module_list in (m for m in stack.modules() if isinstance(m, torch.nn.ModuleList)):
        elements = {id(element) for element in module_list}
        called = [call for call in calls if id(call.module) in elements]
        if len(called) == layers and called[0].input is not None:
            found.append(called[0])
    return min(found, key=lambda call: call.start, default=None)


def first_layer_rows(lm, ids: torch.Tensor, **extra) -> np.ndarray:
    """What the stack's first layer receives for ``ids`` [1, position], batch axis dropped: [token, hidden], or
    with a stream axis where it reads several vectors per token, or with the model's own rows before the text's
    (rows it pads after the text are cut). The model's ``hidden_states[0]`` where the stack has no first layer to
    hook."""
    layer = entry(lm).first_layer
    if layer is None:
        return _numpy(_without_batch(_forward(lm, ids, **extra).hidden_states[0]))
    seen: list = []
    handle = layer.register_forward_pre_hook(_keep_first, with_kwargs=True)
    token = _reading.set(seen)
    try:
        reported = _forward(lm, ids, **extra).hidden_states
    finally:
        _reading.reset(token)
        handle.remove()
    if not seen:  # the pass did not run the layer the probe saw first (a path that depends on the input)
        return _numpy(_without_batch(reported[0]))
    rows = _without_batch(seen[0])
    count = ids.shape[1]
    if rows.dim() != 2 or len(rows) <= count or getattr(lm, "latents", 0):  # a latent array's rows: none are cut
        return _numpy(rows)
    own = _without_batch(reported[0]) if reported else None
    if own is not None and own.shape == rows[-count:].shape and torch.equal(own, rows[-count:]):
        return _numpy(rows)  # the model's rows come first (CPM-Ant's prompt) and its hidden states leave them out
    return _numpy(rows[:count])  # padded after the text, to a multiple of a block (Pegasus-X, Longformer)


def _keep_first(module, args, kwargs) -> None:
    seen, value = _reading.get(), layer_input(args, kwargs)
    if seen is not None and not seen and value is not None:  # this context's pass, a shared layer's first call
        seen.append(value.detach().clone())


def _without_batch(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` without its batch axis: its first axis of length 1 (FSMT runs [position, batch, hidden], Gemma
    3n's AltUp [stream, batch, position, hidden])."""
    axis = next((i for i, length in enumerate(tensor.shape) if length == 1), 0)
    return tensor.squeeze(axis) if tensor.shape[axis] == 1 else tensor


def _numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().to(device="cpu", dtype=torch.float32).numpy().copy()
