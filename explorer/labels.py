"""One way to make any text safe to show and to export: what the screen shows, the PNG, SVG and HTML say too.

Visitor text (prompts, model names, URL values) and token labels (a vocabulary holds control-character
tokens) reach titles, tick labels, hovers, legends and table cells. Some characters break a renderer or
mislead a reader:

- C0 controls, DEL and C1 controls are not XML characters (an SVG holding U+0017 does not parse; vl-convert
  aborts the whole process on one) and are invisible on screen. C0 and DEL become their Unicode *Control
  Pictures* (U+0017 -> ␗, U+007F -> ␡); C1 controls, which have no pictures, an escape (``\\x85``).
- Lone surrogates and noncharacters (U+FFFE, U+FFFF, U+FDD0..U+FDEF, the last two of every plane) cannot be
  encoded or are reserved: an escape (``\\uD800``, ``\\uFFFE``).
- Bidirectional controls (LRM, RLM, ALM, embeddings, overrides, isolates) would reorder what follows, and
  invisible format characters (zero-width space, word joiner, BOM, soft hyphen) hide in names: an escape,
  shown rather than obeyed. The zero-width joiner and non-joiner stay (emoji sequences and Persian or
  Indic words need them), as do the tag characters of flag sequences.
- Line and paragraph separators would break a label onto new lines: an escape.

Right-to-left letters (Hebrew, Arabic), emoji and every other printable character are kept as they are.
"""

from __future__ import annotations

import re
import unicodedata

_KEPT_FORMAT = {0x200C, 0x200D} | set(range(0xE0020, 0xE0080))  # ZWNJ, ZWJ, emoji tag characters


def _is_noncharacter(code: int) -> bool:
    return 0xFDD0 <= code <= 0xFDEF or (code & 0xFFFE) == 0xFFFE


def _escape(code: int) -> str:
    return f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


def _stand_in(code: int) -> str | None:
    """The visible stand-in for one code point, or None to keep the character."""
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    if 0x80 <= code <= 0x9F:
        return f"\\x{code:02X}"
    if 0xD800 <= code <= 0xDFFF or _is_noncharacter(code):
        return _escape(code)
    category = unicodedata.category(chr(code))
    if category in ("Zl", "Zp") or (category == "Cf" and code not in _KEPT_FORMAT):
        return _escape(code)
    return None


# Everything that may need a stand-in; most labels contain none, and the regex finds that fast.
_SUSPECT = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    r"\u2028-\u202e\u2060-\u206f\ud800-\udfff\ufdd0-\ufdef\ufeff\ufff9-\ufffb\ufffe\uffff"
    r"\U00010000-\U0010ffff]"
)


def visible(text: object) -> str:
    """``text`` with every character a renderer rejects or a reader cannot see replaced by a visible stand-in."""
    text = str(text)
    if not _SUSPECT.search(text):
        return text
    out = []
    for char in text:
        stand_in = _stand_in(ord(char))
        out.append(char if stand_in is None else stand_in)
    return "".join(out)


def visible_labels(labels) -> tuple[str, ...]:
    """``visible`` applied to each label of a sequence (tick labels, legend entries, table cells)."""
    return tuple(visible(label) for label in labels)
