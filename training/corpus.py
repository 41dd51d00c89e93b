"""Fetch and clean the training corpus: public-domain novels packaged in Debian.

The texts come from two Debian (bookworm) packages of CRAN data packages:

* ``r-cran-janeaustenr`` 1.0.0-1 (MIT): Jane Austen's six completed novels.
* ``r-cran-tokenizers`` 0.3.0-1 (MIT): the ``mobydick`` data set (Melville).

The novels themselves are public domain (Project Gutenberg transcriptions);
the R packaging is MIT.  The data sit in R "lazy-load" databases
(``data/Rdata.rdx`` + ``Rdata.rdb``), so a tiny reader for R's XDR
serialisation format is included here instead of requiring R itself.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

# (debian package, version, R package name, objects in reading order)
SOURCES = [
    (
        "r-cran-janeaustenr",
        "1.0.0-1",
        "janeaustenr",
        [
            "sensesensibility",
            "prideprejudice",
            "mansfieldpark",
            "emma",
            "northangerabbey",
            "persuasion",
        ],
    ),
    ("r-cran-tokenizers", "0.3.0-1", "tokenizers", ["mobydick"]),
]
SITE_LIBRARY = Path("usr/lib/R/site-library")


# --------------------------------------------------------------------------- R deserialisation
# Only the subset of R's serialisation format needed for character vectors,
# lists and the lazy-load index (see R's src/main/serialize.c).
NILVALUE, REFSXP, ALTREP = 254, 255, 238
SPECIAL_NIL = {254, 253, 252, 251, 250, 242, 241}  # singletons we map to None
PAIRLIST_TYPES = {2, 6, 17, 239, 240}  # LISTSXP, LANGSXP, DOTSXP, ATTRLIST, ATTRLANG


class _Reader:
    def __init__(self, data: bytes):
        self.buf, self.pos, self.refs = data, 0, []

    def int(self) -> int:
        (value,) = struct.unpack_from(">i", self.buf, self.pos)
        self.pos += 4
        return value

    def raw(self, n: int) -> bytes:
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def length(self) -> int:
        n = self.int()
        if n == -1:  # long vector: two 32-bit halves
            n = (self.int() << 32) + self.int()
        return n

    def header(self) -> None:
        if self.raw(2) != b"X\n":
            raise ValueError("only XDR-format R serialisations are supported")
        version = self.int()
        self.int(), self.int()  # writer / minimal reader R versions
        if version == 3:
            self.raw(self.int())  # native encoding name

    def item(self):
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if kind in SPECIAL_NIL:
            return None
        if kind == REFSXP:
            index = flags >> 8 or self.int()
            return self.refs[index - 1]
        if kind == 1:  # SYMSXP: name is a CHARSXP, remembered for later REFSXPs
            sym = self.item()
            self.refs.append(sym)
            return sym
        if kind in PAIRLIST_TYPES:
            return self._pairlist(has_attr, has_tag)
        if kind == 9:  # CHARSXP
            n = self.int()
            return None if n == -1 else self.raw(n).decode("utf-8", "replace")
        if kind == ALTREP:
            self.item()  # class info
            state = self.item()
            self.item()  # attributes
            return state
        value = self._vector(kind)
        attrs = self.item() if has_attr else None
        return _with_names(value, attrs)

    def _pairlist(self, has_attr, has_tag):
        out = {}
        while True:
            if has_attr:
                self.item()
            tag = self.item() if has_tag else None
            out[tag if tag is not None else len(out)] = self.item()
            flags = self.int()  # the CDR: either another pairlist cell or NIL
            kind = flags & 0xFF
            if kind == NILVALUE:
                return out
            if kind not in PAIRLIST_TYPES:
                raise ValueError(f"unexpected pairlist tail type {kind}")
            has_attr, has_tag = flags & (1 << 9), flags & (1 << 10)

    def _vector(self, kind: int):
        n = self.length()
        if kind in (10, 13):  # LGLSXP / INTSXP
            return list(struct.unpack_from(f">{n}i", self.raw(4 * n)))
        if kind == 14:  # REALSXP
            return list(struct.unpack_from(f">{n}d", self.raw(8 * n)))
        if kind in (16, 19, 20):  # STRSXP / VECSXP / EXPRSXP
            return [self.item() for _ in range(n)]
        raise ValueError(f"unsupported R type {kind}")


def _with_names(value, attrs):
    # A named list becomes a dict; that is all the lazy-load index needs.
    names = attrs.get("names") if isinstance(attrs, dict) else None
    return dict(zip(names, value, strict=True)) if names else value


def unserialize(data: bytes):
    reader = _Reader(data)
    reader.header()
    return reader.item()


def _decompress_rdb_entry(blob: bytes, compressed) -> bytes:
    # Each entry is a 4-byte length, then (for compression type 2/3) a type byte.
    body = blob[4:]
    if compressed in (True, 1):
        return zlib.decompress(body)
    codec, body = body[:1], body[1:]
    decoders = {
        b"Z": zlib.decompress,
        b"2": bz2.decompress,
        b"X": lzma.decompress,
        b"0": bytes,
    }
    return decoders[codec](body)


def read_lazyload(prefix: Path) -> dict:
    """Read every variable in an R lazy-load database ``prefix.rdx/.rdb``."""
    index = unserialize(gzip.decompress(prefix.with_suffix(".rdx").read_bytes()))
    rdb = prefix.with_suffix(".rdb").read_bytes()
    compressed = index["compressed"][0]
    out = {}
    for name, (offset, size) in index["variables"].items():
        out[name] = unserialize(_decompress_rdb_entry(rdb[offset : offset + size], compressed))
    return out


# --------------------------------------------------------------------------- fetching
def fetch_debs(workdir: Path) -> Path:
    """``apt-get download`` the pinned packages and unpack them under ``workdir/root``."""
    root = workdir / "root"
    workdir.mkdir(parents=True, exist_ok=True)
    for package, version, rname, _ in SOURCES:
        if (root / SITE_LIBRARY / rname / "data" / "Rdata.rdb").exists():
            continue
        subprocess.run(["apt-get", "download", f"{package}={version}"], cwd=workdir, check=True)
        deb = next(workdir.glob(f"{package}_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root


# --------------------------------------------------------------------------- cleaning
@dataclass
class Document:
    """One novel chapter (or front-matter block) of cleaned prose."""

    book: str
    text: str


# "CHAPTER I", "Chapter 12", "CHAPTER 1. Loomings.", "VOLUME II"
CHAPTER = re.compile(r"^\s*(CHAPTER|Chapter|VOLUME|Volume)\s+([IVXLC]+|\d+)\b\.?(\s.{0,60})?$")
EPILOGUE = re.compile(r"^\s*(Epilogue|EPILOGUE|ETYMOLOGY|EXTRACTS)\b.*$")


def _paragraphs(lines: list[str]) -> list[str]:
    """Join hard-wrapped lines into paragraphs (blank line = paragraph break)."""
    paras, current = [], []
    for line in lines:
        line = line.strip()
        if line:
            current.append(line)
        elif current:
            paras.append(" ".join(current))
            current = []
    if current:
        paras.append(" ".join(current))
    return paras


def _clean_paragraph(text: str) -> str:
    text = re.sub(r"_(\w[^_]*?)_", r"\1", text)  # Gutenberg _italics_
    text = text.replace("--", " -- ").replace("\u2014", " -- ")
    return re.sub(r"\s+", " ", text).strip()


def split_chapters(book: str, lines: list[str]) -> list[Document]:
    """Split one novel into chapter documents; headings themselves are dropped."""
    docs, current = [], []
    for line in lines:
        if CHAPTER.match(line) or EPILOGUE.match(line):
            if current:
                docs.append(current)
            current = []
        else:
            current.append(line)
    if current:
        docs.append(current)
    out = []
    for chunk in docs:
        paras = [_clean_paragraph(p) for p in _paragraphs(chunk)]
        paras = [p for p in paras if _is_prose(p)]
        if sum(len(p) for p in paras) > 500:  # skip title pages / contents lists
            out.append(Document(book, "\n".join(paras)))
    return out


def _is_prose(paragraph: str) -> bool:
    # Drop headings, "THE END", contents lines, Gutenberg markers.
    letters = sum(c.isalpha() for c in paragraph)
    return letters >= 20 and not paragraph.isupper() and "gutenberg" not in paragraph.lower()


def _book_lines(value) -> list[str]:
    # janeaustenr stores one line per element; mobydick is one long (named) string.
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, str):
        return value.splitlines()
    return [line or "" for line in value]


def _strip_moby_front_matter(lines: list[str]) -> list[str]:
    # The tokenizers copy starts with the Gutenberg header; the story begins
    # at "Call me Ishmael" (the etymology/extracts are mostly quotations).
    for i, line in enumerate(lines):
        if line.strip().startswith("Call me Ishmael"):
            return lines[i:]
    return lines


def load_documents(workdir: Path) -> list[Document]:
    """All cleaned chapter documents, in a fixed order (book, then chapter)."""
    root = fetch_debs(workdir)
    docs = []
    for _, _, rname, objects in SOURCES:
        data = read_lazyload(root / SITE_LIBRARY / rname / "data" / "Rdata")
        for name in objects:
            lines = _book_lines(data[name])
            if name == "mobydick":
                lines = _strip_moby_front_matter(lines)
                lines = _strip_gutenberg_footer(lines)
            docs.extend(split_chapters(name, lines))
    return docs


def _strip_gutenberg_footer(lines: list[str]) -> list[str]:
    for i, line in enumerate(lines):
        if "END OF THIS PROJECT GUTENBERG" in line.upper() or "END OF THE PROJECT GUTENBERG" in line.upper():
            return lines[:i]
    return lines
