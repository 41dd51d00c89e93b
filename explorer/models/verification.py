"""``verify()``'s recomputation, in torch on the device the model ran on.

softmax(scale · q·k (softcapped) + position bias, masked) recomputed from a stack's captured queries and keys,
compared with its captured weights: the largest absolute difference. In float64 where the device has it (CPU,
CUDA), so the check measures the model's rounding and not its own; Apple's MPS has no float64, and there the
check runs in float32 (its own rounding, about 1e-6 on softmax weights, is then part of the number). One layer
at a time, so the device holds one layer's scores, not the whole stack's.

The same recomputation in NumPy (``explorer.compute.attention.max_recompute_error``) is what the tests compare
this with.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from explorer.data.attention import AttentionStack


def check_dtype(device: torch.device) -> torch.dtype:
    return torch.float32 if device.type == "mps" else torch.float64


def max_recompute_error(stack: AttentionStack, device: str = "cpu") -> float:
    """Largest |recomputed - captured| weight over every layer and head of ``stack``."""
    where = torch.device(device)
    precise = check_dtype(where)
    masks = stack.masks_by_layer()
    worst = 0.0
    with torch.inference_mode():
        for layer in range(stack.num_layers):
            scores = _scores(stack, layer, where, precise)
            allowed = _on(masks[layer], where, torch.bool)
            scores = scores.masked_fill(~allowed, -torch.inf)
            # A query with no allowed key has no softmax (0/0): recomputed as zeros, as the NumPy check does.
            weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
            captured = _on(stack.attentions[layer], where, precise)
            worst = max(worst, float((weights - captured).abs().max()) if weights.numel() else 0.0)
    return worst


def _on(array: np.ndarray, where: torch.device, precise: torch.dtype) -> torch.Tensor:
    """The array on the device in the check's precision. Captured arrays are read-only and torch warns when it
    shares one; only read here, so sharing is safe (float32 crosses to the device, then widens there)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.as_tensor(array, device=where).to(precise)


def _scores(stack: AttentionStack, layer: int, where: torch.device, precise: torch.dtype) -> torch.Tensor:
    queries = _on(stack.queries[layer], where, precise)
    keys = _on(stack.keys[layer], where, precise)
    scores = (queries @ keys.transpose(-1, -2)) * float(stack.scale[layer])
    if stack.softcap is not None and np.isfinite(stack.softcap[layer]):
        cap = float(stack.softcap[layer])
        scores = torch.tanh(scores / cap) * cap
    if stack.position_bias is not None:
        scores = scores + _on(stack.position_bias[layer], where, precise)
    return scores
