"""Who may start a live class, and how often (issue 39 §2): the teacher passphrase and the start limits, on a fake
clock. The page's side is in tests/test_app_class.py."""

from __future__ import annotations

import pytest

from explorer.classroom import buckets, teachers
from explorer.settings import PASSPHRASE


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("environ", "hosted", "policy"),
    [
        ({}, False, teachers.OPEN),  # a teacher's laptop: as before
        ({}, True, teachers.CLOSED),  # a public server with no passphrase: nobody
        ({PASSPHRASE: "   "}, True, teachers.CLOSED),  # blank is unset
        ({PASSPHRASE: "correct horse battery"}, True, teachers.PASSPHRASE_NEEDED),
        ({PASSPHRASE: "correct horse battery"}, False, teachers.PASSPHRASE_NEEDED),
    ],
)
def test_who_may_start_follows_the_passphrase_and_hosted_mode(environ, hosted, policy):
    assert teachers.start_policy(hosted, environ) == policy


def test_only_the_passphrase_itself_matches():
    expected = teachers.configured({PASSPHRASE: "correct horse battery"})
    assert teachers.matches("correct horse battery", expected)
    assert teachers.matches("  correct horse battery\n", expected)
    wrong = ["", "correct horse", "correct horse battery!", "Correct horse battery", None, 5, "\ud800", "x" * 5000]
    assert not any(teachers.matches(given, expected) for given in wrong)
    assert not teachers.matches("", None) and not teachers.matches("anything", None)
    assert "correct" not in expected  # a digest, not the passphrase


def test_a_session_starts_a_few_classes_then_one_more_each_refill():
    clock = FakeClock()
    limits = teachers.StartLimits(clock=clock)
    for _ in range(teachers.PER_SESSION):
        assert limits.take("tab", "203.0.113.7") is None
    assert limits.take("tab", "203.0.113.7") == ("session", 4)  # one more in WINDOW / PER_SESSION: 200 s
    assert limits.take("other tab", "203.0.113.7") is None, "a flood from one tab leaves others theirs"
    clock.now += teachers.WINDOW / teachers.PER_SESSION
    assert limits.take("tab", "203.0.113.7") is None
    assert limits.take("tab", "203.0.113.7") is not None


def test_an_address_starts_at_most_its_share_whatever_the_sessions():
    clock = FakeClock()
    limits = teachers.StartLimits(clock=clock)
    started = [limits.take(f"tab {n}", "203.0.113.7") for n in range(teachers.PER_ADDRESS + 5)]
    assert started.count(None) == teachers.PER_ADDRESS
    assert started[-1] == ("address", 1)
    assert limits.take("tab 99", "198.51.100.1") is None, "another address is not held up"


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "::ffff:127.0.0.1", None])
def test_loopback_and_unknown_addresses_count_by_session_only(address):
    limits = teachers.StartLimits(clock=FakeClock())
    results = [limits.take(f"tab {n}", address) for n in range(teachers.PER_ADDRESS + 5)]
    assert results == [None] * len(results)


def test_the_buckets_are_bounded(monkeypatch):
    monkeypatch.setattr(buckets, "MAX_BUCKETS", 50)
    limits = teachers.StartLimits(clock=FakeClock())
    for n in range(500):
        limits.take(f"tab {n}", f"10.0.{n // 250}.{n % 250}")
    assert len(limits._buckets) == 50
