"""The input as the model sees it: the tokenization table and the embeddings of each token.

``tokenize`` lists each token with its id, whether it is special, its character span and its segment.
``embeddings`` reads the model's own embedding tables (token, learned position, token type) and, for
rotary models, the inverse frequencies of its rotary module.
"""

from __future__ import annotations

import numpy as np
import torch

from explorer.checks import given_text
from explorer.data.anatomy import Embeddings, TokenRow
from explorer.errors import InputError
from explorer.models.anatomy import _quirks
from explorer.models.tokens import token_labels

# Where models keep their learned absolute position and token-type tables (module names), tried in order.
POSITION_MODULES = ("position_embeddings", "wpe", "embed_positions")
TOKEN_TYPE_MODULES = ("token_type_embeddings",)
# The norm some models apply to the summed embeddings before the first layer (BERT's embeddings.LayerNorm).
EMBEDDING_NORM_MODULES = ("embeddings.LayerNorm", "embeddings.layer_norm", "embeddings.norm")


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
    """The model's own embedding rows for ``token_ids`` [token] (and its first ``positions`` position rows)."""
    model = lm.model
    ids = torch.as_tensor(list(token_ids), dtype=torch.long, device=lm.device)
    with torch.inference_mode():
        token = model.get_input_embeddings()(ids)
        position_table = _named_embedding(model, POSITION_MODULES)
        count = positions or len(ids)
        position = None
        if position_table is not None:
            count = min(count, position_table.num_embeddings)
            position = position_table(torch.arange(count, device=lm.device))
        type_table = _named_embedding(model, TOKEN_TYPE_MODULES)
        token_type = None
        if type_table is not None:
            types = torch.as_tensor(token_type_ids if token_type_ids is not None else [0] * len(ids), device=lm.device)
            token_type = type_table(types)
    rotary = next((m for name, m in model.named_modules() if name.endswith("rotary_emb")), None)
    inverse_frequency = None if rotary is None else _numpy(getattr(rotary, "inv_freq", None))
    return Embeddings(
        token=_numpy(token),
        position=_numpy(position),
        token_type=_numpy(token_type),
        inverse_frequency=inverse_frequency,
        position_scheme=_quirks(model)[1],
    )


def _named_embedding(model, names: tuple[str, ...]):
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Embedding) and name.split(".")[-1] in names:
            return module
    return None


def _numpy(tensor):
    return None if tensor is None else tensor.detach().to(device="cpu", dtype=torch.float32).numpy().copy()


def summed_embeddings(lm, found: Embeddings) -> tuple[np.ndarray, str | None]:
    """The input's token rows + position rows + token-type rows, then the model's embedding norm if it has
    one (its module name, else None): what the lecture says a layer-1 input is. [token, hidden]"""
    total = found.token.copy()
    count = len(total)
    if found.position is not None and len(found.position) >= count:
        total += found.position[:count]
    if found.token_type is not None:
        total += found.token_type
    name, norm = next(((n, m) for n, m in lm.model.named_modules() if n.endswith(EMBEDDING_NORM_MODULES)), (None, None))
    if norm is not None:
        with torch.inference_mode():
            parameter = next(norm.parameters())
            tensor = torch.as_tensor(total, device=parameter.device, dtype=parameter.dtype)
            total = _numpy(norm(tensor))
    return total, name


def first_layer_input(lm, token_ids, token_type_ids=None) -> np.ndarray:
    """What the model's first layer really receives for these ids: ``output_hidden_states[0]`` (the encoder's,
    for an encoder-decoder). [token, hidden]"""
    ids = torch.as_tensor([list(token_ids)], dtype=torch.long, device=lm.device)
    extra = {}
    if token_type_ids is not None and _named_embedding(lm.model, TOKEN_TYPE_MODULES) is not None:
        extra["token_type_ids"] = torch.as_tensor([list(token_type_ids)], dtype=torch.long, device=lm.device)
    with torch.inference_mode():
        if lm.kind == "encoder-decoder":
            outputs = lm.model.get_encoder()(input_ids=ids, output_hidden_states=True, return_dict=True)
        else:
            outputs = lm.model(input_ids=ids, output_hidden_states=True, return_dict=True, **extra)
    return _numpy(outputs.hidden_states[0][0])
