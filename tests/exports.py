"""Checks that an exported file is what a slide needs: PNG decoded at 3840x2160, SVG parsed as XML at
1920x1080, HTML a standalone page that asks no network for its scripts."""

from __future__ import annotations

import re
import struct
import xml.etree.ElementTree as ElementTree

PNG_SIZE = (3840, 2160)
SVG_SIZE = ("1920", "1080")


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def check_export(fmt: str, data: bytes) -> None:
    if fmt == "png":
        import io

        from PIL import Image

        image = Image.open(io.BytesIO(data))
        image.load()  # decodes every pixel
        assert image.size == PNG_SIZE
        # Drawn, not a blank slide: text, marks and lines leave dark pixels.
        histogram = image.convert("L").histogram()
        assert sum(histogram[:128]) > 0.002 * sum(histogram), "a blank image"
    elif fmt == "svg":
        root = ElementTree.fromstring(data)  # raises on a non-XML character
        assert (root.get("width"), root.get("height")) == SVG_SIZE
    else:
        page = data.decode("utf-8")
        assert page.lstrip().lower().startswith("<html") or page.lstrip().lower().startswith("<!doctype html")
        assert not re.search(r"<script[^>]+src=[\"']?https?:", page), "a script from the network"
