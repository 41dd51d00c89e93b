"""Records every attention call of a forward pass, without touching the shared model per request.

How it works: at load time the model is switched, once, to an attention implementation named
``ATTN_IMPLEMENTATION``, registered here with transformers' ``AttentionInterface``. That function
delegates to the model's own ``eager_attention_forward`` (so outputs are exactly eager's) and, when
the *calling context* has opened a recording, appends what it saw: the final queries and keys
(after norms and rotary embeddings), the values, the weights, the mask, the scaling and any bias or
softcap.

Recordings live in a ``ContextVar``: each thread (each Streamlit session) gets its own list, so many
visitors can capture on one cached model at once. Outside a recording the function only delegates.

Head ablation happens here too, in the same function, so it needs no second code path: inside
``ablating(keep)`` the output of each attention call ([batch, query, head, head_dim], what every eager
function returns before the heads are concatenated and projected) has the heads that ``keep`` marks
False set to 0. ``keep`` is per call and per thread, in a ``ContextVar`` like the recordings. Activation
patching reads and replaces heads at the same place: inside ``editing(edits)``, each listed module's output goes
through its edit function before the output projection.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from explorer.models.architectures import module_quirks

ATTN_IMPLEMENTATION = "explorer_capture"

# Where a model's attention is read from, decided once at load by one short probe (``explorer.models.loading``):
RECORDED = "recorded"  # every attention call runs through ATTN_IMPLEMENTATION: weights, queries, keys, values
RETURNED = "returned"  # the model computes attention in its own code: its eager output_attentions, weights only
NO_ATTENTION = "none"  # the model has no attention at all (a state-space model such as Mamba)


def attention_source(lm) -> str:
    """Where ``lm``'s attention is read from: ``RECORDED``, ``RETURNED`` or ``NO_ATTENTION`` (decided at load)."""
    return getattr(lm, "attention", RECORDED)


def attends(lm) -> bool:
    """Whether ``lm`` has attention layers at all."""
    return attention_source(lm) != NO_ATTENTION


@dataclass(frozen=True)
class AttentionCall:
    """One attention module's call, as torch tensors detached on their device.

    query   [batch, head, query, head_dim]
    key     [batch, kv_head, key, head_dim]
    value   [batch, kv_head, key, head_dim]
    weights [batch, head, query, key]
    mask    additive or boolean mask broadcastable to weights, or None
    """

    module: torch.nn.Module
    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    weights: torch.Tensor
    mask: torch.Tensor | None
    scaling: float
    position_bias: torch.Tensor | None
    softcap: float | None
    # Attention sinks (GPT-OSS): one extra logit per head (or per head and query) in each softmax, dropped after.
    sinks: torch.Tensor | None = None


_recording: ContextVar[list[AttentionCall] | None] = ContextVar("explorer_recording", default=None)
# id(attention module) -> [batch or 1, head] bool: which heads' outputs reach the output projection.
_keep: ContextVar[dict[int, torch.Tensor] | None] = ContextVar("explorer_ablation", default=None)
# id(attention module) -> output [batch, query, head, head_dim] -> what reaches the output projection instead.
_edits: ContextVar[dict[int, Callable[[torch.Tensor], torch.Tensor]] | None] = ContextVar(
    "explorer_edits", default=None
)


def _model_eager_forward(module: torch.nn.Module):
    """The eager attention function of the module's own modeling file."""
    return sys.modules[type(module).__module__].eager_attention_forward


def _recording_attention(module, query, key, value, attention_mask, **kwargs):
    output, weights = _model_eager_forward(module)(module, query, key, value, attention_mask, **kwargs)
    keep = _keep.get()
    if keep is not None and id(module) in keep:
        output = _ablated(output, keep[id(module)], query.shape[1])
    edits = _edits.get()
    if edits is not None and id(module) in edits:
        output = edits[id(module)](output)
    calls = _recording.get()
    if calls is not None:
        scaling = kwargs.get("scaling")
        calls.append(
            AttentionCall(
                module=module,
                query=query.detach(),
                key=key.detach(),
                value=value.detach(),
                weights=weights.detach(),
                mask=None if attention_mask is None else attention_mask.detach(),
                scaling=float(query.shape[-1] ** -0.5 if scaling is None else scaling),
                position_bias=_tensor_or_none(kwargs.get("position_bias")),
                softcap=kwargs.get("softcap"),
                sinks=_sinks_in_weights(module, kwargs),
            )
        )
    return output, weights


def _ablated(output: torch.Tensor, keep: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``output`` [batch, query, head, head_dim] with the heads ``keep`` [batch or 1, head] marks False set to 0."""
    if output.dim() != 4 or output.shape[2] != num_heads:
        raise RuntimeError(
            f"Cannot ablate heads: attention output {tuple(output.shape)} is not [batch, query, head, ...]"
        )
    return torch.where(keep[:, None, :, None], output, torch.zeros((), dtype=output.dtype, device=output.device))


def _tensor_or_none(value):
    return value.detach() if isinstance(value, torch.Tensor) else None


def _sinks_in_weights(module, kwargs) -> torch.Tensor | None:
    """The sink logits the returned softmax covers (GPT-OSS's ``s_aux``), or None: none given, or sinks its model
    applies after the weights it returns (Granite SWA: ``ArchitectureQuirks.sinks_after_weights``)."""
    if module_quirks(module).sinks_after_weights:
        return None
    return _tensor_or_none(kwargs.get("s_aux", kwargs.get("sinks")))


AttentionInterface.register(ATTN_IMPLEMENTATION, _recording_attention)
# Without a mask function under the same name, causal models silently lose their causal mask.
AttentionMaskInterface.register(ATTN_IMPLEMENTATION, eager_mask)


@contextmanager
def recording() -> Iterator[list[AttentionCall]]:
    """Collect the attention calls made in this context (this thread) until the block ends."""
    calls: list[AttentionCall] = []
    token = _recording.set(calls)
    try:
        yield calls
    finally:
        _recording.reset(token)


@contextmanager
def ablating(keep: dict[int, torch.Tensor]) -> Iterator[None]:
    """Zero, in this context (this thread), the heads that ``keep`` {id(module): [batch or 1, head] bool}
    marks False, in the output of those attention modules."""
    token = _keep.set(keep)
    try:
        yield
    finally:
        _keep.reset(token)


@contextmanager
def editing(edits: dict[int, Callable[[torch.Tensor], torch.Tensor]]) -> Iterator[None]:
    """Pass, in this context (this thread), the output [batch, query, head, head_dim] of each attention module
    ``edits`` names (by id) through its function before the output projection."""
    token = _edits.set(edits)
    try:
        yield
    finally:
        _edits.reset(token)


def ablated_weights(module_id: int, weights: torch.Tensor) -> torch.Tensor | None:
    """``weights`` [batch, head, query, key] of the attention module ``module_id`` with this context's ablation
    applied, or None where it names none of its heads. A head's output is its weights' sum over the values, so zeroing
    its weights zeroes its output exactly; activation patching's edits, which replace a head's output, do not apply
    here (``explorer.models.ablation`` hooks this where no module reads the heads' outputs side by side)."""
    keep = _keep.get()
    if keep is None or module_id not in keep:
        return None
    mask = keep[module_id][:, :, None, None]
    return torch.where(mask, weights, torch.zeros((), dtype=weights.dtype, device=weights.device))


def edited_heads(module_id: int, output: torch.Tensor) -> torch.Tensor | None:
    """``output`` [batch, query, head, head_dim] of the attention module ``module_id`` with this context's ablation
    and edits applied, or None where neither names it. For models that compute attention in their own code, a hook
    on the output projection's input calls this (``explorer.models.ablation``)."""
    keep, edits = _keep.get(), _edits.get()
    if (keep is None or module_id not in keep) and (edits is None or module_id not in edits):
        return None
    if keep is not None and module_id in keep:
        output = _ablated(output, keep[module_id], output.shape[2])
    if edits is not None and module_id in edits:
        output = edits[module_id](output)
    return output
