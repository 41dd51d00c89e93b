"""The logit lens (nostalgebraist, 2020): read every layer's residual stream through the model's own head.

Decoders and encoder-decoders (the decoder) are read through their language-model head; an encoder through
the masked-LM head its checkpoint carries (loaded once, beside the encoder), where a reading is the model's
guess of the token at that position.

After the embeddings and after each layer, the residual stream goes through the model's final norm and
unembedding (and whatever the model itself does between them: T5's rescaling, Gemma's logit softcap), giving
the next-token distribution the model would produce if it stopped there. The last layer's reading is the
model's own logits; the tests hold it to that.

The residual stream before the final norm is what the norm receives: transformers' last
``output_hidden_states`` entry has the norm already applied for most models, so the last layer is read from a
hook on the norm's input. The hook is registered once per model and does nothing unless a lens call of this
thread is collecting (a context variable), so concurrent calls on the shared model never see each other's.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
import torch
from transformers import AutoModelForMaskedLM

from explorer.checks import given_text
from explorer.data.lens import LogitLens
from explorer.errors import InputError
from explorer.models.architectures import KIND_ENCODER, KIND_ENCODER_DECODER, quirks_for
from explorer.models.capture import decoder_input_ids, encode_text
from explorer.models.tokens import token_labels

POSITIONS_PER_CHUNK = 128  # positions read through the head at once: [positions, vocabulary] floats each
_norm_inputs: ContextVar[list | None] = ContextVar("explorer_lens_norm_inputs", default=None)
# Held weakly, by the modules themselves: an id of a model since freed may be reused by the next one loaded (its
# norm then went unhooked), and a name may be loaded again in another dtype, on another device or retrained.
_hooked: weakref.WeakSet[torch.nn.Module] = weakref.WeakSet()
_heads: weakref.WeakKeyDictionary[torch.nn.Module, torch.nn.Module | str] = weakref.WeakKeyDictionary()
_hook_lock = threading.Lock()


def logit_lens(lm, text: str, *, top_n: int = 5, target: str | None = None) -> LogitLens:
    """Every layer's next-token prediction for every position of ``text`` (for encoder-decoder models, of the
    decoder reading ``target`` after the encoder read ``text``; for an encoder with a masked-LM head in its
    checkpoint, its guess of the token at each position)."""
    _check(lm, text, top_n, target)
    encoded, truncated = encode_text(lm, text, None)
    decoder_ids = decoder_input_ids(lm, target) if lm.kind == KIND_ENCODER_DECODER else None
    residual, read = _encoder_residual(lm, encoded) if lm.kind == KIND_ENCODER else _residual(lm, encoded, decoder_ids)
    with torch.inference_mode():
        final_ids = read(residual[-1][0]).argmax(dim=-1)  # the last reading is the model's own logits
        readings = [_read_layer(read, state[0], final_ids, top_n) for state in residual]
    top_ids, top_logprobs, final_logprobs, final_ranks = (np.stack(parts) for parts in zip(*readings, strict=True))
    positions = decoder_ids[0] if decoder_ids is not None else encoded["input_ids"][0]
    return LogitLens(
        model_name=lm.name,
        tokens=token_labels(lm.tokenizer, positions.tolist()),
        top_ids=top_ids,
        top_tokens=tuple(tuple(token_labels(lm.tokenizer, row) for row in layer) for layer in top_ids.tolist()),
        top_logprobs=top_logprobs,
        final_ids=final_ids.cpu().numpy(),
        final_tokens=token_labels(lm.tokenizer, final_ids.tolist()),
        final_logprobs=final_logprobs,
        final_ranks=final_ranks,
        truncated=truncated,
        masked=lm.kind == KIND_ENCODER,
    )


def _residual(lm, encoded, decoder_ids):
    """A decoder's residual stream after the embeddings and after each layer (the last before the final norm),
    and how to read one: the final norm, then the unembedding."""
    norm = final_norm(lm.model)
    with torch.inference_mode(), _collecting_norm_input(norm) as norm_input:
        outputs = _forward(lm, encoded, decoder_ids)
    hidden = outputs.decoder_hidden_states if decoder_ids is not None else outputs.hidden_states
    return [*hidden[:-1], norm_input[-1]], lambda state: unembed(lm.model, norm(state))


def _encoder_residual(lm, encoded):
    """An encoder's hidden states (each already normed: BERT-style layers end with their own norm) and its
    masked-LM head: the reading at a position is the model's guess of the token there, not of the next one."""
    head = masked_lm_head(lm)
    with torch.inference_mode():
        outputs = _forward(lm, encoded, None)
    return list(outputs.hidden_states), head


def masked_lm_head(lm) -> torch.nn.Module:
    """The masked-LM head in the encoder's checkpoint, loaded once per loaded model (the encoder itself is loaded
    without it); ``InputError`` saying why when the family or the checkpoint has none."""
    with _hook_lock:
        if lm.model not in _heads:
            _heads[lm.model] = _load_masked_lm_head(lm)
    head = _heads[lm.model]
    if isinstance(head, str):
        raise InputError(head)
    return head


def _load_masked_lm_head(lm) -> torch.nn.Module | str:
    path = quirks_for(lm.model.config.model_type).masked_lm_head
    if path is None:
        return f"No masked-LM head is known for {lm.name} ({lm.model.config.model_type}) to read its predictions."
    source = lm.model.config._name_or_path  # the folder the encoder was loaded from (a Hub snapshot, or a path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unused pooler and missing head weights are reported below
        full, info = AutoModelForMaskedLM.from_pretrained(
            source, output_loading_info=True, trust_remote_code=False, local_files_only=True
        )
    if any(key.startswith(f"{path}.") for key in info["missing_keys"]):
        return (
            f"Reading an encoder's predictions takes its masked-LM head, and {lm.name}'s checkpoint has none "
            "(it was saved as an encoder only, as sentence-embedding models are). Pick a model with its masked-LM "
            "head (e.g. bert-base-uncased), a decoder or an encoder-decoder."
        )
    head = full.get_submodule(path)
    return head.to(device=lm.device, dtype=next(lm.model.parameters()).dtype).eval()


def _check(lm, text: str, top_n: int, target: str | None) -> None:
    if not given_text(text).strip():
        raise InputError("Type some text to read through the lens.")
    if lm.kind == KIND_ENCODER_DECODER and not given_text(target, "target").strip():
        raise InputError("An encoder-decoder predicts with its decoder: give the decoder's text (the target) too.")
    if isinstance(top_n, bool) or not isinstance(top_n, int) or not 1 <= top_n <= 50:
        raise InputError(f"top_n must be a whole number from 1 to 50 (got {top_n!r}).")


def final_norm(model) -> torch.nn.Module:
    """The norm before the unembedding, found through the architecture table."""
    path = quirks_for(model.config.model_type).final_norm
    module = model
    for name in path.split("."):
        module = getattr(module, name, None)
        if module is None:
            raise InputError(
                f"The logit lens does not know where {type(model).__name__}'s final norm is (looked for {path})."
            )
    return module


def unembed(model, normed: torch.Tensor) -> torch.Tensor:
    """What the model does after its final norm: the output embedding, with T5's rescaling of tied embeddings
    and Gemma's final logit softcap where the config asks for them."""
    config = model.config
    if getattr(config, "scale_decoder_outputs", False):
        normed = normed * (config.d_model**-0.5)
    logits = model.get_output_embeddings()(normed)
    cap = getattr(config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def _read_layer(read, state: torch.Tensor, final_ids: torch.Tensor, top_n: int):
    """One layer's reading, a chunk of positions at a time: [position, vocabulary] scores are large."""
    parts = []
    for start in range(0, state.shape[0], POSITIONS_PER_CHUNK):
        chunk = slice(start, start + POSITIONS_PER_CHUNK)
        logprobs = torch.log_softmax(read(state[chunk]).float(), dim=-1)
        top = logprobs.topk(top_n, dim=-1)
        final = logprobs.gather(-1, final_ids[chunk, None])
        ranks = (logprobs > final).sum(dim=-1)
        parts.append((top.indices, top.values, final[:, 0], ranks))
    return tuple(torch.cat(column).cpu().numpy() for column in zip(*parts, strict=True))


def _forward(lm, encoded, decoder_ids):
    inputs = {key: value for key, value in encoded.items() if key != "token_type_ids" or lm.kind == KIND_ENCODER}
    if decoder_ids is not None:
        inputs["decoder_input_ids"] = decoder_ids
    return lm.model(**inputs, output_hidden_states=True, use_cache=False)


@contextmanager
def _collecting_norm_input(norm: torch.nn.Module):
    """Within the block, this thread's calls of ``norm`` record their input."""
    _hook(norm)
    inputs: list[torch.Tensor] = []
    token = _norm_inputs.set(inputs)
    try:
        yield inputs
    finally:
        _norm_inputs.reset(token)


def _hook(norm: torch.nn.Module) -> None:
    with _hook_lock:
        if norm not in _hooked:
            norm.register_forward_pre_hook(_record_norm_input)
            _hooked.add(norm)


def _record_norm_input(module, args) -> None:
    inputs = _norm_inputs.get()
    if inputs is not None:
        inputs.append(args[0])
