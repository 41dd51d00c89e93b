"""Words and the tokens a tokenizer cut them into: pure functions on the tokenization table (``TokenRow``s)."""

from __future__ import annotations

import re


def split_words(text: str, rows) -> list[tuple[str, tuple[str, ...]]]:
    """[(word, its tokens)] for each whitespace-separated word of ``text`` that the tokenizer cut into more than
    one token, in order; ``rows`` are the first segment's ``TokenRow``s (spans in ``text``)."""
    spans = [(row.start, row.end, row.token) for row in rows if row.start is not None and row.segment != "B"]
    split = []
    for word in re.finditer(r"\S+", text):
        pieces = tuple(token for start, end, token in spans if start < word.end() and end > word.start())
        if len(pieces) > 1:
            split.append((word.group(), pieces))
    return split


def unknown_share(token_ids, unknown_id: int | None, special_ids) -> tuple[int, int]:
    """(how many of the text's tokens are the unknown token, how many tokens the text has), special tokens such as
    an end-of-sequence token not counted; (0, n) for a tokenizer without an unknown token."""
    ids = [int(i) for i in token_ids if int(i) == unknown_id or int(i) not in set(special_ids)]
    return sum(i == unknown_id for i in ids), len(ids)
