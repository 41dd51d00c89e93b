"""Bringing recorded tensors to the host as the data contract's arrays: one transfer per capture on accelerators.

A capture records a handful of tensors per layer (weights, queries, keys, values, masks, hidden states). Copied
one by one, each copy from a GPU is a synchronisation plus a pageable transfer plus a second copy on the host:
dozens per capture, which cost more than the forward pass itself on an H100. ``to_host`` takes every tensor of a
capture at once: on the CPU it fills each array in place (NumPy's fresh memory is cheaper to fill than
``torch.stack``'s, measured in bench/); on any other device it packs everything into one byte buffer there (one
copy kernel per tensor, converting floats to float32 on the way), copies that buffer once, and returns NumPy
views of it.

Pinned (page-locked) host memory is not used: the arrays outlive the call (the app caches captures), and
holding them in page-locked memory would take it from the driver for as long as they are cached.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import torch


def to_host(groups: dict[Hashable, list[torch.Tensor]]) -> dict[Hashable, np.ndarray]:
    """{name: [layer, ...] array} from {name: one tensor per layer}; floats become float32, bools stay bool.

    The tensors of one group share a shape; groups may differ in shape and device.
    """
    if all(tensor.device.type == "cpu" for tensors in groups.values() for tensor in tensors):
        return {name: stack_on_host(tensors) for name, tensors in groups.items()}
    return _one_transfer(groups)


def stack_on_host(tensors: list[torch.Tensor]) -> np.ndarray:
    """[layer, ...] float32 (or bool) on the CPU, filled one layer at a time."""
    dtype = bool if tensors[0].dtype == torch.bool else np.float32
    stacked = np.empty((len(tensors), *tensors[0].shape), dtype=dtype)
    for layer, tensor in enumerate(tensors):
        np.copyto(stacked[layer], _host_dtype(tensor.to("cpu")).numpy())
    return stacked


def _host_dtype(tensor: torch.Tensor) -> torch.Tensor:
    return tensor if tensor.dtype == torch.bool else tensor.to(torch.float32)


def _one_transfer(groups: dict[Hashable, list[torch.Tensor]]) -> dict[Hashable, np.ndarray]:
    """Every group packed as bytes into one buffer on the first tensor's device, copied to the host once."""
    device = next(iter(groups.values()))[0].device
    # Floats first: every float array then starts at a multiple of 4 bytes, so the host views are aligned.
    order = sorted(groups, key=lambda name: groups[name][0].dtype == torch.bool)
    layout, offset = {}, 0
    for name in order:
        dtype = torch.bool if groups[name][0].dtype == torch.bool else torch.float32
        shape = (len(groups[name]), *groups[name][0].shape)
        size = int(np.prod(shape)) * dtype.itemsize
        layout[name] = (offset, size, dtype, shape)
        offset += size
    packed = torch.empty(offset, dtype=torch.uint8, device=device)
    for name, (at, size, dtype, shape) in layout.items():
        region = packed[at : at + size].view(dtype).view(shape)
        for layer, tensor in enumerate(groups[name]):
            region[layer].copy_(tensor)  # one kernel: converts the dtype, gathers strided views, crosses devices
    host = packed.cpu().numpy()  # the one synchronisation and the one copy
    arrays = {}
    for name, (at, size, dtype, shape) in layout.items():
        arrays[name] = host[at : at + size].view(_NUMPY[dtype]).reshape(shape)
    return arrays


_NUMPY = {torch.bool: np.bool_, torch.float32: np.float32}
