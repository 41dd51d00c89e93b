"""Reading figures back the way the browser gets them."""

from __future__ import annotations

import base64
import re

import numpy as np


def decode_plotly_array(value) -> np.ndarray:
    """Plotly's JSON holds NumPy arrays as base64 typed arrays: {"dtype", "bdata", "shape"}."""
    if not isinstance(value, dict):
        return np.array(value, dtype=float)
    flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
    return flat.reshape([int(n) for n in str(value.get("shape", len(flat))).split(",")])


_COLOURED = re.compile(r'<span style="color:(#[0-9a-f]{6})">(.*)</span>', re.DOTALL)


def written(text: str) -> str:
    """A cell's text as it reads, without the span that gives it its colour (``style.in_colour``)."""
    match = _COLOURED.fullmatch(str(text))
    return match.group(2) if match else str(text)


def written_colour(template: str, text: str) -> str | None:
    """The colour a cell's text is drawn in: its ``texttemplate`` filled with its ``text``, read back."""
    match = _COLOURED.fullmatch(template.replace("%{text}", str(text)))
    return match.group(1) if match else None
