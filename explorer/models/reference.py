"""torch's own computations, for checking the explorer's arithmetic against code nobody here wrote."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


def torch_attention(queries: np.ndarray, keys: np.ndarray, values: np.ndarray, *, causal: bool = False) -> np.ndarray:
    """``torch.nn.functional.scaled_dot_product_attention`` of [token, dim] arrays (scale 1/√dim): [query, dim]."""
    q, k, v = (torch.as_tensor(np.asarray(a, dtype=np.float64))[None] for a in (queries, keys, values))
    with torch.inference_mode():
        output = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return output[0].numpy().copy()
