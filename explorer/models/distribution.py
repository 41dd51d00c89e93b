"""The next token after a prompt: the model's raw logits, run once, and the sampling pipeline on them."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from explorer.checks import given_text
from explorer.compute.sampling import distribution_from_logits
from explorer.data.decoding import NextTokenLogits, TokenDistribution
from explorer.errors import InputError, NotApplicable
from explorer.models import ablation
from explorer.models.architectures import KIND_DECODER, KIND_ENCODER_DECODER
from explorer.models.decoding import special_token_ids
from explorer.models.sites import probe_ids
from explorer.models.tokens import token_labels


def next_token_logits(lm, prompt: str, *, ablate=()) -> NextTokenLogits:
    """One forward pass: the raw logits [vocab] of the token after ``prompt`` (for seq2seq models, the first
    token the decoder writes for the prompt), with every token's readable label. ``ablate`` names heads zeroed
    before their output projection (see ``explorer.models.ablation``)."""
    ids = prompt_ids(lm, prompt)
    ablated = ablation.normalize(lm, ablate)
    with torch.inference_mode(), ablation.ablating(lm, ablated):
        if lm.kind == KIND_ENCODER_DECODER:
            start = torch.tensor([[special_token_ids(lm)["decoder_start"]]], device=lm.device)
            logits = lm.model(input_ids=ids, decoder_input_ids=start, use_cache=False).logits
        else:
            logits = lm.model(**_first_pass_inputs(lm, ids)).logits
    vocab_logits = logits[0, -1].to(device="cpu", dtype=torch.float32).numpy().copy()
    return NextTokenLogits(
        model_name=lm.name,
        prompt=prompt,
        prompt_tokens=token_labels(lm.tokenizer, ids[0]),
        logits=vocab_logits,
        tokens=vocabulary_labels(lm.tokenizer, vocab_logits.shape[0]),
        ablated=ablated,
    )


def appended_positions(lm) -> int:
    """How many positions the model's own first generation pass reads after a decoder's text (XLNet appends the
    token to predict, hidden by its permutation mask, and reads its query stream there: 1); 0 for most models,
    whose prediction is the text's last position. Found from the model's own ``prepare_inputs_for_generation``."""
    if lm.kind != KIND_DECODER:
        return 0
    ids = probe_ids(lm)
    return _first_pass_inputs(lm, ids)["input_ids"].shape[-1] - ids.shape[-1]


def prediction_inputs(lm, ids: torch.Tensor) -> dict[str, torch.Tensor] | None:
    """The tensors of the first pass as generate() prepares it for ``ids`` [1, position], where that pass reads
    positions after the text (XLNet's: the ids and the appended token, its permutation mask and target mapping);
    None where a plain pass over the text ends in the prediction."""
    if not appended_positions(lm):
        return None
    inputs = _first_pass_inputs(lm, ids)
    return {name: value for name, value in inputs.items() if isinstance(value, torch.Tensor)}


def _first_pass_inputs(lm, ids: torch.Tensor) -> dict:
    """The first pass as generate() prepares it, through the model's own ``prepare_inputs_for_generation``: for
    most models the ids and their mask; XLNet's appends the token to predict, hidden from the others by its
    permutation mask (a plain forward over the prompt gives other logits, 0.39 off on a tiny XLNet)."""
    inputs = lm.model.prepare_inputs_for_generation(
        ids, is_first_iteration=True, attention_mask=torch.ones_like(ids), use_cache=False
    )
    return {**inputs, "use_cache": False}


def prompt_ids(lm, prompt: str) -> torch.Tensor:
    """[1, prompt] ids on the model's device, the end of an overlong prompt kept; ``NotApplicable`` for a model
    that predicts no next token (an encoder), ``InputError`` for a prompt without tokens."""
    if lm.kind not in (KIND_DECODER, KIND_ENCODER_DECODER):
        raise NotApplicable(
            f"{lm.name} is an encoder: it has no language-model head, so it predicts no next token. "
            "Load a causal language model (the bundled prose-llama, gpt2, ...)."
        )
    if not given_text(prompt, "prompt").strip():
        raise InputError("Type a prompt to see the distribution of the next token.")
    ids = lm.tokenizer(prompt, return_tensors="pt")["input_ids"]
    if ids.shape[1] == 0:
        raise InputError("The prompt produced no tokens for this model.")
    return ids[:, -lm.max_tokens :].to(lm.device)  # the end of an overlong prompt is what predicts the next token


def next_token_distribution(
    lm,
    prompt: str,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
    ablate=(),
) -> TokenDistribution:
    """The next-token distribution at each stage of transformers' sampling pipeline (see ``TokenDistribution``),
    with the heads ``ablate`` names zeroed."""
    cached = next_token_logits(lm, prompt, ablate=ablate)
    return distribution_from_logits(
        cached.logits, cached.tokens, temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p
    )


@lru_cache(maxsize=8)
def vocabulary_labels(tokenizer, size: int) -> tuple[str, ...]:
    """Readable labels of token ids 0..size-1, computed once per tokenizer (ids past the tokenizer's own
    vocabulary, padding rows of some models' output layer, are labelled by number)."""
    known = min(size, len(tokenizer))
    labels = token_labels(tokenizer, np.arange(known))
    return labels + tuple(f"<id {i}>" for i in range(known, size))
