"""Who a class poll counts (issue 39 §1): students' ids signed by the server, and how fast new ones are issued, on
a fake clock. The stores' side (a poll counts only issued ids, with either store) is in
tests/test_classroom_store.py; one session presenting forged ids over Streamlit's protocol in
tests/test_class_poll.py."""

from __future__ import annotations

import hmac
import secrets

import pytest

from explorer.classroom import buckets, codes, students

SECRET = bytes(range(32))


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_issued_id_is_well_shaped_distinct_and_checks_under_its_own_secret():
    issued = [codes.new_student_id(SECRET) for _ in range(1_000)]
    assert len(set(issued)) == len(issued)
    for student in issued[:50]:
        nonce, mac = student.split("-")
        assert len(nonce) == 24 and len(mac) == 32 and len(student) == 57
        assert codes.is_student_id(student)  # the shape the stores' lookups accept
        assert codes.is_signed_student_id(student, SECRET)
    assert codes.sign_student("0" * 24, SECRET) == codes.sign_student("0" * 24, SECRET)  # reproducible
    assert codes.sign_student("0" * 24, SECRET) != codes.sign_student("0" * 23 + "1", SECRET)


def _flipped(student: str, at: int) -> str:
    digit = "1" if student[at] != "1" else "2"
    return student[:at] + digit + student[at + 1 :]


def test_forged_truncated_altered_and_other_secrets_ids_are_refused(monkeypatch):
    student = codes.new_student_id(SECRET)
    nonce, mac = student.split("-")
    refused = [
        secrets.token_hex(16),  # what browsers made before the server issued ids
        f"{secrets.token_hex(12)}-{secrets.token_hex(16)}",  # the shape, under no secret
        codes.new_student_id(secrets.token_bytes(32)),  # another server's
        codes.new_student_id(SECRET[:-1]),  # a secret one byte short
        student[:-1],  # cut
        student[1:],
        student + "0",  # lengthened
        _flipped(student, 0),  # one digit of the nonce
        _flipped(student, len(student) - 1),  # one digit of the MAC
        f"{nonce}-{mac[::-1]}",
        student.upper(),
        f"{nonce}_{mac}",
        f" {student}",
        f"{nonce}-{hmac.new(SECRET, nonce.encode(), 'sha256').hexdigest()[:32]}",  # the MAC without its label
        "",
        None,
        57,
        "\ud800" * 57,
    ]
    compared = []
    real = hmac.compare_digest
    monkeypatch.setattr(codes.hmac, "compare_digest", lambda a, b: compared.append(1) or real(a, b))
    assert [given for given in refused if codes.is_signed_student_id(given, SECRET)] == []
    assert codes.is_signed_student_id(student, SECRET)
    # Every well-shaped candidate went through the constant-time comparison (no early exit on a wrong MAC).
    well_shaped = [given for given in refused if isinstance(given, str) and codes._SIGNED_STUDENT.fullmatch(given)]
    assert len(compared) == len(well_shaped) + 1


def test_a_class_behind_one_school_router_all_get_ids_at_once():
    clock = FakeClock()
    mints = students.MintLimits(clock=clock)
    # Two classes of 45 open the link in the same second from one address, then a third arrives.
    assert [mints.take("203.0.113.7") for _ in range(90)] == [None] * 90
    assert [mints.take("203.0.113.7") for _ in range(students.BURST - 90)] == [None] * (students.BURST - 90)
    wait = mints.take("203.0.113.7")
    assert wait == pytest.approx(1 / students.PER_SECOND)  # said to the student: answer again in a second
    clock.now += wait
    assert mints.take("203.0.113.7") is None, "a student told to wait is issued an id when the wait is over"
    assert mints.take("198.51.100.9") is None, "another address has its own"
    # Within a minute of the burst, 120 more new browsers behind the router have their ids.
    issued = 0
    for _ in range(600):
        clock.now += 0.1
        issued += mints.take("203.0.113.7") is None
    assert issued == pytest.approx(60 * students.PER_SECOND, abs=1)


def test_one_client_opening_sessions_to_collect_ids_is_held_to_the_pace():
    clock = FakeClock()
    mints = students.MintLimits(clock=clock)
    issued = 0
    for _ in range(740):  # the flood: 74 runs a second for 10 s, each a new session asking for an id
        clock.now += 1 / 74
        issued += mints.take(None) is None  # loopback (or a proxy on this machine) is one address too
    assert issued <= students.BURST + 10 * students.PER_SECOND + 1  # 120, against 500 counted before
    # At the pace, a poll's 500 voters take minutes from one address.
    assert (500 - students.BURST) / students.PER_SECOND >= 180


def test_the_buckets_stay_bounded(monkeypatch):
    monkeypatch.setattr(buckets, "MAX_BUCKETS", 50)
    mints = students.MintLimits(burst=1, clock=FakeClock())
    for n in range(500):
        assert mints.take(f"10.0.{n // 256}.{n % 256}") is None
    assert len(mints._buckets) == 50
    assert mints.take("10.0.1.243") is not None, "the most recent addresses are kept"
