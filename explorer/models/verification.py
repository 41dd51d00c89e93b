"""Recomputing attention weights from captured queries and keys, in torch on the capture's device.

``AttentionStack.verify()`` delegates here: softmax(scale * q . k, softcapped, + position bias, masked) is
recomputed from the stack's own arrays and compared with the weights the model produced. The mask is the one each
layer was given (sliding windows included); with attention sinks (GPT-OSS) each row's softmax also covers the
head's sink logit, whose weight is dropped. A stack of weights alone (``AttentionStack.weights_only``) has nothing
to recompute from: its ``verify()`` is NaN, which pages show as "not checked" with the reason, not as a failure.

It runs on the device the capture was made on (the stack's ``device``), in float64 there, so the check measures
the model's rounding, not ours. Apple's MPS has no float64: there it runs in float32, whose own rounding moves
the result by about 1e-6 (2e-6 measured on the CPU for MiniLM at 512 tokens, against float64), well inside
every tolerance of ``explorer.data.VERIFY_TOLERANCE``.

A stack is sent to the device one layer at a time (memory stays one layer's worth); the running maximum stays
on the device, so the host waits once, for the final number. Tests hold it to the step-by-step page's NumPy
recomputation (``explorer.compute.attention.score_stages``) within 1e-12.
"""

from __future__ import annotations

import numpy as np
import torch


def recompute_dtype(device: torch.device) -> torch.dtype:
    return torch.float32 if device.type == "mps" else torch.float64


def verification_device(name: str) -> torch.device:
    """The capture's device when this process can use it, else the CPU (a capture made on a GPU elsewhere)."""
    device = torch.device(name)
    available = {"cuda": torch.cuda.is_available, "mps": torch.backends.mps.is_available}
    return device if available.get(device.type, lambda: device.type == "cpu")() else torch.device("cpu")


def max_recompute_error(stack, device: str | None = None) -> float:
    """Largest |recomputed - captured| weight of an ``AttentionStack``, over every layer, head and position,
    recomputed on ``device`` (by default the stack's own)."""
    device = verification_device(device or stack.device)
    dtype = recompute_dtype(device)
    masks = stack.masks_by_layer()
    worst = torch.zeros((), dtype=dtype, device=device)
    for layer in range(stack.num_layers):
        if stack.attentions[layer].size == 0:
            continue
        again = recompute_layer(stack, layer, masks[layer], device, dtype)
        again -= _on(stack.attentions[layer], device, dtype)
        worst = torch.maximum(worst, again.abs_().max())
    return float(worst)


def recompute_layer(stack, layer: int, allowed: np.ndarray, device: torch.device, dtype: torch.dtype):
    """softmax(scale * q . k (+ softcap) (+ position_bias), masked, beside the sinks) [head, query, key] of one
    layer."""
    scores = _on(stack.queries[layer], device, dtype) @ _on(stack.keys[layer], device, dtype).transpose(-1, -2)
    scores *= float(stack.scale[layer])
    if stack.softcap is not None and np.isfinite(stack.softcap[layer]):  # inf: this layer has no cap
        cap = float(stack.softcap[layer])
        scores = torch.tanh(scores / cap) * cap
    if stack.position_bias is not None:
        scores += _on(stack.position_bias[layer], device, dtype)
    sinks = None if stack.sinks is None else _on(stack.sinks[layer], device, dtype)
    return masked_softmax(scores, allowed, sinks)


def masked_softmax(scores: torch.Tensor, allowed: np.ndarray, sinks: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over keys where ``allowed`` [query, key]; disallowed keys get weight 0. ``scores`` is overwritten.
    ``sinks`` [head, query]: one more logit in each row's softmax (an attention sink), its weight then dropped.

    torch's fused softmax (one kernel, not five passes) gives NaN for a query with no allowed key; the model
    gives it a flat row nobody is shown: such rows are set to 0, as if nothing was attended.
    """
    mask = torch.from_numpy(np.array(allowed, dtype=bool)).to(scores.device)
    scores = scores.masked_fill_(~mask, -torch.inf)
    if sinks is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        weights = torch.softmax(torch.cat([scores, sinks[..., None]], dim=-1), dim=-1)[..., :-1]
    if not allowed.any(axis=-1).all():
        weights = weights.nan_to_num_(nan=0.0)
    return weights


def _on(array: np.ndarray, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """A float32 host array on ``device`` in ``dtype``. The CPU widens it in one copy. Other devices get it as
    float32 (half the bytes), through page-locked memory on CUDA, and widen it there. (Captured arrays are
    read-only, and torch warns about tensors that share such memory: both paths copy first.)"""
    if device.type == "cpu":
        return torch.from_numpy(array.astype(_NUMPY_DTYPE[dtype]))
    staging = torch.empty(array.shape, dtype=torch.float32, pin_memory=device.type == "cuda")
    np.copyto(staging.numpy(), array)
    return staging.to(device, non_blocking=True).to(dtype)


_NUMPY_DTYPE = {torch.float64: np.float64, torch.float32: np.float32}
