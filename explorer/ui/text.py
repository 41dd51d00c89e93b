"""Visitor-controlled text shown literally inside Streamlit's messages, which render Markdown.

Texts, model names and URL parameters come from whoever opened the link. Streamlit's ``st.info``,
``st.error``, expander labels and captions render Markdown (links, images, code spans, some HTML,
LaTeX), so each such value goes through ``literal`` first: every ASCII punctuation character is
backslash-escaped (CommonMark allows it for all of them), which leaves the visible text unchanged
and gives Markdown nothing to interpret. Newlines become spaces so a value cannot start a new block.
"""

from __future__ import annotations

import string

from explorer.labels import visible

_ESCAPED = {ord(char): "\\" + char for char in string.punctuation}
_FLATTENED = {ord("\n"): " ", ord("\r"): " ", ord("\t"): " ", 0x2028: " ", 0x2029: " "}


def literal(text: object) -> str:
    """``text`` as Markdown that displays exactly these characters and links, embeds or runs nothing; control,
    bidirectional and invisible characters shown as visible stand-ins (``explorer.labels.visible``)."""
    return visible(str(text).translate(_FLATTENED)).translate(_ESCAPED)



def prompt_and_continuation(prompt: str, continuation: str) -> str:
    """Markdown: the prompt as it is, then the generated text in bold (both shown literally)."""
    lead = " " if continuation[:1].isspace() else ""
    body = continuation.strip()
    return f"{literal(prompt)}{lead}**{literal(body)}**" if body else literal(prompt)
