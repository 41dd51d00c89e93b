"""The server's numeric settings (issue 39 §4): each bad value is one sentence naming the variable, the value as set
(control characters shown, not obeyed) and what it takes; ``explorer serve`` exits with it before Streamlit
starts, and the app shows it in place of its pages."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from explorer import cli, settings
from explorer.classroom import state
from tests.test_cli import Started

BAD = ["abc", "-5", "0", "1.5", "²", "9" * 30, "\x1b[31m7", ""]  # "" is unset: the default, never a problem


@pytest.mark.parametrize("name", sorted(settings.SETTINGS))
@pytest.mark.parametrize("value", BAD)
def test_a_bad_value_is_one_sentence_naming_the_variable_the_value_and_the_range(name, value):
    environ = {name: value}
    if not value:
        assert settings.problems(environ) == [] and settings.number(name, 7, environ) == 7
        return
    setting = settings.SETTINGS[name]
    with pytest.raises(settings.SettingError) as refused:
        settings.number(name, 7, environ)
    message = str(refused.value)
    assert message.startswith(f"{name} is “")
    assert f"from {setting.low:,} to {setting.high:,}" in message
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", message), "control characters shown, not sent"
    shown = settings._shown(value)
    assert f"“{shown}”" in message and len(shown) <= settings.SHOWN_CHARS + 10
    assert settings.problems(environ) == [message]
    assert settings.number_or_default(name, 7, environ) == 7


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("EXPLORER_MAX_CLASSES", "5", 5),
        ("EXPLORER_MAX_CLASSES", " 12 ", 12),
        ("EXPLORER_MAX_PARAMS", "5e8", 5 * 10**8),
        ("EXPLORER_MAX_PARAMS", "2.5e8", 25 * 10**7),
        ("EXPLORER_CLASS_IDLE_MINUTES", "1440", 1440),
    ],
)
def test_good_values_are_read(name, text, value):
    assert settings.number(name, 1, {name: text}) == value and settings.problems({name: text}) == []


def test_a_short_teacher_passphrase_is_refused_without_being_shown():
    (problem,) = settings.problems({settings.PASSPHRASE: "hunter2"})
    assert "7 characters long" in problem and "hunter2" not in problem
    assert settings.problems({settings.PASSPHRASE: "correct horse battery"}) == []


@pytest.mark.parametrize("value", ["abc", "-5", "0"])
def test_the_class_store_refuses_a_bad_class_limit_with_the_sentence(monkeypatch, value):
    monkeypatch.setattr(state, "_store", None)
    monkeypatch.delenv("EXPLORER_REDIS_URL", raising=False)
    monkeypatch.setenv("EXPLORER_MAX_CLASSES", value)
    with pytest.raises(settings.SettingError, match=f"EXPLORER_MAX_CLASSES is “{value}”: it must be a whole number"):
        state.class_store()


def test_the_class_store_takes_its_idle_minutes(monkeypatch):
    monkeypatch.setattr(state, "_store", None)
    monkeypatch.delenv("EXPLORER_REDIS_URL", raising=False)
    monkeypatch.setenv("EXPLORER_CLASS_IDLE_MINUTES", "5")
    assert state.class_store().lifetime == 300.0


@pytest.mark.parametrize("value", ["abc", "-5", "0", "\x1b]0;owned\x07"])
def test_serve_exits_with_the_sentence_before_starting(monkeypatch, capsys, value):
    monkeypatch.setattr(cli.os, "execve", lambda *args: (_ for _ in ()).throw(Started))
    monkeypatch.setenv("EXPLORER_MAX_CLASSES", value)
    assert cli.main(["serve", "--hosted"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("explorer serve: EXPLORER_MAX_CLASSES is “") and "from 1 to 1,000" in err
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", err)


def test_serve_starts_with_good_settings(monkeypatch):
    monkeypatch.setattr(cli.os, "execve", lambda *args: (_ for _ in ()).throw(Started))
    monkeypatch.setenv("EXPLORER_MAX_CLASSES", "4")
    with pytest.raises(Started):
        cli.main(["serve"])


@pytest.mark.parametrize(("name", "value"), [("EXPLORER_MAX_CLASSES", "abc"), ("EXPLORER_CACHE_MB", "-5")])
def test_the_app_shows_the_sentence_in_place_of_its_pages(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    at = AppTest.from_file("../app.py", default_timeout=60).run()
    assert not at.exception
    (error,) = at.error
    assert f"{name} is “{value}”" in error.value.replace("\\", "")
    assert not at.get("page_link"), "no page runs"
