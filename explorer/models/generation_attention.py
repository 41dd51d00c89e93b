"""Attention during generation, stitched: every forward pass of a decoding, as one matrix per layer and head.

With a KV cache, the prompt's pass gives a [prompt, prompt] block and each later pass one row
[1, positions so far]. Stitched, they form the [position, position] causal matrix that one forward pass
over the tokens fed would give, with the queries, keys and mask needed to recompute it, so
``AttentionStack.verify()`` works as for any capture. Only the passes that ran are stitched: the last
generated token is never fed back (as in generate(), whose ``output_attentions`` the tests compare), so a
decoding of n new tokens has the prompt's rows and n - 1 more.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import torch

from explorer.data import STACK_CROSS, STACK_DECODER, STACK_ENCODER, AttentionStack
from explorer.models.capture import _stack
from explorer.models.tokens import token_labels


def stitch(lm, calls, sequence: list[int], prompt_ids: list[int], seq2seq: bool) -> dict[str, AttentionStack]:
    """{stack name: AttentionStack} from the attention calls recorded while decoding one sequence."""
    by_stack: dict[str, dict[int, list]] = defaultdict(dict)
    default = STACK_DECODER
    for call in calls:
        stack = lm.stack_of_module.get(id(call.module), default)
        by_stack[stack].setdefault(id(call.module), []).append(call)
    fed = token_labels(lm.tokenizer, sequence)[: _fed(by_stack)]  # the decoder's tokens that ran: its queries
    prompt_tokens = token_labels(lm.tokenizer, prompt_ids)
    axes = {
        STACK_DECODER: (fed, fed),
        STACK_CROSS: (fed, prompt_tokens),
        STACK_ENCODER: (prompt_tokens, prompt_tokens),
    }
    stacks = {}
    for name, modules in by_stack.items():
        layers = [_stitch_calls(module_calls, causal=name == STACK_DECODER) for module_calls in modules.values()]
        stacks[name] = _stack(layers, *axes[name])
    return stacks


def _fed(by_stack: dict) -> int:
    """How many decoder positions the recorded passes fed (their query rows, added up over one layer's calls)."""
    calls = next(iter(by_stack[STACK_DECODER].values()), []) if STACK_DECODER in by_stack else []
    return sum(call.weights.shape[-2] for call in calls)


def _stitch_calls(calls: list, *, causal: bool):
    """One recorded call per layer covering every query position: rows of each pass placed one under another."""
    if len(calls) == 1:
        return calls[0]
    last = calls[-1]
    heads, num_keys = last.weights.shape[1], last.weights.shape[-1]
    num_queries = sum(call.weights.shape[2] for call in calls)
    weights = last.weights.new_zeros((1, heads, num_queries, num_keys))
    allowed = torch.zeros((num_queries, num_keys), dtype=torch.bool, device=last.weights.device)
    bias = None if last.position_bias is None else last.weights.new_zeros((1, heads, num_queries, num_keys))
    row = 0
    for call in calls:
        rows, keys = call.weights.shape[-2:]
        weights[:, :, row : row + rows, :keys] = call.weights
        allowed[row : row + rows, :keys] = _allowed(call, causal)
        if bias is not None and call.position_bias is not None:
            bias[:, :, row : row + rows, :keys] = call.position_bias[..., -rows:, -keys:].expand(1, heads, rows, keys)
        row += rows
    return dataclasses.replace(
        last,
        query=torch.cat([call.query for call in calls], dim=2),
        weights=weights,
        mask=allowed[None, None],
        position_bias=bias,
    )


def _allowed(call, causal: bool) -> torch.Tensor:
    """[rows, keys] bool: where this pass let each of its queries attend (its last rows of a causal matrix)."""
    rows, keys = call.weights.shape[-2:]
    if call.mask is None:
        full = torch.ones((rows, keys), dtype=torch.bool, device=call.weights.device)
        return torch.tril(full, diagonal=keys - rows) if causal else full
    mask = call.mask[0, 0]
    if mask.dtype != torch.bool:
        mask = mask > torch.finfo(mask.dtype).min / 2
    return mask[-rows:, -keys:].expand(rows, keys)
