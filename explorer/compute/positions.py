"""Position signals and how context changes a token: pure NumPy.

- ``sinusoidal_encoding``: the original Transformer's fixed position encoding (Vaswani et al., 2017):
  PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d)); ``shown_pairs`` picks the
  pairs i a chart has the pixels for.
- ``rotary_frequencies``: the angle per position of each rotated pair in rotary embeddings (RoPE).
- ``layerwise_cosine``: cosine similarity, layer by layer, of one token's hidden state in two captures.
"""

from __future__ import annotations

import numpy as np


def sinusoidal_encoding(positions: int, width: int, base: float = 10000.0) -> np.ndarray:
    """[position, width] float32."""
    pos = np.arange(positions, dtype=np.float64)[:, None]
    pair = np.arange(0, width, 2, dtype=np.float64)[None, :]
    angles = pos / np.power(base, pair / width)
    encoding = np.zeros((positions, width))
    encoding[:, 0::2] = np.sin(angles)
    encoding[:, 1::2] = np.cos(angles[:, : width // 2])
    return encoding.astype(np.float32)


def shown_pairs(width: int, columns: int) -> np.ndarray:
    """The pairs i (dimensions 2i and 2i+1) of a ``width``-wide encoding that a panel of ``columns`` columns
    can show, one pair per column: all of them, or every k-th from the fastest (i = 0) with k as small as fits.
    A heatmap given more columns than it has pixels aliases: neighbouring columns merge into patterns that are
    not in the values."""
    pairs = (width + 1) // 2
    stride = -(-pairs // max(int(columns), 1))
    return np.arange(0, pairs, max(stride, 1))


def rotary_frequencies(head_dim: int, base: float = 10000.0) -> np.ndarray:
    """[head_dim / 2] inverse frequencies θ_i = base^(−2i/head_dim): pair i turns by pos · θ_i radians."""
    return 1.0 / np.power(base, np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)


def rotary_angles(inverse_frequencies: np.ndarray, positions: int) -> np.ndarray:
    """[position, pair] rotation angles (radians, wrapped to [−π, π)) of each rotated pair at each position."""
    angles = np.arange(positions, dtype=np.float64)[:, None] * np.asarray(inverse_frequencies)[None, :]
    return (angles + np.pi) % (2 * np.pi) - np.pi


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    denominator = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / denominator) if denominator > 0 else 0.0


def layerwise_cosine(hidden_a: np.ndarray, position_a: int, hidden_b: np.ndarray, position_b: int) -> np.ndarray:
    """[layer + 1] cosine similarity of one token's hidden state in two texts, after the embeddings and after
    each layer: 1 at the embeddings for the same token id, falling as context mixes in."""
    return np.array([cosine(a[position_a], b[position_b]) for a, b in zip(hidden_a, hidden_b, strict=True)])


def find_token(tokens, word: str) -> int | None:
    """The first position whose label, stripped of spaces and WordPiece marks, equals ``word`` (case-blind)."""
    wanted = word.strip().lower()
    for position, token in enumerate(tokens):
        if token.strip().lstrip("▁Ġ").removeprefix("##").lower() == wanted:
            return position
    return None
