"""The logit lens (nostalgebraist, 2020): read every layer's residual stream through the model's own head.

Decoders and encoder-decoders (the decoder) are read through their language-model head; an encoder through
the masked-LM head its checkpoint carries (loaded once, beside the encoder), where a reading is the model's
guess of the token at that position.

The residual stream is read where the module graph shows it (``explorer.models.sites``): at the input of each
layer, and at the output of the last. Each is then passed through what the model itself does to its last
layer's output: the modules between that layer and the head (the final norm; OPT-350m's ``project_out``), the
head (``get_output_embeddings``), and what the forward does around the head in plain code, measured in the same
pass from the head's own input and output against the model's logits: a constant factor before it (T5's
rescaling), then a factor (Cohere's ``logit_scale``, Granite's ``logits_scaling``), a bias (BART's
``final_logits_bias``) or the config's final softcap (Gemma) after it. The last layer's reading must equal the
model's own log-probabilities; where it does not, the lens says it does not apply rather than show numbers.

The hooks (on the layers and the head) are registered once per module and do nothing unless a lens call of this
thread is collecting (a context variable), so concurrent calls on the shared model never see each other's.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
import torch
from transformers import AutoModelForMaskedLM

from explorer.checks import given_text
from explorer.data import STACK_DECODER, STACK_ENCODER
from explorer.data.attention import TOLERANCE
from explorer.data.lens import LogitLens
from explorer.errors import InputError, NotApplicable
from explorer.models.architectures import KIND_DECODER, KIND_ENCODER, KIND_ENCODER_DECODER
from explorer.models.capture import decoder_input_ids, dtype_name, encode_text
from explorer.models.distribution import appended_positions, prediction_inputs
from explorer.models.sites import first_tensor, layer_input, layer_streams, probe_ids, stack_sites
from explorer.models.tokens import token_labels

POSITIONS_PER_CHUNK = 128  # positions read through the head at once: [positions, vocabulary] floats each
# What a lens call of this context collects: {id(module): [(input, output) of each call]}.
_collecting_calls: ContextVar[dict | None] = ContextVar("explorer_lens_calls", default=None)
# Held weakly, by the modules themselves: an id of a model since freed may be reused by the next one loaded (its
# modules then went unhooked), and a name may be loaded again in another dtype, on another device or retrained.
_hooked: weakref.WeakSet[torch.nn.Module] = weakref.WeakSet()
_heads: weakref.WeakKeyDictionary[torch.nn.Module, torch.nn.Module | str] = weakref.WeakKeyDictionary()
_hook_lock = threading.Lock()
# Final softcaps a forward applies to its logits in plain code, by the config attribute that holds the cap.
SOFTCAP_ATTRIBUTES = ("final_logit_softcapping", "logits_soft_cap")


def logit_lens(lm, text: str, *, top_n: int = 5, target: str | None = None) -> LogitLens:
    """Every layer's next-token prediction for every position of ``text`` (for encoder-decoder models, of the
    decoder reading ``target`` after the encoder read ``text``; for an encoder with a masked-LM head in its
    checkpoint, its guess of the token at each position)."""
    _check(lm, text, top_n, target)
    encoded, truncated = encode_text(lm, text, None)
    decoder_ids = decoder_input_ids(lm, target) if lm.kind == KIND_ENCODER_DECODER else None
    residual, read, own, stream = _residual(lm, encoded, decoder_ids)
    with torch.inference_mode():
        _check_last_layer(lm, read, residual[-1], own)
        final_ids = own.argmax(dim=-1)  # the model's own prediction
        readings = [_read_layer(read, state, final_ids, top_n) for state in residual]
    top_ids, top_logprobs, final_logprobs, final_ranks = (np.stack(parts) for parts in zip(*readings, strict=True))
    positions = decoder_ids[0] if decoder_ids is not None else encoded["input_ids"][0]
    read_after = positions[positions.shape[0] - final_ids.shape[0] :]  # XLNet predicts once, after the last token
    return LogitLens(
        model_name=lm.name,
        tokens=token_labels(lm.tokenizer, read_after.tolist()),
        top_ids=top_ids,
        top_tokens=tuple(tuple(token_labels(lm.tokenizer, row) for row in layer) for layer in top_ids.tolist()),
        top_logprobs=top_logprobs,
        final_ids=final_ids.cpu().numpy(),
        final_tokens=token_labels(lm.tokenizer, final_ids.tolist()),
        final_logprobs=final_logprobs,
        final_ranks=final_ranks,
        truncated=truncated,
        masked=lm.kind == KIND_ENCODER,
        read_at=_read_at(lm, stream),
    )


def _read_at(lm, stream: int) -> str:
    """Where the lens reads, in the visitor's words, where the model predicts after the text (XLNet)."""
    if lm.kind != KIND_DECODER or not appended_positions(lm):
        return ""
    which = "the stream its head reads" + (
        f" (stream {stream + 1} of those its layers carry: a query stream, with a row only where it predicts)"
        if stream
        else ""
    )
    return (
        f"{lm.name} predicts the next token at a token its generation appends after the text, hidden from the text: "
        f"the lens reads {which} there after every layer, one row, labelled with the text's last token, after "
        "which it predicts."
    )


def _residual(lm, encoded, decoder_ids):
    """The stack's residual stream ([position, hidden] at the input of each layer and the output of the last, the
    rows the head reads), how to read one (the model's own tail, head and logit arithmetic) and the model's own
    logits [position, vocabulary], and which of the streams its layers carry the head reads (0 but for XLNet's)."""
    stack = STACK_ENCODER if lm.kind == KIND_ENCODER else STACK_DECODER
    sites = stack_sites(lm, stack)
    head = masked_lm_head(lm) if lm.kind == KIND_ENCODER else _output_embeddings(lm)
    with torch.inference_mode(), _collecting([*sites.layers, head]) as calls:
        outputs = _forward(lm, encoded, decoder_ids)
    tail = final_norm(lm)
    with torch.inference_mode():
        if lm.kind == KIND_ENCODER:  # its head runs beside the loaded encoder: nothing in between to measure
            positions, streams = _positions(encoded, decoder_ids), _layer_streams(sites, calls)
            residual = [stream[:positions] for stream in streams]
            return residual, lambda state: head(tail(state)), head(outputs.last_hidden_state[0]), 0
        if not calls[id(head)]:
            raise InputError(_not_applicable(lm, "its forward does not call its output embedding as a module"))
        (head_input, head_output, _), own = calls[id(head)][0], outputs.logits[0]
        positions = min(_positions(encoded, decoder_ids), own.shape[0])  # XLNet's head reads one target
        read, scores = _first_rows(head_input, positions), _first_rows(head_output, positions)
        stream = _stream_read(lm, sites, calls, tail, read)
        streams = _layer_streams(sites, calls, stream)
        rows = _rows_read(lm, tail, streams[-1], read, positions)
        residual = [stream[rows] for stream in streams]
        before = _before_head(lm, tail(residual[-1]), read)
        after = _after_head(lm, scores, own)
    return residual, lambda state: after(head(tail(state) * before)), own, stream


def _positions(encoded, decoder_ids) -> int:
    return (decoder_ids if decoder_ids is not None else encoded["input_ids"]).shape[1]


def _layer_streams(sites, calls: dict, stream: int = 0) -> list[torch.Tensor]:
    """[row, hidden] the whole stream of the text at the input of each layer (in the order called: ALBERT calls one
    module L times) and at the output of the last: the positions (Longformer's padded to a window multiple at the
    end), ProphetNet's predicting streams after its main stream; XLNet's layers see it time-first. ``stream``: which
    of the streams a layer carries (XLNet's content stream 0, its query stream 1, see ``layer_streams``)."""
    seen: dict[int, int] = {}
    states = []
    for layer in sites.layers:
        occurrence = seen[id(layer)] = seen.get(id(layer), -1) + 1
        states.append(calls[id(layer)][occurrence][2][stream][0])
    states.append(calls[id(sites.layers[-1])][-1][2][stream][1])
    return [state[:, 0] if sites.time_first else state[0] for state in states]


def _stream_read(lm, sites, calls: dict, tail, read: torch.Tensor) -> int:
    """Which of the streams the last layer returns the head reads, through the tail: the first whose rows are what
    the head read (XLNet's query stream at the position it predicts), found by value; 0 where none is."""
    last = calls[id(sites.layers[-1])][-1][2]
    for index, (_, output) in enumerate(last):
        rows = output[:, 0] if sites.time_first else output[0]
        if rows.shape[0] >= read.shape[0] and _proportional(tail(rows[: read.shape[0]]), read, lm):
            return index
    return 0


def _first_rows(tensor: torch.Tensor, positions: int) -> torch.Tensor:
    """The first ``positions`` rows of what the head read or returned, [position, hidden or vocabulary]: the rows
    the model's logits are (ProphetNet's head reads its predicting streams, [batch, stream, position, hidden], and
    its logits are the first stream's)."""
    return tensor.reshape(-1, tensor.shape[-1])[:positions]


def _rows_read(lm, tail, last: torch.Tensor, read: torch.Tensor, positions: int) -> slice:
    """The rows of the last layer's output whose tail output the head reads for the model's logits: the first
    ``positions`` for most models; ProphetNet's first predicting stream, after its main stream. Found by value."""
    blocks = (slice(start, start + positions) for start in range(0, last.shape[0] - positions + 1, positions))
    first = slice(0, positions)
    return next((rows for rows in blocks if _proportional(tail(last[rows]), read, lm)), first)


def _proportional(before: torch.Tensor, after: torch.Tensor, lm) -> bool:
    return _close(before, after, lm) or _factor(before, after, lm) is not None


def _output_embeddings(lm) -> torch.nn.Module:
    head = lm.model.get_output_embeddings()
    if head is None:
        raise InputError(
            f"The logit lens does not apply to {lm.name} ({type(lm.model).__name__}): it has no output embedding "
            "that turns a hidden state into scores over the vocabulary."
        )
    return head


def _before_head(lm, normed: torch.Tensor, head_input: torch.Tensor) -> float:
    """The constant the forward multiplies the tail's output by before the head (T5's d_model ** -0.5; 1.0 for
    most), measured from what the head read."""
    if _close(normed, head_input, lm):
        return 1.0
    factor = _factor(normed, head_input, lm)
    if factor is None:
        raise InputError(_not_applicable(lm, "what its head reads is not its final norm's output"))
    return factor


def _after_head(lm, scores: torch.Tensor, logits: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """What the forward does to the head's scores in plain code, measured against its logits: nothing, a factor
    (Cohere, Granite), the config's final softcap (Gemma) or a bias over the vocabulary (BART)."""
    if _close(scores, logits, lm):
        return lambda z: z
    factor = _factor(scores, logits, lm)
    if factor is not None:
        return lambda z: z * factor
    config = lm.model.config.get_text_config()
    for cap in filter(None, (getattr(config, name, None) for name in SOFTCAP_ATTRIBUTES)):
        if _close(torch.tanh(scores / cap) * cap, logits, lm):
            return lambda z, cap=cap: torch.tanh(z / cap) * cap
    bias = logits[0] - scores[0]
    if _close(scores + bias, logits, lm):
        return lambda z: z + bias
    raise InputError(_not_applicable(lm, "its logits are not its head's scores, scaled, capped or shifted"))


def _factor(before: torch.Tensor, after: torch.Tensor, lm) -> float | None:
    """c with ``after`` = c · ``before``, or None."""
    if before.shape != after.shape:
        return None
    before, after = before.double(), after.double()
    factor = float((before * after).sum() / (before * before).sum().clamp_min(1e-300))
    return factor if _close(before * factor, after, lm) else None


def _close(a: torch.Tensor, b: torch.Tensor, lm) -> bool:
    """Equal up to the rounding of the model's dtype, relative to the larger value."""
    scale = max(float(b.abs().max()), 1e-12)
    return a.shape == b.shape and float((a.double() - b.double()).abs().max()) <= _relative_tolerance(lm) * scale


def _relative_tolerance(lm) -> float:
    return TOLERANCE[dtype_name(lm.model)] / 10


def _check_last_layer(lm, read, last: torch.Tensor, own: torch.Tensor) -> None:
    """The last layer read through the lens must be the model's own log-probabilities."""
    worst = 0.0
    for start in range(0, last.shape[0], POSITIONS_PER_CHUNK):
        chunk = slice(start, start + POSITIONS_PER_CHUNK)
        mine = torch.log_softmax(read(last[chunk]).float(), dim=-1)
        worst = max(worst, float((mine - torch.log_softmax(own[chunk].float(), dim=-1)).abs().max()))
    if worst > TOLERANCE[dtype_name(lm.model)]:
        raise InputError(
            _not_applicable(
                lm,
                f"its last layer read through its own final norm and head is {worst:.1e} off its own "
                "log-probabilities, so something between them is not what the lens repeats",
            )
        )


def _not_applicable(lm, why: str) -> str:
    return f"The logit lens does not apply to {lm.name} ({type(lm.model).__name__}): {why}."


def masked_lm_head(lm) -> torch.nn.Module:
    """The masked-LM head in the encoder's checkpoint, loaded once per loaded model (the encoder itself is loaded
    without it); ``InputError`` saying why when the family or the checkpoint has none."""
    with _hook_lock:
        if lm.model not in _heads:
            _heads[lm.model] = _load_masked_lm_head(lm)
    head = _heads[lm.model]
    if isinstance(head, NotApplicable):
        raise NotApplicable(str(head))
    if isinstance(head, str):
        raise InputError(head)
    return head


def _load_masked_lm_head(lm) -> torch.nn.Module | str:
    """The modules ``AutoModelForMaskedLM`` adds to the encoder, in the order its forward calls them; checked to
    give the masked-LM model's own logits from the encoder's last hidden state. A model whose layers run over a latent
    array (Perceiver) has no such head: ``NotApplicable`` saying so."""
    if getattr(lm, "latents", 0):
        return NotApplicable(
            f"{lm.name} ({type(lm.model).__name__}) predicts its masked tokens from {lm.latents} positions of its own "
            "(a latent array), through a decoder whose queries attend to them, not from each token's last hidden "
            "state: no head reads a token's hidden state, so its predictions cannot be read token by token or layer "
            "by layer."
        )
    source = lm.model.config._name_or_path  # the folder the encoder was loaded from (a Hub snapshot, or a path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the unused pooler and missing head weights are reported below
            full, info = AutoModelForMaskedLM.from_pretrained(
                source, output_loading_info=True, trust_remote_code=False, local_files_only=True
            )
    except (ValueError, OSError) as error:
        return f"{lm.name} ({lm.model.config.model_type}) has no masked-LM head to read its predictions ({error})."
    full.eval()
    base = full.base_model
    prefix = f"{full.base_model_prefix}."
    if any(not key.startswith(prefix) for key in info["missing_keys"]):
        return (
            f"Reading an encoder's predictions takes its masked-LM head, and {lm.name}'s checkpoint has none "
            "(it was saved as an encoder only, as sentence-embedding models are). Pick a model with its masked-LM "
            "head (e.g. bert-base-uncased), a decoder or an encoder-decoder."
        )
    head = _head_in_call_order(lm, full, base)
    if isinstance(head, str):
        return head
    return head.to(device=lm.device, dtype=next(lm.model.parameters()).dtype).eval()


def _head_in_call_order(lm, full, base) -> torch.nn.Sequential | str:
    order: list[torch.nn.Module] = []
    handles = [
        child.register_forward_pre_hook(lambda module, args: order.append(module))
        for child in full.children()
        if child is not base
    ]
    ids = probe_ids(lm, "Hello world").cpu()
    try:
        with torch.inference_mode():
            logits = full(input_ids=ids).logits
    finally:
        for handle in handles:
            handle.remove()
    head = torch.nn.Sequential(*dict.fromkeys(order))
    with torch.inference_mode():
        mine = head(base(input_ids=ids).last_hidden_state)
    if mine.shape != logits.shape or not torch.allclose(mine, logits, atol=1e-5, rtol=1e-4):
        return (
            f"{lm.name}'s masked-LM model ({type(full).__name__}) does more than apply its head to the encoder's "
            "last hidden state, so the lens cannot read its predictions layer by layer."
        )
    return head


def _check(lm, text: str, top_n: int, target: str | None) -> None:
    if not given_text(text).strip():
        raise InputError("Type some text to read through the lens.")
    if lm.kind == KIND_ENCODER_DECODER and not given_text(target, "target").strip():
        raise InputError("An encoder-decoder predicts with its decoder: give the decoder's text (the target) too.")
    if isinstance(top_n, bool) or not isinstance(top_n, int) or not 1 <= top_n <= 50:
        raise InputError(f"top_n must be a whole number from 1 to 50 (got {top_n!r}).")


def final_norm(lm) -> torch.nn.Module:
    """What the model passes its last layer's output through before the head, found in the module graph: the
    final norm (and OPT-350m's ``project_out``; nothing for a post-norm encoder)."""
    stack = STACK_ENCODER if lm.kind == KIND_ENCODER else STACK_DECODER
    return torch.nn.Sequential(*stack_sites(lm, stack).tail)


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
    """The model's own pass over the text: for a decoder whose generation reads positions after the text (XLNet),
    the first pass as generate() prepares it, so that the last layer's reading is its prediction."""
    inputs = {key: value for key, value in encoded.items() if key != "token_type_ids" or lm.kind == KIND_ENCODER}
    if decoder_ids is None and lm.kind != KIND_ENCODER:
        inputs = prediction_inputs(lm, inputs["input_ids"]) or inputs
    if decoder_ids is not None:
        inputs["decoder_input_ids"] = decoder_ids
    return lm.model(**inputs, use_cache=False) if lm.kind != KIND_ENCODER else lm.model(**inputs)


@contextmanager
def _collecting(modules):
    """Within the block, this thread's calls of ``modules`` record (input, output) under id(module)."""
    for module in modules:
        _hook(module)
    calls: dict[int, list] = {id(module): [] for module in modules}
    token = _collecting_calls.set(calls)
    try:
        yield calls
    finally:
        _collecting_calls.reset(token)


def _hook(module: torch.nn.Module) -> None:
    with _hook_lock:
        if module not in _hooked:
            module.register_forward_hook(_record_call, with_kwargs=True)
            _hooked.add(module)


def _record_call(module, args, kwargs, output) -> None:
    calls = _collecting_calls.get()
    if calls is not None and id(module) in calls:
        calls[id(module)].append((layer_input(args, kwargs), first_tensor(output), layer_streams(args, kwargs, output)))
