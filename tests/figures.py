"""Reading figures back the way the browser gets them."""

from __future__ import annotations

import base64

import numpy as np


def decode_plotly_array(value) -> np.ndarray:
    """Plotly's JSON holds NumPy arrays as base64 typed arrays: {"dtype", "bdata", "shape"}."""
    if not isinstance(value, dict):
        return np.array(value, dtype=float)
    flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return flat.reshape([int(n) for n in str(value.get("shape", len(flat))).split(",")])
