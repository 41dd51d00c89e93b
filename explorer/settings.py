"""The server's numeric settings (``EXPLORER_*`` environment variables), read one way and checked at start.

Each is a whole number within a range (``SETTINGS``: the name, what it sets, the smallest and largest value it
takes). ``number`` reads one: ASCII digits (``explorer.checks.whole_number``), or for the large ones a power of
ten such as ``5e8``; unset or empty is the caller's default; anything else is a ``SettingError`` whose message
names the variable, shows the value as it was set (control characters made visible) and says what it takes.

``problems`` checks every setting at once, and the teacher passphrase's length: ``explorer serve`` exits with
them before the server starts, and the app shows them in place of any page (``explorer.ui.navigation``), so a
typo in a host's environment is one sentence, never a traceback or a setting silently ignored. Values read while
modules are imported (before either check can speak) use ``number_or_default``. No Streamlit here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from explorer.checks import printable, whole_number

SHOWN_CHARS = 40  # of a bad value, in a message
PASSPHRASE = "EXPLORER_TEACHER_PASSPHRASE"
MIN_PASSPHRASE = 8  # characters


@dataclass(frozen=True)
class Setting:
    name: str
    sets: str  # what the number is, for the message
    low: int
    high: int


SETTINGS = {
    setting.name: setting
    for setting in (
        Setting("EXPLORER_MAX_CLASSES", "how many live classes may run at once on this deployment", 1, 1_000),
        Setting("EXPLORER_CLASS_IDLE_MINUTES", "minutes a live class lasts without its teacher's page", 1, 1_440),
        Setting("EXPLORER_MAX_CONCURRENT", "model runs at a time", 1, 9_999),
        Setting("EXPLORER_CACHE_MB", "MiB (2²⁰ bytes) of results kept for the class", 1, 10_000_000),
        Setting("EXPLORER_EXPORT_WORKERS", "export worker processes", 1, 999),
        Setting("EXPLORER_MAX_PARAMS", "the largest model's parameters", 1, 10**13),
        Setting("EXPLORER_MAX_TEXT_CHARS", "characters per text", 1, 10_000_000),
        Setting("EXPLORER_MAX_NEW_TOKENS", "decoding steps", 1, 100_000),
        Setting("EXPLORER_MAX_BEAMS", "beams", 1, 1_000),
    )
}

_POWER_OF_TEN = re.compile(r"[0-9]{1,6}(\.[0-9]{1,6})?[eE][0-9]{1,2}")  # 5e8, 2.5e8


class SettingError(ValueError):
    """A setting's value that the server cannot use: the message says which, what it was, and what it takes."""


def number(name: str, default: int, environ: Mapping[str, str] | None = None) -> int:
    """Setting ``name`` (a key of ``SETTINGS``) from ``environ`` (default ``os.environ``); ``default`` when it is
    unset or empty; ``SettingError`` when it is anything but a whole number in the setting's range."""
    setting = SETTINGS[name]
    text = (os.environ if environ is None else environ).get(name)
    if text is None or not text.strip():
        return default
    value = _whole(text.strip(), digits=len(str(setting.high)))
    if value is None or not setting.low <= value <= setting.high:
        raise SettingError(
            f"{name} is “{_shown(text)}”: it must be a whole number from {setting.low:,} to {setting.high:,} "
            f"({setting.sets}). Set it to such a number, or unset it for the default."
        )
    return value


def number_or_default(name: str, default: int, environ: Mapping[str, str] | None = None) -> int:
    """``number``, or ``default`` for a bad value: for values read while modules are imported, before the start's
    check (``problems``) can say what is wrong; a server never runs with them (see the module's docstring)."""
    try:
        return number(name, default, environ)
    except SettingError:
        return default


def problems(environ: Mapping[str, str] | None = None) -> list[str]:
    """One sentence per setting the server cannot use (none when all are fine)."""
    environ = os.environ if environ is None else environ
    found = []
    for name in SETTINGS:
        try:
            number(name, 0, environ)
        except SettingError as error:
            found.append(str(error))
    passphrase = (environ.get(PASSPHRASE) or "").strip()
    if passphrase and len(passphrase) < MIN_PASSPHRASE:
        found.append(  # its length only: the passphrase itself is never shown
            f"{PASSPHRASE} is {len(passphrase)} characters long: a teacher passphrase must be at least "
            f"{MIN_PASSPHRASE} (a few words are best). Set a longer one, or unset it."
        )
    return found


def _whole(text: str, *, digits: int) -> int | None:
    value = whole_number(text, digits=digits)
    if value is not None or not _POWER_OF_TEN.fullmatch(text):
        return value
    try:
        exact = Decimal(text)
    except InvalidOperation:
        return None
    return int(exact) if exact == exact.to_integral_value() else None


def _shown(text: str) -> str:
    shown = text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"
    return printable(shown)
