"""Attention during generation, stitched: every forward pass of a decoding, as one matrix per layer and head.

With a KV cache, the prompt's pass gives a [prompt, prompt] block and each later pass one row
[1, keys cached]. Stitched, they form the [position, position] causal matrix that one forward pass
over the tokens fed would give, with the queries, keys and mask needed to recompute it, so
``AttentionStack.verify()`` works as for any capture. Each pass's keys are placed by absolute position: a
causal pass's keys end at its last query. A layer with a sliding or chunked window caches only the window's
last keys, so its steps see fewer keys than positions; the columns before them stay 0 and masked, exactly
as the model's eager attention over the whole sequence gives them. Only the passes that ran are stitched: the last
generated token is never fed back (as in generate(), whose ``output_attentions`` the tests compare), so a
decoding of n new tokens has the prompt's rows and n - 1 more.

A model whose attention is not recorded (it computes attention in its own code) gives the weights each pass returns
(``output_attentions``), stitched the same way into weights-only stacks (``stitch_returned``); a model without a
cache runs the whole sequence at every pass, so its last pass alone holds every row. An encoder's map, returned once,
is laid out as ``capture`` lays it out (LED's bands, Pegasus-X's global-local dicts as their text rows). A model that
returns several maps per layer at each step (XLNet's content and query streams, its positions attending to later
ones) has no causal map to stitch: its decoding runs, and a note says why its attention is left out.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import torch

from explorer.data import STACK_CROSS, STACK_DECODER, STACK_ENCODER, AttentionStack
from explorer.errors import InputError, NotApplicable
from explorer.models.capture import _stack, own_layer_numbers
from explorer.models.tokens import token_labels
from explorer.models.transfer import to_host


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
        numbers = own_layer_numbers(lm.model, [module_calls[0].module for module_calls in modules.values()])
        stacks[name] = _stack(layers, *axes[name], layer_numbers=numbers)  # a hybrid's: the model's own numbers
    return stacks


def stitch_returned(lm, passes: list[dict], sequence: list[int], prompt_ids: list[int], notes=None) -> dict:
    """{stack name: AttentionStack of weights only} from the weights each pass returned (``output_attentions``:
    {stack: [layer] of [1, head, query, key]} per pass), for a model whose attention is not recorded: no queries
    or keys, so ``verify()`` has nothing to recompute. ``InputError`` for weights in another layout (local
    attention returned in blocks or bands is not a [query, key] map of the positions)."""
    from explorer.models.capture import _as_map, _global_tokens_notes, weights_only_stack, without_attention_layers

    if not any(found.get(STACK_DECODER) for found in passes):
        if why := without_attention_layers(lm):
            raise NotApplicable(f"{why}, so there is no attention to show while it generates.")
        raise InputError(
            f"{lm.name} returns no attention weights while it generates (its layers are linear-attention or "
            "state-space layers here): there is no attention to show."
        )
    # Rows of the passes' [1, head, query, key] maps; a pair of maps per layer (XLNet's streams) is left out below.
    rows = sum(getattr(found[STACK_DECODER][0], "shape", (0, 0))[-2] for found in passes)
    fed, prompt_tokens = token_labels(lm.tokenizer, sequence)[:rows], token_labels(lm.tokenizer, prompt_ids)
    axes = {STACK_DECODER: (fed, fed), STACK_CROSS: (fed, prompt_tokens), STACK_ENCODER: (prompt_tokens, prompt_tokens)}
    stacks = {}
    for name in passes[0]:
        per_pass = [found[name] for found in passes if found.get(name)]  # the encoder returns in the first only
        if not per_pass:
            continue
        queries, keys = (len(tokens) for tokens in axes[name])
        if name == STACK_DECODER and _streams(per_pass):  # XLNet: a content and a query stream, neither causal
            if notes is None:
                raise NotApplicable(_streams_left_out(lm, per_pass[0][0]))
            notes.append(_streams_left_out(lm, per_pass[0][0]))
            continue
        if name == STACK_ENCODER:  # one pass, laid out as capture does: a local-attention encoder's bands (LED),
            # Pegasus-X's global-local dicts as their text rows (the global tokens' share said, as capture says it)
            if notes is not None:
                notes.extend(_global_tokens_notes(lm, name, per_pass[0], keys))
            per_pass = [[_as_map(lm, name, layer, keys) for layer in per_pass[0]]]
        layers = [
            _stitch_weights([found[i] for found in per_pass], queries, keys, name) for i in range(len(per_pass[0]))
        ]
        first = layers[0]
        stacks[name] = weights_only_stack(
            to_host({name: layers})[name],
            *axes[name],
            causal=name == STACK_DECODER,
            device=str(first.device),
            dtype=str(first.dtype).removeprefix("torch."),
        )
    return stacks


def _streams(per_pass: list) -> bool:
    """Whether the passes return several maps per layer (a tuple: XLNet's content and query streams)."""
    return any(isinstance(layer, tuple | list) for found in per_pass for layer in found)


def _streams_left_out(lm, pair) -> str:
    """Why a model that returns a pair of maps per layer has no attention to stitch, with what its first pass shows:
    its content stream's positions attending to later ones (weight above the causal diagonal)."""
    content = pair[0]
    queries, keys = content.shape[-2:]
    later = bool(torch.triu(content[0].float(), diagonal=1 + keys - queries).abs().amax() > 0)
    reads_ahead = " and its positions attend to later ones too (no causal order)" if later else ""
    return (
        f"Attention while generating does not apply to {lm.name} ({type(lm.model).__name__}): at each step it "
        f"returns {len(pair)} maps per layer (one per stream it runs){reads_ahead}, so its steps are not rows of "
        "one causal map of the text. The tokens it generates are shown."
    )


def _stitch_weights(weights: list, num_queries: int, num_keys: int, name: str) -> torch.Tensor:
    """[head, query, key] from each pass's [1, head, rows, keys], placed by absolute position; ``InputError`` where
    the passes' rows are not the ``num_queries`` positions (ProphetNet's n-gram streams add rows of their own)."""
    causal = name == STACK_DECODER
    for pass_weights in weights:
        if not isinstance(pass_weights, torch.Tensor) or pass_weights.dim() != 4 or pass_weights.shape[0] != 1:
            raise _not_a_map(name, pass_weights)
    if sum(pass_weights.shape[-2] for pass_weights in weights) != num_queries:
        raise _not_a_map(name, weights[0])
    stitched = weights[0].new_zeros((weights[0].shape[1], num_queries, num_keys))
    row = 0
    for pass_weights in weights:
        rows, keys = pass_weights.shape[-2:]
        first = row + rows - keys if causal else 0  # a causal pass's keys end at its last query
        if first < 0 or (not causal and keys != num_keys):
            raise _not_a_map(name, pass_weights)
        stitched[:, row : row + rows, first : first + keys] = pass_weights[0]
        row += rows
    return stitched


def _not_a_map(name: str, weights) -> InputError:
    shape = tuple(weights.shape) if isinstance(weights, torch.Tensor) else f"a {type(weights).__name__}"
    return InputError(
        f"This model returns its {name} attention as {shape}, not as a map of its positions' queries over its keys: "
        "attention while generating cannot be stitched for this architecture."
    )


def _fed(by_stack: dict) -> int:
    """How many decoder positions the recorded passes fed (their query rows, added up over one layer's calls)."""
    calls = next(iter(by_stack[STACK_DECODER].values()), []) if STACK_DECODER in by_stack else []
    return sum(call.weights.shape[-2] for call in calls)


def _stitch_calls(calls: list, *, causal: bool):
    """One recorded call per layer covering every query position: rows of each pass placed one under another,
    and each pass's keys, values, weights and mask at their absolute key positions."""
    if len(calls) == 1:
        return calls[0]
    last = calls[-1]
    heads = last.weights.shape[1]
    num_queries = sum(call.weights.shape[2] for call in calls)
    # A causal stack's keys are its own positions; cross-attention's are the encoder's, the same in every pass.
    num_keys = num_queries if causal else last.weights.shape[-1]
    weights = last.weights.new_zeros((1, heads, num_queries, num_keys))
    allowed = torch.zeros((num_queries, num_keys), dtype=torch.bool, device=last.weights.device)
    bias = None if last.position_bias is None else last.weights.new_zeros((1, heads, num_queries, num_keys))
    key, value = (_by_position(tensor, num_keys) for tensor in (last.key, last.value))
    row = 0
    for call in calls:
        rows, keys = call.weights.shape[-2:]
        first = row + rows - keys if causal else 0  # a causal pass's keys end at its last query
        if first < 0:
            raise RuntimeError(f"A pass of {rows} queries saw {keys} keys, more than the positions before it.")
        columns = slice(first, first + keys)
        weights[:, :, row : row + rows, columns] = call.weights
        allowed[row : row + rows, columns] = _allowed(call, causal)
        key[:, :, columns], value[:, :, columns] = call.key, call.value
        if bias is not None and call.position_bias is not None:
            bias[:, :, row : row + rows, columns] = call.position_bias[..., -rows:, -keys:].expand(1, heads, rows, keys)
        row += rows
    return dataclasses.replace(
        last,
        query=torch.cat([call.query for call in calls], dim=2),
        key=key,
        value=value,
        weights=weights,
        mask=allowed[None, None],
        position_bias=bias,
    )


def _by_position(tensor: torch.Tensor, num_keys: int) -> torch.Tensor:
    """A zero [1, kv_head, num_keys, head_dim] like ``tensor``, for keys or values placed by position."""
    return tensor.new_zeros((1, tensor.shape[1], num_keys, tensor.shape[-1]))


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
