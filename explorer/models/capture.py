"""``capture``: one forward pass, recorded, turned into the data contract of ``explorer.data``."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch

from explorer.data import STACK_CROSS, STACK_DECODER, STACK_ENCODER, AttentionCapture, AttentionStack
from explorer.errors import InputError
from explorer.models import ablation, recorder
from explorer.models.architectures import KIND_DECODER, KIND_ENCODER_DECODER
from explorer.models.tokens import token_labels


def capture(lm, text: str, *, text_pair: str | None = None, target: str | None = None, ablate=()) -> AttentionCapture:
    """Run ``lm`` on ``text`` once and return its attention, queries and keys for every layer and head.

    ``text_pair`` is a second segment for encoders (BERT's sentence pairs). ``target`` is the decoder's
    text for encoder-decoder models (teacher forcing); without it only the encoder stack is captured.
    Text longer than the model accepts is truncated; ``AttentionCapture.truncated`` says by how much.
    ``ablate`` names heads whose outputs are zeroed before the output projection (see ``explorer.models.ablation``):
    their own weights are still recorded, and every later layer sees the model without them.
    """
    if not text or not text.strip():
        raise InputError("Type some text to see its attention.")
    ablated = ablation.normalize(lm, ablate)
    encoded, truncated = encode_text(lm, text, text_pair)
    decoder_ids = decoder_input_ids(lm, target) if target and lm.kind == KIND_ENCODER_DECODER else None
    return _capture(lm, encoded, decoder_ids, ablated, truncated, _segment_b_start(encoded, text_pair))


def capture_token_ids(lm, token_ids, *, ablate=()) -> AttentionCapture:
    """``capture`` of a sequence of token ids as they are (no tokenizer, no special tokens added): for
    sequences text would not give back, such as the random repeated tokens of the head-type probes."""
    ids = [int(i) for i in token_ids]
    if not ids:
        raise InputError("No token ids to run the model on.")
    if len(ids) > lm.max_tokens:
        raise InputError(f"{len(ids)} tokens are more than {lm.name} accepts ({lm.max_tokens}).")
    input_ids = torch.tensor([ids], dtype=torch.long, device=lm.device)
    encoded = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    return _capture(lm, encoded, None, ablation.normalize(lm, ablate), 0, None)


def _capture(lm, encoded, decoder_ids, ablated, truncated: int, segment_b_start) -> AttentionCapture:
    with torch.inference_mode(), ablation.ablating(lm, ablated), recorder.recording() as calls:
        hidden = _forward(lm, encoded, decoder_ids)
    tokens = token_labels(lm.tokenizer, encoded["input_ids"][0])
    target_tokens = None if decoder_ids is None else token_labels(lm.tokenizer, decoder_ids[0])
    stacks = _assemble_stacks(lm, calls, tokens, target_tokens)
    return AttentionCapture(
        model_name=lm.name,
        tokens=tokens,
        token_ids=encoded["input_ids"][0].cpu().numpy(),
        segment_b_start=segment_b_start,
        stacks=stacks,
        truncated=truncated,
        target_tokens=target_tokens,
        notes=_precision_notes(lm.model),
        hidden_states=_stack_float([state[0] for state in hidden]) if hidden else None,
        device=str(lm.device),
        dtype=str(next(lm.model.parameters()).dtype).removeprefix("torch."),
        ablated=ablated,
    )


def encode_text(lm, text: str, text_pair: str | None):
    """Tokenize, cutting to the model's limit; returns the batch and how many tokens were cut."""
    limit = lm.max_tokens
    encoded = lm.tokenizer(text, text_pair, return_tensors="pt", verbose=False)
    full_length = encoded["input_ids"].shape[1]
    if full_length > limit:  # only an overlong text is tokenized a second time, cut to fit
        encoded = lm.tokenizer(text, text_pair, truncation=True, max_length=limit, return_tensors="pt")
    if encoded["input_ids"].shape[1] == 0:
        raise InputError("The text produced no tokens for this model.")
    return encoded.to(lm.device), full_length - encoded["input_ids"].shape[1]


def decoder_input_ids(lm, target: str) -> torch.Tensor:
    limit = lm.max_tokens
    labels = lm.tokenizer(text_target=target, truncation=True, max_length=limit, return_tensors="pt")["input_ids"]
    # Teacher forcing: the decoder reads the target shifted right behind its start token.
    return lm.model.prepare_decoder_input_ids_from_labels(labels=labels.to(lm.device))


def _forward(lm, encoded, decoder_ids):
    """Run the model once; returns the main stack's hidden states (the model's own ``output_hidden_states``)."""
    inputs = {k: v for k, v in encoded.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
    if lm.kind == KIND_ENCODER_DECODER:
        inputs = _without(inputs, "token_type_ids")
        if decoder_ids is None:
            return lm.model.get_encoder()(**inputs, output_hidden_states=True).hidden_states
        out = lm.model(**inputs, decoder_input_ids=decoder_ids, use_cache=False, output_hidden_states=True)
        return out.encoder_hidden_states
    if lm.kind == KIND_DECODER:
        inputs = _without(inputs, "token_type_ids")
        return lm.model(**inputs, use_cache=False, output_hidden_states=True).hidden_states
    return lm.model(**inputs, output_hidden_states=True).hidden_states


def _without(inputs: dict, key: str) -> dict:
    return {k: v for k, v in inputs.items() if k != key}


def _segment_b_start(encoded, text_pair: str | None) -> int | None:
    if text_pair is None:
        return None
    sequence_ids = encoded.sequence_ids(0)
    return next((i for i, s in enumerate(sequence_ids) if s == 1), None)


def _assemble_stacks(lm, calls, tokens, target_tokens) -> dict[str, AttentionStack]:
    by_stack: dict[str, list] = defaultdict(list)
    for call in calls:
        by_stack[lm.stack_of_module.get(id(call.module), _default_stack(lm))].append(call)
    token_axes = {
        STACK_ENCODER: (tokens, tokens),
        STACK_DECODER: (target_tokens or tokens, target_tokens or tokens),
        STACK_CROSS: (target_tokens, tokens),
    }
    return {name: _stack(stack_calls, *token_axes[name]) for name, stack_calls in by_stack.items()}


def _default_stack(lm) -> str:
    return STACK_DECODER if lm.kind == KIND_DECODER else STACK_ENCODER


def _stack(calls, query_tokens, key_tokens) -> AttentionStack:
    num_heads = calls[0].query.shape[1]
    kv_head_of_query = np.arange(num_heads) // (num_heads // calls[0].key.shape[1])
    layer_masks = np.stack([_allowed(call) for call in calls])
    same_mask = bool((layer_masks == layer_masks[0]).all())
    return AttentionStack(
        query_tokens=tuple(query_tokens),
        key_tokens=tuple(key_tokens),
        attentions=_stack_float([call.weights[0] for call in calls]),
        queries=_stack_float([call.query[0] for call in calls]),
        keys=_stack_float([call.key[0][kv_head_of_query] for call in calls]),
        values=_stack_float([call.value[0][kv_head_of_query] for call in calls]),
        scale=np.array([call.scaling for call in calls], dtype=np.float32),
        position_bias=_position_bias(calls),
        mask=layer_masks.any(axis=0),
        layer_mask=None if same_mask else layer_masks,
        softcap=_softcap(calls),
        kv_head_of_query=kv_head_of_query,
    )


def _stack_float(tensors) -> np.ndarray:
    """[layer, ...] float32 on the CPU. NumPy allocates large arrays with huge-page advice, which makes
    filling fresh memory several times cheaper than ``torch.stack`` (measured in bench/). On a GPU the layers
    are stacked and converted there, then copied to the host at once: a copy per layer waits for the device
    each time."""
    if tensors[0].device.type != "cpu":
        return torch.stack([tensor.to(torch.float32) for tensor in tensors]).cpu().numpy()
    stacked = np.empty((len(tensors), *tensors[0].shape), dtype=np.float32)
    for layer, tensor in enumerate(tensors):
        np.copyto(stacked[layer], tensor.to(device="cpu", dtype=torch.float32).numpy())
    return stacked


def _allowed(call) -> np.ndarray:
    """[query, key] bool: where this call's mask lets a query attend."""
    num_queries, num_keys = call.weights.shape[-2:]
    if call.mask is None:
        full = np.ones((num_queries, num_keys), dtype=bool)
        # An unpadded causal call may get no mask: causality is then implicit in the kernel.
        causal = getattr(call.module, "is_causal", False) and num_queries == num_keys
        return np.tril(full) if causal else full
    mask = call.mask[0, 0]
    if mask.dtype != torch.bool:
        mask = mask > torch.finfo(mask.dtype).min / 2
    return mask.cpu().numpy()[-num_queries:, -num_keys:].copy()


def _position_bias(calls) -> np.ndarray | None:
    if all(call.position_bias is None for call in calls):
        return None
    shape = calls[0].weights.shape[1:]
    biases = [
        torch.zeros(shape) if call.position_bias is None else call.position_bias[0].expand(shape) for call in calls
    ]
    return _stack_float([bias.float().cpu() for bias in biases])


def _softcap(calls) -> np.ndarray | None:
    caps = [call.softcap for call in calls]
    if all(cap is None for cap in caps):
        return None
    return np.array([np.inf if cap is None else cap for cap in caps], dtype=np.float32)


def _precision_notes(model) -> tuple[str, ...]:
    dtype = next(model.parameters()).dtype
    if dtype == torch.float32:
        return ()
    return (
        f"The model runs in {str(dtype).removeprefix('torch.')}: its softmax rows sum to 1 only to about 1e-3. "
        "Values shown are converted to float32.",
    )
