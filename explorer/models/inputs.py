"""The input as the model sees it: the tokenization table and the embeddings of each token.

``tokenize`` lists each token with its id, whether it is special, its character span and its segment.
``embeddings`` reads the model's own embedding tables (token, learned position, token type) and, for
rotary models, the inverse frequencies of its rotary module. ``first_layer_input`` is what the first layer
receives, from a hook on it; the modules between the table and that layer that no name below finds (a factorized
table's projection, a norm) come from the module graph (``explorer.models.first_layer``).
"""

from __future__ import annotations

import numpy as np
import torch

from explorer.checks import given_text
from explorer.data.anatomy import Embeddings, TokenRow
from explorer.errors import InputError
from explorer.models.anatomy import _quirks
from explorer.models.first_layer import embedding_stack, entry, first_layer_rows, input_table
from explorer.models.sites import first_tensor
from explorer.models.tokens import token_labels

# Where models keep their learned absolute position and token-type tables (module names), tried in order.
POSITION_MODULES = ("position_embeddings", "wpe", "embed_positions")
TOKEN_TYPE_MODULES = ("token_type_embeddings",)
# The norm some models apply to the summed embeddings before the first layer (BERT's embeddings.LayerNorm, BART's
# layernorm_embedding).
EMBEDDING_NORM_MODULES = ("embeddings.LayerNorm", "embeddings.layer_norm", "embeddings.norm", "layernorm_embedding")
# Linear maps from a narrow embedding to the hidden width: on the token rows, before positions are added (OPT's
# project_in, MobileBERT's embedding_transformation), or on the normalised sum (ALBERT, ELECTRA).
TOKEN_PROJECTION_MODULES = ("project_in", "embeddings.embedding_transformation")
SUM_PROJECTION_MODULES = ("embedding_hidden_mapping_in", "embeddings_project")


def tokenize(lm, text: str, text_pair: str | None = None) -> tuple[TokenRow, ...]:
    """The tokenization table of ``text`` (and ``text_pair``), cut to the model's limit as ``capture`` does."""
    text, text_pair = given_text(text), given_text(text_pair, "second text")
    if not text.strip():
        raise InputError("Type some text to see how it is tokenized.")
    pair = text_pair if text_pair.strip() else None
    encoded = lm.tokenizer(
        text,
        pair,
        truncation=True,
        max_length=lm.max_tokens,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
    )
    ids = encoded["input_ids"]
    labels = token_labels(lm.tokenizer, ids)
    sequence_ids = encoded.sequence_ids() if hasattr(encoded, "sequence_ids") else [0] * len(ids)
    # The second segment starts at its first token; specials before it ([CLS], the first [SEP]) belong to A.
    b_start = next((i for i, s in enumerate(sequence_ids) if s == 1), len(ids)) if pair else len(ids)
    rows = []
    for position, (token_id, label, special, (start, end)) in enumerate(
        zip(ids, labels, encoded["special_tokens_mask"], encoded["offset_mapping"], strict=True)
    ):
        rows.append(
            TokenRow(
                position=position,
                token=("␣" + label[1:]) if label.startswith(" ") else label,
                token_id=int(token_id),
                special=bool(special),
                start=None if special else int(start),
                end=None if special else int(end),
                segment="A" if position < b_start else "B",
            )
        )
    return tuple(rows)


def embeddings(lm, token_ids, token_type_ids=None, *, positions: int | None = None) -> Embeddings:
    """The model's own embedding rows for ``token_ids`` [token] (and the position rows of its first ``positions``
    positions), read from the stack whose first layer the page shows (an encoder-decoder's encoder)."""
    stack = embedding_stack(lm)
    ids = torch.as_tensor(list(token_ids), dtype=torch.long, device=lm.device)
    table = input_table(lm)
    with torch.inference_mode():
        token = first_tensor(table(ids))  # the module's own forward: BART's scale included
        if _scale(table) is None and _scale(stack) is not None:  # FSMT's encoder scales the table's rows itself
            token = token * _scale(stack)
        position_table = _named(stack, POSITION_MODULES, _table)[1]
        position, offset = None, 0
        if position_table is not None:
            offset = position_offset(position_table)
            count = min(positions or len(ids), len(position_table.weight) - offset)
            position = position_table.weight[offset : offset + count]
        type_table = _named(stack, TOKEN_TYPE_MODULES, _table)[1]
        token_type = None
        if type_table is not None:
            types = torch.as_tensor(token_type_ids if token_type_ids is not None else [0] * len(ids), device=lm.device)
            token_type = first_tensor(type_table(types))  # I-BERT's tables return (rows, scale)
    token_projection, trigram, note = _token_projection(lm, token.shape[-1], position)
    note = note or _latent_array_note(lm)
    rotary = next((m for name, m in lm.model.named_modules() if name.endswith("rotary_emb")), None)
    inverse_frequency = None if rotary is None else _numpy(getattr(rotary, "inv_freq", None))
    return Embeddings(
        token=_numpy(token),
        position=_numpy(position),
        token_type=_numpy(token_type),
        inverse_frequency=inverse_frequency,
        position_scheme=_quirks(lm.model)[1],
        position_offset=offset,
        token_projection=token_projection,
        projection=_named(stack, SUM_PROJECTION_MODULES, torch.nn.Linear)[0],
        note=note,
        trigram=trigram,
        token_scale=_scale(table) or _scale(stack) or 1.0,
    )


def _latent_array_note(lm) -> str | None:
    """Why the summed rows are no layer's input where the layers run over a latent array (Perceiver), else None."""
    latents = getattr(lm, "latents", 0)
    if not latents:
        return None
    return (
        f"Its layers run over {latents} positions of its own (a latent array), not over the tokens: they read the "
        f"tokens only as the keys and values of a cross attention, and its first layer receives the {latents} "
        "latent rows, so no layer receives one row per token to compare these sums with."
    )


def _table(module) -> bool:
    """A lookup table: ``nn.Embedding`` or a module that keeps one the same way (I-BERT's ``QuantEmbedding``)."""
    weight = getattr(module, "weight", None)
    return isinstance(module, torch.nn.Embedding) or (
        isinstance(weight, torch.nn.Parameter) and weight.dim() == 2 and hasattr(module, "padding_idx")
    )


def _scale(module) -> float | None:
    """The ``embed_scale`` a module multiplies token rows by (BART's scaled table; FSMT's encoder), or None."""
    scale = getattr(module, "embed_scale", None)
    return float(scale) if isinstance(scale, (int, float, torch.Tensor)) else None


def position_offset(table: torch.nn.Embedding) -> int:
    """The row of ``table`` that position 0 reads. BART-style tables say so (``offset``: 2 for BART, mBART, OPT,
    BioGPT); RoBERTa-style tables keep the rows up to their padding index for padding, and count positions after
    it (``padding_idx + 1``); other tables start at row 0."""
    offset = getattr(table, "offset", None)
    if isinstance(offset, int):
        return offset
    return 0 if table.padding_idx is None else table.padding_idx + 1


def _token_projection(lm, width: int, position) -> tuple[str | None, bool, str | None]:
    """(the module that maps token rows to the position rows' width, or None; whether it reads each row with its
    neighbours' (a config's ``trigram_input``: MobileBERT); a note where it reads rows some other way). Applied only
    where the widths differ: a model whose widths agree skips it (MobileBERT without trigrams). Where no module has
    a known name, the ``Linear`` the probe saw read the table's rows (NeoMME's factorized embedding)."""
    stack = embedding_stack(lm)
    name, module = _named(stack, TOKEN_PROJECTION_MODULES, torch.nn.Linear)
    if module is None and entry(lm).token_projection:
        name = entry(lm).token_projection
        module = stack.get_submodule(name)
    trigram = bool(getattr(lm.model.config, "trigram_input", False))
    if module is None or (position is not None and position.shape[-1] == width and not trigram):
        return None, False, None
    if module.in_features == width * (3 if trigram else 1):
        return name, trigram, None
    note = (
        f"Its {name} reads {module.in_features} numbers per token, not one token's {width}: it mixes token rows in "
        "a way this page does not know, so token + position rows are not what its first layer receives."
    )
    return None, False, note


def _named(model, names: tuple[str, ...], kind) -> tuple[str | None, torch.nn.Module | None]:
    """The first submodule of class ``kind`` (or for which ``kind(module)`` holds) whose dotted name ends with one
    of ``names``: (name, module)."""
    matches = (lambda module: isinstance(module, kind)) if isinstance(kind, type) else kind
    for name, module in model.named_modules():
        if matches(module) and any(name == n or name.endswith("." + n) for n in names):
            return name, module
    return None, None


def _named_embedding(model, names: tuple[str, ...]):
    return _named(model, names, torch.nn.Embedding)[1]


def _numpy(tensor):
    return None if tensor is None else tensor.detach().to(device="cpu", dtype=torch.float32).numpy().copy()


def summed_embeddings(lm, found: Embeddings) -> tuple[np.ndarray, str | None]:
    """The input's token rows (through ``token_projection``) + position rows + token-type rows, then the model's
    embedding norm if it has one (its module name, else None) and ``projection``: what the lecture says a layer-1
    input is. [token, hidden]"""
    stack = embedding_stack(lm)
    if found.note:  # the rows do not add up to the first layer's input: nothing is pretended
        return found.token.copy(), None
    total = _through(stack, found.token_projection, with_neighbours(found.token) if found.trigram else found.token)
    count = len(total)
    if found.position is not None and len(found.position) >= count and found.position.shape[-1] == total.shape[-1]:
        total = total + found.position[:count]
    if found.token_type is not None and found.token_type.shape[-1] == total.shape[-1]:
        total = total + found.token_type
    name = _named(stack, EMBEDDING_NORM_MODULES, torch.nn.Module)[0] or entry(lm).norm
    return _through(stack, found.projection, _through(stack, name, total)), name


def with_neighbours(rows: np.ndarray) -> np.ndarray:
    """[token, 3 * width]: each row beside the next token's and after it the previous token's, zeros past the ends
    (MobileBERT's trigram input: a width-3 convolution over the token rows, as its embeddings do it)."""
    zeros = np.zeros_like(rows[:1])
    return np.concatenate([np.concatenate([rows[1:], zeros]), rows, np.concatenate([zeros, rows[:-1]])], axis=1)


def _through(stack, name: str | None, rows: np.ndarray) -> np.ndarray:
    """``rows`` [token, width] through ``stack``'s submodule ``name`` (unchanged when None)."""
    if name is None:
        return rows.copy()
    module = stack.get_submodule(name)
    like = next(module.parameters(), None)
    like = next(stack.parameters()) if like is None else like  # NeoMME's norm has no weight
    with torch.inference_mode():  # torch.tensor copies: the rows may be read-only; I-BERT's norm wants a batch
        return _numpy(first_tensor(module(torch.tensor(rows, device=like.device, dtype=like.dtype)[None]))[0])


def first_layer_input(lm, token_ids, token_type_ids=None) -> np.ndarray:
    """What the model's first layer really receives for these ids (the encoder's, for an encoder-decoder), seen
    by a pre-hook on it (``first_layer.first_layer_rows``): [token, hidden], [token, stream, hidden] or [stream,
    token, hidden] where it reads several vectors per token, more rows where the model adds its own before the
    text's. ``output_hidden_states[0]`` where no module list runs once per layer."""
    ids = torch.as_tensor([list(token_ids)], dtype=torch.long, device=lm.device)
    extra = {}
    if token_type_ids is not None and _named_embedding(lm.model, TOKEN_TYPE_MODULES) is not None:
        extra["token_type_ids"] = torch.as_tensor([list(token_type_ids)], dtype=torch.long, device=lm.device)
    return first_layer_rows(lm, ids, **extra)
