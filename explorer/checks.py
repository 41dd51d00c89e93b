"""Values that come from outside (a link, a component's message, an environment variable, a caller of the API,
a terminal) read once, the same way everywhere: the value accepted, or None, or an ``InputError`` that says
what to change. Nothing here raises anything else, whatever it is given. No torch, no Streamlit.

- ``whole_number``: ASCII digits only, and few of them. ``"²".isdigit()`` is True but ``int("²")`` raises, and
  ``int()`` refuses more than 4,300 digits: ``str.isdigit()`` then ``int()`` is a traceback waiting for a link.
- ``message_value``: a browser's JSON, bounded in size and nesting before it is parsed (100,000 nested ``[`` is
  a ``RecursionError`` inside ``json.loads``).
- ``given_text`` and ``given_seed``: the API's texts and seeds, refused with a sentence, not a raw
  ``AttributeError`` or ``OverflowError`` from the tokenizer or torch.
- ``printable``: text for a terminal, its control characters (escape sequences) shown, not obeyed.
"""

from __future__ import annotations

import json
import numbers
import re

from explorer.errors import InputError
from explorer.labels import visible

MAX_MESSAGE_CHARS = 65_536  # a press of the lecture's keys is about 30 characters
MAX_MESSAGE_DEPTH = 16  # the components' messages nest two or three levels
SEED_LIMIT = 2**64  # torch.Generator.manual_seed takes 0 ... 2**64 - 1 (negative ones wrap around)


def whole_number(text: object, *, digits: int = 6) -> int | None:
    """``text`` as an int when it is 1 to ``digits`` ASCII digits (``"007"`` is 7), else None."""
    if not isinstance(text, str) or not 0 < len(text) <= digits or not (text.isascii() and text.isdigit()):
        return None
    return int(text)


def message_value(text: object, *, max_chars: int = MAX_MESSAGE_CHARS, max_depth: int = MAX_MESSAGE_DEPTH):
    """A browser's JSON message parsed, or None when it is not text, is longer than ``max_chars``, nests arrays
    and objects deeper than ``max_depth`` (checked before parsing) or is not JSON."""
    if not isinstance(text, str) or len(text) > max_chars or json_depth(text) > max_depth:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError, as is an int of 4,300+ digits
        return None


_STRUCTURE = re.compile(r'[\[\]{}"\\]')


def json_depth(text: str) -> int:
    """How deep the arrays and objects of JSON ``text`` nest (brackets inside strings do not count), without
    parsing it: one pass over its brackets, quotes and backslashes."""
    depth = deepest = 0
    in_string = False
    escaped_at = -1  # the position a backslash in a string escapes
    for match in _STRUCTURE.finditer(text):
        at, char = match.start(), match.group()
        if at == escaped_at:
            continue
        if in_string:
            if char == "\\":
                escaped_at = at + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def given_text(text: object, what: str = "text") -> str:
    """``text`` if a tokenizer can read it: a ``str`` (None reads as empty, for the caller's own "type some
    text") without lone surrogates (halves of a UTF-16 pair, not characters: text decoded with
    ``errors="surrogateescape"`` or cut from UTF-16 holds them). Otherwise ``InputError`` saying what to change."""
    if text is None:
        return ""
    if not isinstance(text, str):
        raise InputError(
            f"The {what} must be a string (str), not {type(text).__name__}: "
            'pass the text itself, e.g. "time flies like an arrow".'
        )
    surrogate = _SURROGATE.search(text)
    if surrogate:
        raise InputError(
            f"The {what} holds a lone surrogate (U+{ord(surrogate.group()):04X} at character {surrogate.start()}), "
            "half of a UTF-16 pair and not a character, which no tokenizer reads: remove it, or decode the text "
            'with errors="replace".'
        )
    return text


def given_seed(seed: object) -> int:
    """``seed`` as an int if ``torch.Generator.manual_seed`` takes it as it is (0 ... 2**64 - 1), else
    ``InputError``. NumPy's integers are ints here; bools and numbers with a fraction are not."""
    whole = isinstance(seed, numbers.Integral) and not isinstance(seed, bool)
    if not whole or not 0 <= seed < SEED_LIMIT:
        got = (f"{int(seed):,}" if abs(seed) < 10**30 else "a larger number") if whole else type(seed).__name__
        raise InputError(f"The seed must be a whole number from 0 to 2**64 - 1 (got {got}): pass an int, e.g. seed=0.")
    return int(seed)


def printable(text: object) -> str:
    """``text`` for one line of a terminal: every control character (ESC starting an escape sequence, a
    newline starting a fake line, a carriage return overwriting one), bidirectional control and invisible
    character shown as a visible stand-in (``explorer.labels.visible``)."""
    return visible(text)
