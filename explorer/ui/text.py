"""Visitor-controlled text shown literally inside Streamlit's messages, which render Markdown.

Texts, model names and URL parameters come from whoever opened the link. Streamlit's ``st.info``,
``st.error``, expander labels and captions render Markdown (links, images, code spans, some HTML,
LaTeX), so each such value goes through ``literal`` first: every ASCII punctuation character is
backslash-escaped (CommonMark allows it for all of them), which leaves the visible text unchanged
and gives Markdown nothing to interpret. Newlines become spaces so a value cannot start a new block.
"""

from __future__ import annotations

import re
import string

from explorer.labels import visible

_ESCAPED = {ord(char): "\\" + char for char in string.punctuation}
_FLATTENED = {ord("\n"): " ", ord("\r"): " ", ord("\t"): " ", 0x2028: " ", 0x2029: " "}


# Streamlit's Markdown (GitHub's dialect) turns bare web and e-mail addresses into live links, escaped or not:
# ``https://…``, ``www.…`` and ``name@domain``. A word joiner (U+2060, zero-width, invisible) inside "http",
# "www" and after "@" keeps them from being recognised while the text reads exactly the same.
_AUTOLINK = re.compile(r"(?i)(?<=h)(?=ttps?:)|(?<=w)(?=ww\.)|(?<=@)")
_WORD_JOINER = "\u2060"


def unlinked(text: str) -> str:
    """``text`` with every address Markdown would make a link of broken by an invisible word joiner."""
    return _AUTOLINK.sub(_WORD_JOINER, text)


def literal(text: object) -> str:
    """``text`` as Markdown that displays exactly these characters and links, embeds or runs nothing; control,
    bidirectional and invisible characters shown as visible stand-ins (``explorer.labels.visible``)."""
    return unlinked(visible(str(text).translate(_FLATTENED))).translate(_ESCAPED)


def literal_table(frame):
    """A copy of the pandas ``frame`` whose text cells show literally in ``st.table``, which renders each cell
    as Markdown (bare addresses in a prompt became links there)."""
    return frame.map(lambda cell: literal(cell) if isinstance(cell, str) else cell)


def prompt_and_continuation(prompt: str, continuation: str, *, seq2seq: bool = False) -> str:
    """Markdown: the prompt as it is, then the generated text in bold (both shown literally). A seq2seq model's
    output is not a continuation of its input but a text of its own: it follows an arrow."""
    lead = " → " if seq2seq else " " if continuation[:1].isspace() else ""
    body = continuation.strip()
    return f"{literal(prompt)}{lead}{bold(literal(body))}" if body else literal(prompt)


def bold(markdown: str) -> str:
    """``**markdown**`` that is bold whatever it starts or ends with: Markdown does not open bold on ``**``
    followed by punctuation right after a letter ("that**, sir**" prints the stars), so an invisible word
    joiner stands between the stars and punctuation at either end."""
    start = _WORD_JOINER if not markdown[:1].isalnum() else ""
    end = _WORD_JOINER if not markdown[-1:].isalnum() else ""
    return f"**{start}{markdown}{end}**"
