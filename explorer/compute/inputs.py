"""The summed embedding rows beside what the first layer receives (``explorer.models.first_layer``).

A first layer may read one vector per token, several (hyper-connections copy each row into k streams; Gemma 3n's
AltUp adds the model's own maps of it), or rows of the model's own before the text's (CPM-Ant's prompt). ``reconcile``
puts the sum in that layer's shape where the model only copies it, and otherwise says how far off it is and why.
"""

from __future__ import annotations

import numpy as np


def reconcile(summed: np.ndarray, first_layer: np.ndarray) -> tuple[np.ndarray, str | None]:
    """(``summed`` in the first layer's shape, None) where that layer reads the sum: as it is, or copied into
    each of its streams; else (``summed``, why it is not what the layer reads, and how far off)."""
    if summed.shape == first_layer.shape:
        return summed, None
    if first_layer.ndim == summed.ndim + 1:
        return _streams(summed, first_layer)
    if first_layer.ndim == 2 and len(first_layer) > len(summed) and first_layer.shape[1] == summed.shape[1]:
        extra, text = len(first_layer) - len(summed), first_layer[len(first_layer) - len(summed) :]
        return summed, (
            f"Its first layer receives {len(first_layer)} rows for the text's {len(summed)} tokens: the model puts "
            f"{extra} rows of its own before them, which no token's rows give; its rows for the text differ from "
            f"this sum by {np.abs(text - summed).max():.3g}."
        )
    return summed, (
        f"Its first layer receives vectors of shape {tuple(first_layer.shape)}, the rows shown add up to "
        f"{tuple(summed.shape)}: the model builds them in a way this page does not show."
    )


def _streams(summed: np.ndarray, first_layer: np.ndarray) -> tuple[np.ndarray, str | None]:
    """The first layer reads k vectors per token (an extra axis): the sum copied into each where the model copies
    one row into all (DeepSeek-V4's hyper-connections), else a note with how far each is from the sum."""
    axis = next(
        (a for a in range(first_layer.ndim) if np.delete(first_layer.shape, a).tolist() == list(summed.shape)), None
    )
    if axis is None:
        return summed, f"Its first layer receives vectors of shape {tuple(first_layer.shape)}, not one per token."
    streams = np.moveaxis(first_layer, axis, 0)
    if all(np.array_equal(stream, streams[0]) for stream in streams[1:]):
        return np.broadcast_to(np.expand_dims(summed, axis), first_layer.shape).copy(), None
    off = [float(np.abs(stream - summed).max()) for stream in streams]
    closest = int(np.argmin(off))
    others = max(o for i, o in enumerate(off) if i != closest)
    return summed, (
        f"Its first layer reads {len(streams)} vectors per token, not one: vector {closest + 1} is this sum (largest "
        f"difference {off[closest]:.2g}); the other {len(streams) - 1} are the model's own maps of the rows (up to "
        f"{others:.3g} from the sum), which the rows shown do not give."
        if off[closest] <= 1e-5
        else f"Its first layer reads {len(streams)} vectors per token, none of them this sum (the closest, vector "
        f"{closest + 1}, differs by {off[closest]:.3g}): the model builds them in a way the rows shown do not give."
    )
