"""Display labels for tokens: readable for byte-level BPE, SentencePiece and WordPiece alike."""

from __future__ import annotations

from explorer.labels import visible

# Whitespace that would be invisible in a chart axis gets a visible stand-in.
_VISIBLE = {"\n": "↵", "\t": "⇥", "\r": "␍"}


def token_label(tokenizer, raw: str, specials: frozenset[str] = frozenset()) -> str:
    """The text a token stands for, e.g. ``Ġflies`` -> `` flies``, ``▁time`` -> `` time``.

    WordPiece continuations keep their ``##`` (it is how BERT users read them); a byte-level piece
    that is only part of a character keeps its raw form rather than showing a replacement mark.
    """
    if raw.startswith("##") or raw in specials:
        return visible(raw)
    text = tokenizer.convert_tokens_to_string([raw])
    if "\ufffd" in text:
        return visible(raw)
    # SentencePiece decoders drop a leading space; keep it so word starts stay visible.
    if raw.startswith("▁") and not text.startswith(" "):
        text = " " + text
    for char, stand_in in _VISIBLE.items():
        text = text.replace(char, stand_in)
    # Control characters, bidi controls and the like get visible stand-ins (explorer.labels): the axis, the
    # table and every exported file then show the same label, and no renderer chokes on it.
    return visible(text if text.strip() else (text.replace(" ", "␣") or raw))


def token_labels(tokenizer, ids) -> tuple[str, ...]:
    ids = [int(i) for i in ids]
    raws = tokenizer.convert_ids_to_tokens(ids)
    specials = frozenset(tokenizer.all_special_tokens)
    # Some models' output layers are wider than their tokenizer's vocabulary: those ids have no token.
    return tuple(
        f"<id {i}>" if raw is None else token_label(tokenizer, raw, specials) for i, raw in zip(ids, raws, strict=True)
    )
