"""Local attention returned in blocks, laid out as one [query, key] map per head.

LongT5's local encoder attention (``encoder_attention_type="local"``) cuts the input into blocks of
``local_radius + 1`` tokens; each block's queries attend to the keys of the previous, the same and the next block,
and its ``output_attentions`` come back as [batch, block, head, block_len, 3 * block_len]. Query ``q`` of block
``b = q // block_len`` reads column ``c`` of its window: key ``(b - 1) * block_len + c``. Every other key, and the
window's padding, gets weight exactly 0 from the model's own mask, so placing each column at its key gives the full
map exactly. Transient-global attention adds columns for summaries of token blocks, which are no tokens: its weights
cannot be drawn over the tokens, and the capture says so (``InputError``) rather than drop them.

Pegasus-X's encoder attention is global-local: each layer returns a dict. ``local`` [batch, head, block, block_len,
global + block_len] holds each text token's weights over the model's own global tokens (its learned summaries, no
text) and then over the ``block_len`` tokens of its own block; ``global`` holds the global tokens' own rows. The text
is padded at its end to whole blocks, and a staggered layer pads ``block_len // 2`` more on both sides, so that its
blocks straddle the others' (the padding gets weight exactly 0 from the model's own mask). The text rows' block
columns, placed at their keys, are a [query, key] map of the text; the weight on the global tokens is not over any
key of it, so those rows sum to less than 1 (the capture says by how much).
"""

from __future__ import annotations

import math

import torch

from explorer.errors import InputError


def as_query_key_maps(config, weights: torch.Tensor, length: int) -> torch.Tensor:
    """``weights`` [batch, head, query, key] as they are, or, in the local layout of ``config`` (its
    ``local_radius``), placed at their keys: [batch, head, ``length``, ``length``]."""
    radius = getattr(config, "local_radius", None)
    if weights.dim() != 5 or not isinstance(radius, int) or weights.shape[-2] != radius + 1:
        return weights
    batch, blocks, heads, block_len, width = weights.shape
    if width > 3 * block_len:
        raise InputError(
            f"This model's encoder attention is {getattr(config, 'encoder_attention_type', 'not local')}: each "
            f"query attends to its neighbours and to {width - 3 * block_len} summaries of token blocks, which are no "
            "tokens, so its weights cannot be drawn as [query, key] maps over the tokens (a part would be missing)."
        )
    rows = weights.permute(0, 2, 1, 3, 4).reshape(batch, heads, blocks * block_len, width)[:, :, :length]
    query = torch.arange(length, device=weights.device)
    column = query[None, :] - (query[:, None] // block_len - 1) * block_len  # [query, key]: the key's column
    inside = (column >= 0) & (column < width)
    index = column.clamp(0, width - 1).expand(batch, heads, length, length)
    placed = rows.gather(-1, index)
    return torch.where(inside, placed, torch.zeros((), dtype=weights.dtype, device=weights.device))


def global_local_as_query_key(local: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pegasus-X's ``local`` weights [batch, head, block, block_len, global + block_len] of a text of ``length``
    tokens as (the text rows' block columns placed at their keys [batch, head, ``length``, ``length``], 0 elsewhere;
    each text row's weight on the global tokens [batch, head, ``length``])."""
    batch, heads, blocks, block_len, width = local.shape
    num_global = width - block_len
    # The padding in front of the text: 0, or block_len // 2 in a staggered layer (its blocks hold more positions
    # than the text padded at its end to whole blocks, by as many in front as behind).
    front = (blocks * block_len - math.ceil(length / block_len) * block_len) // 2
    rows = local.reshape(batch, heads, blocks * block_len, width)[:, :, front : front + length]
    position = torch.arange(length, device=local.device) + front  # in the padded sequence
    column = position[None, :] - (position[:, None] // block_len) * block_len  # [query, key]: the key's column
    inside = (column >= 0) & (column < block_len)
    index = (column.clamp(0, block_len - 1) + num_global).expand(batch, heads, length, length)
    placed = torch.where(inside, rows.gather(-1, index), torch.zeros((), dtype=local.dtype, device=local.device))
    return placed, rows[..., :num_global].sum(-1)
