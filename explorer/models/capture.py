"""``capture``: one forward pass, recorded, turned into the data contract of ``explorer.data``."""

from __future__ import annotations

import inspect
import itertools
from collections import defaultdict

import numpy as np
import torch

from explorer.checks import given_text
from explorer.data import STACK_CROSS, STACK_DECODER, STACK_ENCODER, AttentionCapture, AttentionStack
from explorer.data.attention import TOLERANCE, WEIGHTS_ONLY_NOTE
from explorer.errors import InputError, NotApplicable
from explorer.models import ablation, recorder
from explorer.models.architectures import (
    KIND_DECODER,
    KIND_ENCODER,
    KIND_ENCODER_DECODER,
    attention_outputs,
    module_quirks,
    stateful_layer_types,
)
from explorer.models.local_attention import as_query_key_maps, global_local_as_query_key
from explorer.models.tokens import token_labels
from explorer.models.transfer import to_host


def capture(lm, text: str, *, text_pair: str | None = None, target: str | None = None, ablate=()) -> AttentionCapture:
    """Run ``lm`` on ``text`` once and return its attention, queries and keys for every layer and head.

    ``text_pair`` is a second segment for encoders (BERT's sentence pairs). ``target`` is the decoder's
    text for encoder-decoder models (teacher forcing); without it only the encoder stack is captured.
    Text longer than the model accepts is truncated; ``AttentionCapture.truncated`` says by how much.
    ``ablate`` names heads whose outputs are zeroed before the output projection (see ``explorer.models.ablation``):
    their own weights are still recorded, and every later layer sees the model without them.
    """
    given_text(text_pair, "second text")  # None passes: no second text
    given_text(target, "target")
    if not given_text(text).strip():
        raise InputError("Type some text to see its attention.")
    ablated = ablation.normalize(lm, ablate)
    encoded, truncated = _encode_on_host(lm, text, text_pair)
    decoder_ids = _decoder_ids_on_host(lm, target) if target and lm.kind == KIND_ENCODER_DECODER else None
    return _capture(lm, encoded, decoder_ids, ablated, truncated, _segment_b_start(encoded, text_pair))


def capture_token_ids(lm, token_ids, *, ablate=()) -> AttentionCapture:
    """``capture`` of a sequence of token ids as they are (no tokenizer, no special tokens added): for
    sequences text would not give back, such as the random repeated tokens of the head-type probes."""
    ids = [int(i) for i in token_ids]
    if not ids:
        raise InputError("No token ids to run the model on.")
    if len(ids) > lm.max_tokens:
        raise InputError(f"{len(ids)} tokens are more than {lm.name} accepts ({lm.max_tokens}).")
    input_ids = torch.tensor([ids], dtype=torch.long)
    encoded = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    return _capture(lm, encoded, None, ablation.normalize(lm, ablate), 0, None)


def _capture(lm, encoded, decoder_ids, ablated, truncated: int, segment_b_start) -> AttentionCapture:
    """The capture of ids held on the host (``encoded``, ``decoder_ids``); ``_forward`` sends them to the model."""
    source = attention_source(lm)
    if source == recorder.NO_ATTENTION:
        raise NotApplicable(no_attention(lm))
    with torch.inference_mode(), ablation.ablating(lm, ablated), recorder.recording() as calls:
        out = _forward(lm, encoded, decoder_ids, output_attentions=source == recorder.RETURNED)
    # Labels are read from the ids on the host: on a GPU they are made while the forward pass still runs.
    tokens = token_labels(lm.tokenizer, encoded["input_ids"][0])
    target_tokens = None if decoder_ids is None else token_labels(lm.tokenizer, decoder_ids[0])
    hidden = _main_hidden_states(lm, out, decoder_ids)
    if source == recorder.RETURNED:
        stacks, hidden_states, notes = _assemble_returned(lm, out, decoder_ids, hidden, tokens, target_tokens)
        notes = (WEIGHTS_ONLY_NOTE, *notes)
    else:
        stacks, hidden_states, left_out = _assemble(lm, calls, hidden, tokens, target_tokens)
        notes = _quirk_notes(calls) + left_out
    notes += _stream_notes(lm.model.config, stacks) + lm.notes
    return AttentionCapture(
        model_name=lm.name,
        tokens=tokens,
        token_ids=encoded["input_ids"][0].numpy(),
        segment_b_start=segment_b_start,
        stacks=stacks,
        truncated=truncated,
        target_tokens=target_tokens,
        notes=notes + _precision_notes(lm.model),
        hidden_states=hidden_states,
        device=str(next(lm.model.parameters()).device),  # "cuda:0" where lm.device may say "cuda"
        dtype=dtype_name(lm.model),
        ablated=ablated,
    )


def _quirk_notes(calls) -> tuple[str, ...]:
    """What the recorded modules' families say of their attention beyond q, k and the weights, once each."""
    notes = {module_quirks(call.module).sinks_after_weights for call in calls}
    return tuple(sorted(note for note in notes if note))


def _stream_notes(config, stacks) -> tuple[str, ...]:
    """What a cross attention with n-gram streams (ProphetNet) leaves out, said once."""
    ngram = getattr(config, "ngram", None) or 0
    if not ngram or STACK_CROSS not in stacks:
        return ()
    return (
        f"The cross attention shown is the decoder's main stream (its own positions). Its {ngram} n-gram streams, "
        "which predict tokens further ahead in rows of their own, are left out.",
    )


attention_source = recorder.attention_source  # where the pages and decoding ask it


def no_attention(lm) -> str:
    """The sentence for a model with no attention layers (decided at load: no attention call, no per-head map, no
    heads in its config), whatever asked for its attention."""
    decodes = " Its decoding pages work as for any model." if lm.kind != KIND_ENCODER else ""
    return (
        f"{_named(lm)} has no attention layers: its layers mix the tokens another way (a state space, a recurrence "
        "or a Fourier transform), so it computes no attention weights over the tokens, and attention views do not "
        f"apply to it.{decodes}"
    )


def without_attention_layers(lm) -> str | None:
    """Why ``lm`` has no attention layer where its config's layer types hold none (a hybrid built of its linear or
    state-space layers alone: an empty ``output_attentions`` is then the model's honest answer), else None."""
    types = stateful_layer_types(lm.model.config)
    if types is None:
        return None
    return (
        f"{_named(lm)} has no attention layer: its config's layer types are {', '.join(types)}, each carrying a "
        "running state (linear attention, a state space or a convolution) instead of attention weights over the tokens"
    )


def encode_text(lm, text: str, text_pair: str | None):
    """Tokenize, cutting to the model's limit; returns the batch on the model's device and how many tokens were
    cut."""
    encoded, truncated = _encode_on_host(lm, text, text_pair)
    return encoded.to(lm.device), truncated


def decoder_input_ids(lm, target: str) -> torch.Tensor:
    """The decoder's input for ``target`` (teacher forcing), on the model's device."""
    return _decoder_ids_on_host(lm, target).to(lm.device)


def _encode_on_host(lm, text: str, text_pair: str | None):
    limit = lm.max_tokens
    encoded = lm.tokenizer(text, text_pair, return_tensors="pt", verbose=False)
    full_length = encoded["input_ids"].shape[1]
    if full_length > limit:  # only an overlong text is tokenized a second time, cut to fit
        encoded = lm.tokenizer(text, text_pair, truncation=True, max_length=limit, return_tensors="pt")
    if encoded["input_ids"].shape[1] == 0:
        raise InputError("The text produced no tokens for this model.")
    return encoded, full_length - encoded["input_ids"].shape[1]


def _decoder_ids_on_host(lm, target: str) -> torch.Tensor:
    limit = lm.max_tokens
    labels = lm.tokenizer(text_target=target, truncation=True, max_length=limit, return_tensors="pt")["input_ids"]
    return teacher_forcing_ids(lm.model, labels)


def teacher_forcing_ids(model, labels: torch.Tensor) -> torch.Tensor:
    """The decoder's input for ``labels`` [batch, target]: the target shifted right behind the decoder's start
    token, as the model's own forward does with ``labels``. The model's ``prepare_decoder_input_ids_from_labels``
    where it has one; M2M100, NLLB-MoE and Blenderbot have none, and shift the same way in their forward."""
    if hasattr(model, "prepare_decoder_input_ids_from_labels"):
        return model.prepare_decoder_input_ids_from_labels(labels=labels)
    shifted = labels.new_full(labels.shape, decoder_start_token_id(model))
    shifted[:, 1:] = labels[:, :-1]
    return shifted.masked_fill(shifted == -100, model.config.pad_token_id)


def decoder_start_token_id(model) -> int:
    """The token an encoder-decoder's decoder starts from: its config's (what its forward shifts labels behind),
    else its generation config's."""
    for config in (model.config, model.generation_config):
        start = getattr(config, "decoder_start_token_id", None)
        if isinstance(start, int):
            return start
    raise InputError(f"{type(model).__name__} names no decoder_start_token_id: its decoder's input is unknown.")


def _forward(lm, encoded, decoder_ids, *, output_attentions: bool = False):
    """Run the model once on its device, with ``output_hidden_states`` (and the model's own ``output_attentions``
    on request); returns its output (the encoder's alone for an encoder-decoder given no target)."""
    names = ("input_ids", "attention_mask", "token_type_ids")
    inputs = {k: v.to(lm.device) for k, v in encoded.items() if k in names}
    asked = {"output_hidden_states": True} | ({"output_attentions": True} if output_attentions else {})
    if lm.kind == KIND_ENCODER_DECODER:
        inputs = _without(inputs, "token_type_ids")
        if decoder_ids is None:
            return lm.model.get_encoder()(**inputs, **asked)
        return lm.model(**inputs, decoder_input_ids=decoder_ids.to(lm.device), use_cache=False, **asked)
    if lm.kind == KIND_DECODER:
        return lm.model(**_without(inputs, "token_type_ids"), use_cache=False, **asked)
    return lm.model(**inputs, **asked)


def _main_hidden_states(lm, out, decoder_ids):
    """The main stack's hidden states in ``out``: the encoder's for an encoder-decoder."""
    if lm.kind == KIND_ENCODER_DECODER and decoder_ids is not None:
        return out.encoder_hidden_states
    return out.hidden_states


def _without(inputs: dict, key: str) -> dict:
    return {k: v for k, v in inputs.items() if k != key}


def _segment_b_start(encoded, text_pair: str | None) -> int | None:
    if text_pair is None:
        return None
    sequence_ids = encoded.sequence_ids(0)
    return next((i for i, s in enumerate(sequence_ids) if s == 1), None)


def _assemble(lm, calls, hidden, tokens, target_tokens):
    """The stacks, the hidden states (every array brought to the host by one ``to_host`` call), and notes naming
    the layers of a stack left out because they have no attention (a hybrid's)."""
    by_stack: dict[str, list] = defaultdict(list)
    for call in calls:
        by_stack[lm.stack_of_module.get(id(call.module), _default_stack(lm))].append(call)
    wanted = {(name, field): tensors for name in by_stack for field, tensors in layer_tensors(by_stack[name]).items()}
    wanted.update(_hidden_wanted(hidden))
    host = to_host(wanted)
    token_axes = {
        STACK_ENCODER: (tokens, tokens),
        STACK_DECODER: (target_tokens or tokens, target_tokens or tokens),
        STACK_CROSS: (target_tokens, tokens),
    }
    own = {name: _own_layers(lm.model, [call.module for call in stack_calls]) for name, stack_calls in by_stack.items()}
    stacks = {
        name: stack_from_host(
            {field: array for (stack, field), array in host.items() if stack == name},
            stack_calls,
            *token_axes[name],
            layer_numbers=own[name] and own[name][0],
        )
        for name, stack_calls in by_stack.items()
    }
    notes = tuple(_left_out_note(name, *found) for name, found in own.items() if found)
    return stacks, host.get(HIDDEN), notes


def own_layer_numbers(model, modules) -> list[int] | None:
    """The model's own number of the layer each of ``modules`` (one attention module per captured layer, in order)
    sits in, where they are not all its layers (a hybrid's layers without attention, Jamba's Mamba layers or
    MiniMax's linear ones, are not captured), else None: the index under the outermost module list above each
    module in the model's graph."""
    found = _own_layers(model, modules)
    return found and found[0]


def _own_layers(model, modules) -> tuple[list[int], int] | None:
    """(``own_layer_numbers``, how many layers the list holds), or None where the modules are all its layers."""
    names = {id(module): name for name, module in model.named_modules()}
    found = [_index_in_list(model, names.get(id(module), "")) for module in modules]
    if not found or None in found or len({length for _, length in found}) != 1:
        return None
    numbers, total = [number for number, _ in found], found[0][1]
    increasing = all(a < b for a, b in itertools.pairwise(numbers))  # ALBERT calls one module 12 times
    return (numbers, total) if increasing and len(numbers) < total else None


def _index_in_list(model, path: str) -> tuple[int, int] | None:
    """(index, length) of the outermost module list above the module at ``path`` (a stack's layers: T5's layers
    hold a list of their own sub-layers, inside), or None."""
    parts = path.split(".")
    for cut in range(1, len(parts)):
        parent = model.get_submodule(".".join(parts[:cut]))
        if isinstance(parent, torch.nn.ModuleList) and parts[cut].isdigit():
            return int(parts[cut]), len(parent)
    return None


def _left_out_note(stack: str, kept: list[int], total: int) -> str:
    """Which layers of ``stack`` are not shown because they have no attention (a hybrid's), in the visitor's words."""
    missing = [number for number in range(total) if number not in kept]
    several = len(missing) > 1
    return (
        f"Layer{'s' if several else ''} {', '.join(map(str, missing))} of its {stack} "
        f"{'form' if several else 'forms'} no attention weights over the tokens (a state-space, recurrent or "
        f"linear-attention layer mixes them another way), so {'they are' if several else 'it is'} not shown; the "
        f"layers shown keep the model's own numbers ({', '.join(map(str, kept))})."
    )


def _assemble_returned(lm, out, decoder_ids, hidden, tokens, target_tokens):
    """The stacks from the model's own output_attentions (weights only), the hidden states, in one ``to_host``, and
    the notes on what of them is left out or not over the tokens."""
    token_axes = {
        STACK_ENCODER: (tokens, tokens),
        STACK_DECODER: (target_tokens or tokens, target_tokens or tokens),
        STACK_CROSS: (target_tokens, tokens),
    }
    returned, notes = _returned_attentions(lm, out, decoder_ids, token_axes)
    wanted = {(name, "attentions"): [layer[0] for _, layer in layers] for name, layers in returned.items()}
    wanted.update(_hidden_wanted(hidden))
    host = to_host(wanted)
    stacks = {
        name: weights_only_stack(
            host[(name, "attentions")],
            *token_axes[name],
            causal=name == STACK_DECODER,
            device=str(layers[0][1].device),
            dtype=str(layers[0][1].dtype).removeprefix("torch."),
            layer_numbers=[number for number, _ in layers],
        )
        for name, layers in returned.items()
    }
    return stacks, host.get(HIDDEN), notes


def _returned_attentions(lm, out, decoder_ids, token_axes):
    """({stack: [(the model's own layer number, [batch, head, query, key])]}, notes) as the model returned them.
    A layer without attention (None, in hybrid models) is left out; so are layers that pool their queries (Funnel's
    blocks after the first), with a note naming them. Local attention in blocks or bands is laid out as [query,
    key] maps first; any other layout is refused clearly: it is not a [query, key] map of these tokens."""
    if lm.kind == KIND_ENCODER_DECODER and decoder_ids is not None:
        named = {STACK_ENCODER: out.encoder_attentions, STACK_DECODER: out.decoder_attentions}
        named[STACK_CROSS] = out.cross_attentions
    else:
        _refuse_latent_array(lm, out, len(token_axes[_default_stack(lm)][1]))
        named = {_default_stack(lm): attention_outputs(lm.model.config, out.attentions)}
    stacks, notes, pooled = {}, [], {}
    for name, layers in named.items():
        sizes = tuple(len(tokens) for tokens in token_axes[name])
        numbered = [(number, layer) for number, layer in enumerate(layers or ()) if layer is not None]
        notes += _global_tokens_notes(lm, name, [layer for _, layer in numbered], sizes[0])
        numbered = [(number, _as_map(lm, name, layer, sizes[0])) for number, layer in numbered]
        pooled[name] = [(number, layer) for number, layer in numbered if _pools_queries(layer, *sizes)]
        stacks[name] = [(number, layer) for number, layer in numbered if not _pools_queries(layer, *sizes)]
        for _, layer in stacks[name]:
            _check_layout(lm, name, layer, *sizes)
    if not any(stacks.values()):
        for name, layers in pooled.items():  # nothing but pooled layers: refused as the pooled layers they are
            for _, layer in layers:
                _check_layout(lm, name, layer, *(len(tokens) for tokens in token_axes[name]))
        _refuse_empty(lm)
    notes += [_pooled_note(lm, name, layers, token_axes[name]) for name, layers in pooled.items() if layers]
    return {name: layers for name, layers in stacks.items() if layers}, tuple(notes)


def _pools_queries(layer, queries: int, keys: int) -> bool:
    """Whether a returned layer [batch, head, query, key] has fewer query rows than tokens (and no more key columns):
    each row a pool of tokens (Funnel's blocks after the first pool the queries, and their later layers the keys)."""
    if not isinstance(layer, torch.Tensor) or layer.dim() != 4:
        return False
    return layer.shape[-2] < queries and layer.shape[-1] <= keys


def _pooled_note(lm, stack: str, layers, token_axes) -> str:
    """What the capture of a model that pools its queries leaves out, and why, naming the model's own layers."""
    numbers = ", ".join(str(number) for number, _ in layers)
    shapes = ", ".join(dict.fromkeys(_shape(layer) for _, layer in layers))
    which = (
        f"Layer {numbers} of the {stack} attention is"
        if len(layers) == 1
        else f"Layers {numbers} of the {stack} attention are"
    )
    return (
        f"{which} left out: {_named(lm)} pools its tokens there, so their "
        f"{len(token_axes[0])} tokens become fewer rows ({shapes}), each a pool of tokens rather than one, which "
        "cannot be drawn as maps of these tokens. Layers are numbered as the model numbers them (its "
        "output_attentions, in order)."
    )


def _global_tokens_notes(lm, stack: str, layers, length: int) -> list[str]:
    """How much weight the text's tokens put on the model's own global tokens, which no map over the text shows
    (Pegasus-X's global-local attention: the rows shown sum to 1 minus that share), measured on this text."""
    local = [layer["local"] for layer in layers if isinstance(layer, dict) and "local" in layer]
    if not local:
        return []
    shares = torch.stack([global_local_as_query_key(weights, length)[1].float() for weights in local])
    num_global = local[0].shape[-1] - local[0].shape[-2]
    return [
        f"{_named(lm)}'s {stack} attention is global-local: each token attends to the tokens of its own block of "
        f"{local[0].shape[-2]} and to {num_global} global tokens of the model's own (learned summaries, not tokens "
        "of the text). The maps show the weights on the text's tokens, placed at their keys (0 outside the block); "
        f"the weight on the global tokens is over no token of the text, so each row sums to less than 1: on this "
        f"text the global tokens take {shares.mean():.0%} of a row's weight on average ({shares.min():.0%} to "
        f"{shares.max():.0%} across layers, heads and tokens). The global tokens' own rows are not shown."
    ]


def _refuse_empty(lm) -> None:
    """Why ``lm`` returned no attention weights at all: ``NotApplicable`` where it has none to return, else
    ``InputError``."""
    if why := without_attention_layers(lm):
        raise NotApplicable(f"{why}, so attention views do not apply to it.")
    if _forms_no_weights(lm.model):
        raise NotApplicable(
            f"{_named(lm)} forms no attention weights: none of its modules can return them (none can be asked for "
            "them or records them), as it computes its attention without a matrix of weights over the tokens (an "
            "approximation such as MRA's blocks at several resolutions), so attention views do not apply to it."
        )
    if why := _attention_type_switched(lm):
        raise InputError(why)
    raise InputError(
        f"{_named(lm)} returned no attention weights for this text, though its output has a place for them."
    )


def latent_cross_attention(kind: str, out, tokens: int) -> torch.Tensor | None:
    """The map [batch, head, latent, token] by which a model of one stack reads its ``tokens`` as the keys of a cross
    attention from query positions of its own (Perceiver's latent array), else None. Fed token ids alone, such a
    model has no second sequence to attend across to: its queries there are not its tokens, whatever their count."""
    if kind == KIND_ENCODER_DECODER:  # its cross attention reads the encoder's tokens from the decoder's
        return None
    maps = [layer for layer in getattr(out, "cross_attentions", None) or () if isinstance(layer, torch.Tensor)]
    return next((layer for layer in maps if layer.dim() == 4 and layer.shape[-1] == tokens), None)


def _refuse_latent_array(lm, out, tokens: int) -> None:
    """``NotApplicable`` for a model whose attention runs over a latent array of its own (Perceiver: from its latents
    to the tokens, among the latents, from its output queries to the latents), said with the shapes it returned."""
    reading = latent_cross_attention(lm.kind, out, tokens)
    if reading is None:
        return
    latents = reading.shape[-2]
    others = [layer for layer in (*(out.attentions or ()), *out.cross_attentions) if layer is not reading]
    described = "; ".join(f"{count} of shape {_shape(layer)}" for layer, count in _counted(others).items())
    raise NotApplicable(
        f"{_named(lm)} does not attend from token to token: its cross attention {_shape(reading)} reads these "
        f"{tokens} tokens as keys from {latents} query positions of its own (a latent array), and its other maps "
        f"({described}) have those positions or its output queries as queries, never the tokens, so no map is over "
        "the tokens and attention views do not apply to it."
    )


def _counted(layers) -> dict:
    """{a representative layer: how many layers have its shape}, in order of first appearance."""
    first, counts = {}, defaultdict(int)
    for layer in layers:
        if isinstance(layer, torch.Tensor):
            first.setdefault(tuple(layer.shape), layer)
            counts[tuple(layer.shape)] += 1
    return {layer: counts[shape] for shape, layer in first.items()}


def _check_layout(lm, stack: str, layer, queries: int, keys: int) -> None:
    """A returned layer must be [batch, head, query, key] over these tokens. Vectors of the hidden width per token in
    its place (YOSO's: its attention's output, for its hashed approximation forms no weights) are no weights at all:
    ``NotApplicable``; any other layout: ``InputError``."""
    if isinstance(layer, torch.Tensor) and tuple(layer.shape[2:]) == (queries, keys):
        return
    width = getattr(lm.model.config.get_text_config(), "hidden_size", None)
    if isinstance(layer, torch.Tensor) and layer.dim() == 3 and tuple(layer.shape[1:]) == (queries, width):
        raise NotApplicable(
            f"{_named(lm)} forms no attention weights: what it returns in their place is one vector of its hidden "
            f"width per token ({_shape(layer)}: its attention's output, computed by an approximation that forms no "
            "weights over the tokens), so attention views do not apply to it."
        )
    if _pools_queries(layer, queries, keys):
        raise InputError(
            f"{_named(lm)} pools its queries: a layer of its {stack} attention returns {layer.shape[-2]} query rows "
            f"for these {queries} tokens ({_shape(layer)}), each row a pool of tokens rather than one, so its layers "
            "cannot be drawn as maps of these tokens."
        )
    raise InputError(
        f"{_named(lm)} returns its {stack} attention in a layout of its own ({_shape(layer)}, not [batch, head, "
        f"{queries}, {keys}]: one map per head over these tokens), so it cannot be drawn as attention weights."
    )


# The arguments by which a module can be asked for its attention weights: transformers' and torch's own.
_WEIGHTS_ARGUMENTS = frozenset({"output_attentions", "need_weights"})


def _forms_no_weights(model) -> bool:
    """Whether no module of ``model`` can return attention weights: none can be asked for them (``_WEIGHTS_ARGUMENTS``)
    and none records attentions from its modules (transformers' ``_can_record_outputs``). Among transformers' text
    families only those without attention (Mamba, xLSTM, FNet) and MRA, whose approximation forms no weights, are
    such."""
    for module in model.modules():
        if any(name.endswith("attentions") for name in getattr(module, "_can_record_outputs", None) or {}):
            return False
        if _WEIGHTS_ARGUMENTS & set(inspect.signature(module.forward).parameters):
            return False
    return True


def _attention_type_switched(lm) -> str | None:
    """Why a model that switched its own attention type returns no weights (BigBird: block-sparse attention needs
    more tokens than its blocks cover, so its forward switches to full attention and swaps its attention modules
    for new ones, which transformers' output_attentions then never reads), else None."""
    configured = getattr(lm.model.config, "attention_type", None)
    running = getattr(lm.model.base_model, "attention_type", None)
    if not isinstance(configured, str) or not isinstance(running, str) or running == configured:
        return None
    return (
        f"{_named(lm)} runs {running} attention, not the {configured} attention its config names: its own forward "
        "switched on a text too short for its sparse blocks and replaced its attention modules doing so, after which "
        "transformers returns no attention weights for it, so there are none to show."
    )


def _as_map(lm, stack: str, layer, length: int):
    """One layer's returned attention as [batch, head, query, key] where its layout is known: LongT5's blocks, and
    the bands of a Longformer-style encoder (one with an ``attention_window``: Longformer, LED) placed at their keys,
    the main stream's rows of a cross attention that has n-gram streams' too (ProphetNet), the text rows of
    Pegasus-X's global-local dicts. Any other layout comes back as it is, and is refused."""
    if isinstance(layer, dict) and "local" in layer:  # Pegasus-X: the text rows of its global-local attention
        return global_local_as_query_key(layer["local"], length)[0]
    if not isinstance(layer, torch.Tensor):
        return layer
    if stack == STACK_CROSS:
        return main_stream_rows(lm.model.config, layer, length)
    if stack == STACK_ENCODER and getattr(lm.model.config, "attention_window", None) is not None:
        if layer.shape[-1] % 2 == 0:  # global tokens add columns in front of the band: never asked for here
            raise InputError(f"{_named(lm)} returned its windowed attention with global columns: not drawn.")
        return banded_as_query_key(layer, length)
    return as_query_key_maps(lm.model.config, layer, length)


def main_stream_rows(config, layer, rows: int):
    """A cross attention's rows for the decoder's ``rows`` positions. ProphetNet's decoder runs its ``ngram``
    prediction streams in the same rows after its main stream (its own positions, what it generates from): its cross
    attention has (1 + ngram) x ``rows`` rows, the main stream's first. Any other layer comes back as it is."""
    streams = 1 + (getattr(config, "ngram", None) or 0)
    if streams > 1 and isinstance(layer, torch.Tensor) and layer.dim() == 4 and layer.shape[-2] == streams * rows:
        return layer[..., :rows, :]
    return layer


def banded_as_query_key(weights: torch.Tensor, length: int) -> torch.Tensor:
    """Sliding-window attention returned as bands, [batch, head, query, 2w + 1] with column ``c`` of query ``q``
    for key ``q - w + c`` (Longformer's layout, no global tokens), placed at their keys: [batch, head, query,
    ``length``]. Columns off the sequence (before its start, or the padding to a multiple of the window) hold
    weight exactly 0 from the model's own mask; keys outside a query's window get 0, as in the model."""
    batch, heads, rows, width = weights.shape
    query = torch.arange(rows, device=weights.device)[:, None]
    column = torch.arange(length, device=weights.device)[None, :] - query + (width - 1) // 2  # [query, key]
    inside = (column >= 0) & (column < width)
    placed = weights.gather(-1, column.clamp(0, width - 1).expand(batch, heads, rows, length))
    return torch.where(inside, placed, torch.zeros((), dtype=weights.dtype, device=weights.device))


def _named(lm) -> str:
    return f"{lm.name} ({type(lm.model).__name__})"


def _shape(layer) -> str:
    if isinstance(layer, torch.Tensor):
        return str(tuple(layer.shape))
    if isinstance(layer, dict):  # Pegasus-X: its local tokens' blocks and its global tokens' rows, apart
        return f"a dict of {' and '.join(f'{name} {_shape(part)}' for name, part in layer.items())}"
    return f"a {type(layer).__name__}"


def weights_only_stack(
    attentions: np.ndarray,
    query_tokens,
    key_tokens,
    *,
    causal: bool,
    device: str = "cpu",
    dtype: str = "float32",
    layer_numbers=None,
) -> AttentionStack:
    """An ``AttentionStack`` of weights alone ([layer, head, query, key] on the host): no queries, keys or values,
    so nothing to recompute (``verify()`` is NaN). The mask is the stack's structure: causal or full.
    ``layer_numbers``: the model's own number of each layer (kept only where some are left out)."""
    num_queries, num_keys = attentions.shape[-2:]
    full = np.ones((num_queries, num_keys), dtype=bool)
    return AttentionStack(
        query_tokens=tuple(query_tokens),
        key_tokens=tuple(key_tokens),
        attentions=attentions,
        queries=None,
        keys=None,
        scale=None,
        position_bias=None,
        mask=np.tril(full, k=num_keys - num_queries) if causal else full,
        kv_head_of_query=np.arange(attentions.shape[1]),
        device=device,
        dtype=dtype,
        layer_numbers=_renumbered(layer_numbers),
    )


def _renumbered(numbers) -> np.ndarray | None:
    """[layer] int: the model's own layer numbers where they are not 0, 1, 2, ... (layers left out), else None."""
    if numbers is None or list(numbers) == list(range(len(numbers))):
        return None
    return np.asarray(numbers, dtype=np.int64)


HIDDEN = ("capture", "hidden_states")  # the hidden states' key among the stacks' (stack, field) keys


def _hidden_wanted(hidden) -> dict:
    """The hidden states to bring to the host, where they share one shape: OPT-350m's last one is projected to
    its narrower embedding width, Pegasus-X's encoder pads to its block size (``hidden_states`` is then None)."""
    if not hidden or not all(isinstance(state, torch.Tensor) for state in hidden):  # Pegasus-X: (local, global)
        return {}
    if len({tuple(state.shape) for state in hidden}) != 1:
        return {}
    return {HIDDEN: [state[0] for state in hidden]}


def _default_stack(lm) -> str:
    return STACK_DECODER if lm.kind == KIND_DECODER else STACK_ENCODER


def layer_tensors(calls) -> dict[str, list[torch.Tensor]]:
    """What a stack's arrays are made of, one tensor per layer, still on the model's device."""
    tensors = {
        "attentions": [call.weights[0] for call in calls],
        "queries": _padded([call.query[0] for call in calls]),
        "keys": _padded([_per_query_head(call.key[0], call) for call in calls]),
        "values": _padded([_per_query_head(call.value[0], call) for call in calls]),
        "masks": [_allowed(call) for call in calls],
    }
    if any(call.position_bias is not None for call in calls):
        shape = calls[0].weights.shape[1:]
        tensors["position_bias"] = [
            call.weights.new_zeros(shape) if call.position_bias is None else call.position_bias[0].expand(shape)
            for call in calls
        ]
    if any(call.sinks is not None for call in calls):
        tensors["sinks"] = [_sink_logits(call) for call in calls]
    return tensors


def _sink_logits(call) -> torch.Tensor:
    """[head, query]: the sink logit each row's softmax also covers (GPT-OSS: one per head), -inf for none."""
    heads, queries = call.weights.shape[1:3]
    if call.sinks is None:
        return call.weights.new_full((heads, queries), -torch.inf, dtype=torch.float32)
    sinks = call.sinks.to(torch.float32)  # as the model keeps them (GPT-OSS: float32 whatever its dtype)
    return (sinks[:, None] if sinks.dim() == 1 else sinks[0, ..., 0]).expand(heads, queries)


def _per_query_head(tensor: torch.Tensor, call) -> torch.Tensor:
    """[kv_head, ...] of one call as [head, ...]: with grouped KV heads, each query head is given the key or value
    head it shares (a gather). Layers may group differently (MiMo-V2-Flash), so each call by its own heads."""
    index = _kv_head_of_query(call)
    if len(index) == tensor.shape[0]:  # one KV head per query head: nothing to repeat
        return tensor
    return tensor.index_select(0, index.to(tensor.device))


def _kv_head_of_query(call) -> torch.Tensor:
    """[head] int64: the key/value head each query head of ``call`` reads."""
    num_heads, num_kv_heads = call.query.shape[1], call.key.shape[1]
    return torch.arange(num_heads) // (num_heads // num_kv_heads)


def _padded(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Per-layer [head, position, width] tensors, zero-padded to the widest layer's width where layers differ
    (Gemma 4's global layers have wider heads than its sliding ones): zeros add nothing to q . k."""
    widest = max(tensor.shape[-1] for tensor in tensors)
    return [torch.nn.functional.pad(tensor, (0, widest - tensor.shape[-1])) for tensor in tensors]


def _layer_kv_heads(calls) -> tuple[np.ndarray, np.ndarray | None]:
    """The first layer's ``kv_head_of_query`` [head], and [layer, head] too where layers group heads differently."""
    by_layer = np.stack([_kv_head_of_query(call).numpy() for call in calls])
    return by_layer[0], None if (by_layer == by_layer[0]).all() else by_layer


def _widths(tensors) -> np.ndarray | None:
    """[layer] int: each layer's vector width, where layers differ (else None: the arrays' own width)."""
    widths = np.array([tensor.shape[-1] for tensor in tensors])
    return None if (widths == widths[0]).all() else widths


def stack_from_host(
    arrays: dict[str, np.ndarray], calls, query_tokens, key_tokens, *, layer_numbers=None
) -> AttentionStack:
    """An ``AttentionStack`` from the host arrays of ``layer_tensors`` and what the calls say besides;
    ``layer_numbers``: the model's own number of each layer, where some of its layers are not captured."""
    layer_masks = arrays["masks"]
    same_mask = bool((layer_masks == layer_masks[0]).all())
    kv_head_of_query, layer_kv_head_of_query = _layer_kv_heads(calls)
    return AttentionStack(
        query_tokens=tuple(query_tokens),
        key_tokens=tuple(key_tokens),
        attentions=arrays["attentions"],
        queries=arrays["queries"],
        keys=arrays["keys"],
        values=arrays["values"],
        scale=np.array([call.scaling for call in calls], dtype=np.float32),
        position_bias=arrays.get("position_bias"),
        mask=layer_masks.any(axis=0),
        layer_mask=None if same_mask else layer_masks,
        softcap=_softcap(calls),
        kv_head_of_query=kv_head_of_query,
        device=str(calls[0].weights.device),
        dtype=str(calls[0].weights.dtype).removeprefix("torch."),
        sinks=arrays.get("sinks"),
        layer_kv_head_of_query=layer_kv_head_of_query,
        head_dims=_widths([call.query for call in calls]),
        value_dims=_widths([call.value for call in calls]),
        layer_numbers=_renumbered(layer_numbers),
    )


def _stack(calls, query_tokens, key_tokens, *, layer_numbers=None) -> AttentionStack:
    """One stack from its calls alone (the stitched attention of a decoding)."""
    return stack_from_host(to_host(layer_tensors(calls)), calls, query_tokens, key_tokens, layer_numbers=layer_numbers)


def _allowed(call) -> torch.Tensor:
    """[query, key] bool, on the call's device: where this call's mask lets a query attend."""
    num_queries, num_keys = call.weights.shape[-2:]
    if call.mask is None:
        full = torch.ones((num_queries, num_keys), dtype=torch.bool, device=call.weights.device)
        # An unpadded causal call may get no mask: causality is then implicit in the kernel.
        causal = getattr(call.module, "is_causal", False) and num_queries == num_keys
        return torch.tril(full) if causal else full
    mask = call.mask[0, 0]
    if mask.dtype != torch.bool:
        mask = mask > torch.finfo(mask.dtype).min / 2
    return mask[-num_queries:, -num_keys:]


def _softcap(calls) -> np.ndarray | None:
    caps = [call.softcap for call in calls]
    if all(cap is None for cap in caps):
        return None
    return np.array([np.inf if cap is None else cap for cap in caps], dtype=np.float32)


def dtype_name(model) -> str:
    """The dtype the model's weights (and so its attention) are in: "float32", "bfloat16", ..."""
    return str(next(model.parameters()).dtype).removeprefix("torch.")


def _precision_notes(model) -> tuple[str, ...]:
    dtype = dtype_name(model)
    if dtype == "float32":
        return ()
    return (
        f"The model runs in {dtype}: its softmax rows sum to 1 only to about 1e-3, and verify() accepts "
        f"differences up to {TOLERANCE[dtype]:.0e} (float32: {TOLERANCE['float32']:.0e}). "
        "Values shown are converted to float32.",
    )
