"""Visible labels: every character a renderer rejects or a reader cannot see gets a visible stand-in."""

import unicodedata
import xml.etree.ElementTree as ET

import pytest

from explorer.labels import visible, visible_labels

HOSTILE = [
    "\x00",
    "\x17",
    "\x1f",
    "\x7f",
    "\x85",
    "\u200e",
    "\u202e",
    "\ufffe",
    "\ud800",
]


@pytest.mark.parametrize("char", HOSTILE)
def test_hostile_characters_become_visible_and_xml_safe(char):
    shown = visible(f"a{char}b")
    assert char not in shown
    assert shown.startswith("a") and shown.endswith("b") and len(shown) > 2
    ET.fromstring(f"<t>{shown}</t>")  # parses as XML
    shown.encode("utf-8")  # encodable (no lone surrogate left)


def test_control_pictures_for_c0_and_del():
    assert visible("\x17") == "\u2417"
    assert visible("\x00\x1f\x7f") == "\u2400\u241f\u2421"
    assert visible("\x85") == "\\x85"
    assert visible("\u202e") == "\\u202E"


@pytest.mark.parametrize(
    "text",
    ["plain text", "שלום עולם", "مرحبا بالعالم", "👩\u200d👩\u200d👧", "🇬🇧", "Ġflies ␣ ↵", "naïve café", "x" * 5000],
)
def test_printable_text_is_kept(text):
    assert visible(text) == text


def test_no_invisible_or_control_character_survives():
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF) + "\ud800\udfff"
    shown = visible(everything)
    for char in set(shown):
        code = ord(char)
        assert not 0xD800 <= code <= 0xDFFF
        assert unicodedata.category(char) not in ("Cc", "Zl", "Zp")
        if unicodedata.category(char) == "Cf":
            assert code in (0x200C, 0x200D) or 0xE0020 <= code < 0xE0080


def test_visible_labels_maps_each():
    assert visible_labels(["a", "\x17"]) == ("a", "\u2417")
