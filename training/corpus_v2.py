"""The second decoder's corpus: ``corpus.py``'s novels plus the King James Bible, all from Debian packages.

* ``r-cran-janeaustenr`` 1.0.0-1 and ``r-cran-tokenizers`` 0.3.0-1 (MIT packaging): Jane Austen's six
  novels and *Moby-Dick*, read exactly as ``corpus.py`` reads them (public domain).
* ``bible-kjv-text`` 4.38 (the text) and ``bible-kjv`` 4.38 (GPL-2+, the program that decompresses it): the
  Authorized (King James) Version of 1611, public domain (its Debian copyright file says the copyright
  expired; in the UK the Crown's perpetual rights are a royal prerogative, not copyright).

Both Debian packages are unpacked with ``dpkg-deb -x`` (no root); the ``bible`` program is run from the unpacked
tree to print every verse, one per line. Each Bible chapter becomes one document of verses joined by spaces,
so the held-out split (the last chapters of every book, as today) takes the last books of the New Testament.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import corpus  # sibling module: the script runs without packaging
from corpus import Document

BIBLE_PACKAGES = ("bible-kjv-text=4.38", "bible-kjv=4.38")
PACKAGES = [f"{name}={version}" for name, version, _, _ in corpus.SOURCES] + list(BIBLE_PACKAGES)
# "Ge1:1 In the beginning ...", "1Sam3:4 That the LORD ..."
VERSE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")


def fetch_bible(workdir: Path) -> Path:
    """``apt-get download`` the two KJV packages and unpack them under ``workdir/kjv``."""
    root = workdir / "kjv"
    if (root / "usr/lib/bible.data").exists():
        return root
    workdir.mkdir(parents=True, exist_ok=True)
    for spec in BIBLE_PACKAGES:
        subprocess.run(["apt-get", "download", spec], cwd=workdir, check=True)
        name = spec.split("=")[0]
        deb = next(workdir.glob(f"{name}_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root


def bible_verses(workdir: Path) -> list[str]:
    """Every verse, ``Book<chapter>:<verse> text``, printed by the packaged ``bible`` program."""
    root = fetch_bible(workdir)
    out = subprocess.run(
        [str(root / "usr/bin/bible"), "-p", str(root / "usr/lib"), "-f", "-l", "0", "gen1:1-rev22:21"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [line for line in out.splitlines() if line.strip()]


def bible_documents(workdir: Path) -> list[Document]:
    """One document per chapter (1,189 of them), verses joined by spaces, in canonical order."""
    chapters: dict[tuple[str, str], list[str]] = {}
    for line in bible_verses(workdir):
        match = VERSE.match(line)
        if match is None:
            raise ValueError(f"unexpected line from bible: {line[:60]!r}")
        book, chapter, _, text = match.groups()
        chapters.setdefault((book, chapter), []).append(text.strip())
    return [Document("kjv", " ".join(verses)) for verses in chapters.values()]


def load_documents(workdir: Path) -> list[Document]:
    """The novels (``corpus.load_documents``), then the Bible; ``book`` names each source for the split."""
    return corpus.load_documents(workdir) + bible_documents(workdir)
