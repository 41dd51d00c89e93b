"""``head_ablation_effects``: which heads matter for the next token, one head ablated at a time.

Each head is ablated alone (see ``explorer.models.ablation``) and the next token's log-probabilities read
again. The prompt is the same for every head, so several single-head ablations run as one batch of
identical rows, each row with its own head zeroed: no padding, so each row is the single run (up to the
rounding of batched matrix products).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np
import torch

from explorer.data import STACK_DECODER
from explorer.data.ablation import HeadAblationEffects
from explorer.errors import InputError
from explorer.models import ablation, recorder
from explorer.models.architectures import KIND_ENCODER_DECODER
from explorer.models.capture import dtype_name, own_layer_numbers
from explorer.models.decoding import special_token_ids
from explorer.models.distribution import prediction_inputs, prompt_ids
from explorer.models.tokens import token_labels

ROWS_PER_PASS = 8  # single-head ablations per forward pass: bounds memory to 8 copies of one pass's activations


def head_ablation_effects(
    lm,
    prompt: str,
    *,
    target_token: int | None = None,
    stack: str = STACK_DECODER,
    progress: Callable[[int, int], None] | None = None,
) -> HeadAblationEffects:
    """What ablating each head of ``stack`` alone does to the log-probability of the token after ``prompt``:
    the model's top token, or ``target_token`` (an id). ``stack`` matters only for encoder-decoder models
    ("encoder", "decoder" or "cross"). ``progress(done, total)`` is called as heads are done."""
    ids = prompt_ids(lm, prompt)
    heads = _heads_of(lm, stack)
    baseline = _next_logprobs(lm, ids, [()])[0]
    target = _target(baseline, target_token)
    logprobs, top_ids = np.empty(len(heads), dtype=np.float32), np.empty(len(heads), dtype=np.int64)
    batch_sizes = []  # what ran, for the page to say
    for start in range(0, len(heads), ROWS_PER_PASS):
        rows = [(head,) for head in heads[start : start + ROWS_PER_PASS]]
        found = _next_logprobs(lm, ids, rows)
        batch_sizes.append(len(rows))
        logprobs[start : start + len(rows)] = found[:, target].numpy()
        top_ids[start : start + len(rows)] = found.argmax(dim=-1).numpy()
        if progress is not None:
            progress(start + len(rows), len(heads))
    shape = (heads[-1][1] + 1, heads[-1][2] + 1)
    top_ids = top_ids.reshape(shape)
    return HeadAblationEffects(
        model_name=lm.name,
        prompt=prompt,
        stack=stack,
        target_id=target,
        target_token=token_labels(lm.tokenizer, [target])[0],
        baseline_logprob=float(baseline[target]),
        logprobs=logprobs.reshape(shape),
        top_ids=top_ids,
        top_tokens=tuple(token_labels(lm.tokenizer, row) for row in top_ids),
        dtype=dtype_name(lm.model),
        batch_sizes=tuple(batch_sizes),
        layer_numbers=_own_numbers(lm, stack),
    )


def _own_numbers(lm, stack: str) -> np.ndarray | None:
    """The model's own number of each layer the map counts, where some of its layers have no attention."""
    by_id = {id(module): module for module in lm.model.modules()}
    numbers = own_layer_numbers(lm.model, [by_id[module] for module in ablation.layout(lm).modules[stack]])
    return None if numbers is None else np.asarray(numbers, dtype=np.int64)


def _heads_of(lm, stack: str) -> list[tuple[str, int, int]]:
    """Every (stack, layer, head) of the stack, layer by layer."""
    layout = ablation.layout(lm)
    if stack not in layout.heads:
        raise InputError(f"{lm.name} has no {stack!r} attention stack; it has {', '.join(map(repr, layout.heads))}.")
    counts = layout.heads[stack]
    if len(set(counts)) != 1:
        raise InputError(f"The layers of {lm.name}'s {stack} have different numbers of heads: {counts}.")
    return [(stack, layer, head) for layer, count in enumerate(counts) for head in range(count)]


def _target(baseline: torch.Tensor, target_token: int | None) -> int:
    if target_token is None:
        return int(baseline.argmax())
    vocab = baseline.shape[0]
    if isinstance(target_token, bool) or not hasattr(target_token, "__index__") or not 0 <= target_token < vocab:
        raise InputError(f"target_token must be a token id from 0 to {vocab - 1} (got {target_token!r}).")
    return int(target_token)


def _next_logprobs(lm, ids: torch.Tensor, rows: list[ablation.Ablation]) -> torch.Tensor:
    """[row, vocab] float32 on the CPU: next-token log-probabilities, row ``r`` with ``rows[r]`` ablated."""
    batch = ids.expand(len(rows), -1)
    prepared = prediction_inputs(lm, ids)  # XLNet predicts at a position its first generation pass appends
    with torch.inference_mode(), recorder.ablating(ablation.keep_masks(lm, rows)):
        if lm.kind == KIND_ENCODER_DECODER:
            start = torch.full((len(rows), 1), special_token_ids(lm)["decoder_start"], device=ids.device)
            logits = lm.model(input_ids=batch, decoder_input_ids=start, use_cache=False).logits
        elif prepared is not None:
            rows_of = {name: value.expand(len(rows), *value.shape[1:]) for name, value in prepared.items()}
            logits = lm.model(**rows_of, use_cache=False).logits
        else:
            logits = lm.model(input_ids=batch, use_cache=False, **last_position_only(lm.model)).logits
    return torch.log_softmax(logits[:, -1].to(device="cpu", dtype=torch.float32), dim=-1)


def last_position_only(model) -> dict:
    """Only the last position's logits, where the model allows it (as generate() asks): the others would cost
    a vocabulary-wide product per prompt token and row."""
    return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
