"""Hosted mode: what a public class server lets visitors do, set by the environment (no Streamlit here).

Off for a local ``streamlit run app.py``; the container turns it on with ``EXPLORER_HOSTED=1``. Then:

- Visitors can load Hugging Face Hub ids only: no local paths, no ``..``, no URLs; optionally only those in
  ``EXPLORER_MODELS`` (comma-separated). Names are checked before the file system or the Hub is touched, so
  an existing private folder and a missing one get the same answer.
- A model with more parameters than ``EXPLORER_MAX_PARAMS`` (default 200 million: a free 2-vCPU / 16 GB Space
  runs it for a class) is refused before anything is downloaded, from the Hub's own metadata.
- The server's Hub token is never used for a model a visitor names (no private or gated models through the
  Space), and one download runs at a time.
- Texts are limited to ``EXPLORER_MAX_TEXT_CHARS`` characters (default 2,000 hosted, 20,000 locally) and the
  decoding pages to ``EXPLORER_MAX_NEW_TOKENS`` steps and ``EXPLORER_MAX_BEAMS`` beams (32 and 4 hosted).

Every limit is also checked locally where it protects the app itself (a name too long for the file system,
an id the Hub's validator rejects): the visitor gets a sentence, never a traceback.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass

from huggingface_hub.utils import HFValidationError, validate_repo_id

from explorer import settings
from explorer.errors import ModelLoadError
from explorer.labels import visible

MAX_NAME_CHARS = 200
PREVIEW_CHARS = 60


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _int(environ, key: str, default: int) -> int:
    # Read while modules are imported: a bad value is the default here, and the start refuses it (settings.py).
    return settings.number_or_default(key, default, environ)


@dataclass(frozen=True)
class HostingPolicy:
    """Limits for visitors; ``HostingPolicy.from_env()`` reads them, tests build them directly."""

    hosted: bool = False
    allowed_models: frozenset[str] | None = None
    max_parameters: int | None = None
    max_text_chars: int = 20_000
    max_new_tokens: int = 32
    max_beams: int = 8

    @classmethod
    def from_env(cls, environ=None) -> HostingPolicy:
        environ = os.environ if environ is None else environ
        hosted = _flag(environ.get("EXPLORER_HOSTED"))
        allowed = environ.get("EXPLORER_MODELS", "").strip()
        return cls(
            hosted=hosted,
            allowed_models=frozenset(m.strip() for m in allowed.split(",") if m.strip()) or None,
            max_parameters=_int(environ, "EXPLORER_MAX_PARAMS", 200_000_000) if hosted else None,
            max_text_chars=_int(environ, "EXPLORER_MAX_TEXT_CHARS", 2_000 if hosted else 20_000),
            max_new_tokens=_int(environ, "EXPLORER_MAX_NEW_TOKENS", 32),
            max_beams=_int(environ, "EXPLORER_MAX_BEAMS", 4 if hosted else 8),
        )

    def check_model_name(self, name: str, *, bundled=()) -> str:
        """The name, stripped, if a visitor may load it; otherwise ``ModelLoadError`` with a plain sentence.

        Nothing here touches the file system or the network: it runs before either is asked.
        """
        name = (name or "").strip()
        if not name:
            raise ModelLoadError("No model name given. Type a Hugging Face Hub id such as openai-community/gpt2.")
        shown = preview(name)
        if len(name) > MAX_NAME_CHARS:
            raise ModelLoadError(f"“{shown}” is not a model name: it is too long ({len(name):,} characters).")
        if _CONTROL.search(name):
            raise ModelLoadError(f"“{shown}” is not a model name: it holds control characters (shown as ␀, ␛, ...).")
        if name in bundled:
            return name
        if self.allowed_models is not None and name not in self.allowed_models:
            raise ModelLoadError(
                f"“{shown}” is not offered on this server. Models you can load here: "
                + ", ".join(sorted(self.allowed_models))
                + "."
            )
        if self.hosted:
            if not is_hub_id(name):
                raise ModelLoadError(
                    f"“{shown}” is not a Hugging Face Hub id. On this server, models are loaded from the Hub by id "
                    "(for example openai-community/gpt2), not from folders or web addresses."
                )
            return name
        if _looks_like_path(name):
            return name  # a local folder: loading says clearly if it is not a model
        if not is_hub_id(name):
            raise ModelLoadError(neither_id_nor_folder(name))
        return name


def preview(name: str) -> str:
    """A name as a message quotes it: at most ``PREVIEW_CHARS`` characters, invisible ones made visible."""
    return visible(name if len(name) <= PREVIEW_CHARS else name[: PREVIEW_CHARS - 1] + "…")


def neither_id_nor_folder(name: str) -> str:
    return (
        f"“{preview(name)}” is neither a Hugging Face Hub id (like openai-community/gpt2: letters, digits, “-”, “_” "
        "and “.”, at most 96 characters, with at most one “/”) nor a folder on this machine. Check the spelling."
    )


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def is_hub_id(name: str) -> bool:
    """The Hub's own rule for a repository id (huggingface_hub's validator, which the download would apply)."""
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def _looks_like_path(name: str) -> bool:
    """A folder on this machine (local mode only: hosted mode never asks the file system)."""
    return name.startswith(("/", "./", "../", "~", "\\")) or os.path.isdir(name)


def hub_parameter_count(info) -> tuple[int | None, str]:
    """Parameters of a Hub model from its metadata (``model_info(..., files_metadata=True)``), and how it was
    known: the safetensors header count when the Hub has it, else the weight files' size at 2 bytes per
    parameter (an upper bound for 16- and 32-bit weights)."""
    safetensors = getattr(info, "safetensors", None)
    total = getattr(safetensors, "total", None)
    if total:
        return int(total), "from the Hub's safetensors metadata"
    sizes = [
        (f.size or 0)
        for f in (info.siblings or [])
        if f.rfilename.endswith((".safetensors", ".bin")) and "/" not in f.rfilename
    ]
    if sizes:
        return sum(sizes) // 2, "estimated from the weight files' size"
    return None, "unknown"


class DownloadGate:
    """One model download at a time on a shared server; others learn that a model is being fetched and since
    when, not which one (the name is what another visitor typed)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.current: tuple[str, float] | None = None

    def try_start(self, name: str) -> bool:
        if not self._lock.acquire(blocking=False):
            return False
        self.current = (name, time.monotonic())
        return True

    def finish(self) -> None:
        self.current = None
        self._lock.release()

    def busy_message(self) -> str:
        if self.current is None:
            return "Another model is being downloaded: try again in a moment."
        _, since = self.current
        return (
            f"Another visitor's model is being downloaded (for {time.monotonic() - since:.0f} s): this server "
            "fetches one model at a time. Try again in a moment; the current model stays loaded, and the bundled "
            "and preset models load at once."
        )


POLICY = HostingPolicy.from_env()
DOWNLOADS = DownloadGate()
