"""A class poll over Streamlit's protocol, on a real server (hosted mode): each student's browser counts once,
across reloads and second clicks, made-up ids count nothing, and the poll closes when the teacher shows the answer.

The teacher starts a class on the generation deck's first slide (a question); forty students open the student
link as new browsers (the ``class-student`` component says they kept no id, and keeps the one the server issues)
and click an answer. Ten then reload (a new session presenting the kept id) and answer again, five the same, five
another; five click twice. The teacher's page must count exactly the forty ids, and the revealed poll each id's
last answer; after the reveal no student can vote.

Then one session plays the forger (issue 39): before each of its votes it presents a fresh id (random hex as the
old browsers made, well-shaped ids under no secret or another server's, an honest student's id cut or altered,
none at all, another student's real id), in the same message as the click, as fast as the server answers. It
adds one voter, never more, and never moves another student's answer (with the in-process store here; with Redis
on two servers in tests/test_browser_class_redis.py, whose servers are already warm). The students are
``bench_class``'s protocol clients, a few at a time (2 cores).

Last, a creation flood (issue 39): one session clicks "Start a live class" as fast as the server answers with
nothing typed and wrong passphrases, another with the right one; none, then ``teachers.PER_SESSION`` classes
start, every refusal is said, and a teacher in a new session still starts a class that a student joins.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections import Counter
from urllib.parse import parse_qs, urlencode

import pytest

from bench import bench_class
from bench.bench_class import ClassClient, Drawn, Teacher
from explorer.classroom import codes
from tests.browser import needs_chromium

pytestmark = needs_chromium[:1]  # a server, no browser: marked with the slow tests

STUDENTS = 40
RELOADED = range(10)  # reload and answer again: the even ones their answer, the odd ones another
TWICE = range(10, 15)  # click twice: 10-12 the same button again, 13-14 another
AT_ONCE = 6  # students talking to the server at a time
WAIT = 60.0  # seconds any one step may take (a run takes well under one)
FORGED = 42  # the forging session's votes, each with an id it made up (six of each kind)
HONEST = 4  # students beside the forger, each its own new browser


class Voter(ClassClient):
    """A student's tab: says what its browser kept (``student``: "" for a new browser), keeps the id the server
    issues, then votes; knows which vote buttons its last run drew primary."""

    def __init__(self, port: int, code: str, student: str = ""):
        super().__init__(port, f"class={code}", wait=WAIT)
        self.student = student  # the browser's localStorage
        self.issued: str | None = None  # the id the server last gave the component (its session's)
        self.given: set[str] = set()  # every id the server gave this session's component
        self.choices = 0  # how many vote buttons its page drew
        self.primary: set[str] = set()  # of the last finished run
        self._primary: set[str] = set()

    def observe(self, message, kind) -> None:
        super().observe(message, kind)
        if kind == "script_finished":
            self.primary, self._primary = self._primary, set()
        elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
            element = message.delta.new_element
            if element.WhichOneof("type") == "button" and element.button.type == "primary":
                self._primary.add(element.button.id.split("-", 2)[-1])
            elif element.WhichOneof("type") == "bidi_component" and element.bidi_component.json:
                self.issued = json.loads(element.bidi_component.json).get("id")
                self.given |= {self.issued} if self.issued else set()

    async def join(self, title: str) -> None:
        """Open the student link and say what the browser kept (as the component does once it has read
        localStorage); keep the id the server gives back, as the component does."""
        await self.open(title)
        await self.send("class-student", {"id": self.student})
        await self.until(lambda drawn: "class-student" in drawn.keys and self.issued, "the id issued")
        self.student = self.issued

    async def vote_as(self, presented: str, choice: int) -> None:
        """One message, as a forging client sends it: the component says ``presented`` and ``choice`` is clicked."""
        message = self._message()
        message.rerun_script.fragment_id = self.fragments.get(self.widgets[f"vote-{choice}"], "")
        said, click = message.rerun_script.widget_states.widgets.add(), message.rerun_script.widget_states.widgets.add()
        said.id, said.json_value = self.widgets["class-student"], json.dumps({"id": presented})
        click.id, click.trigger_value = self.widgets[f"vote-{choice}"], True
        await self.ws.send(message.SerializeToString())
        await self.until(lambda drawn: self.primary == {f"vote-{choice}"}, f"answer {choice} drawn as mine")

    async def vote(self, choice: int) -> None:
        await self.send(f"vote-{choice}")
        await self.until(lambda drawn: self.primary == {f"vote-{choice}"}, f"answer {choice} drawn as mine")


def answered(drawn) -> int:
    """The teacher's "**N** answered"."""
    counts = [int(m) for text in drawn.texts for m in re.findall(r"^\*\*(\d+)\*\* answered$", text)]
    assert len(counts) == 1, drawn.texts
    return counts[0]


def poll_counts(drawn) -> tuple[int, list[int]]:
    """The revealed poll's "N answers" and each choice's count, in the choices' order."""
    (poll,) = [text for text in drawn.texts if "explorer-poll" in text]
    total = re.search(r"\((\d+) answers?\)", poll)
    counts = [int(count) for count in re.findall(r"\d+% \((\d+)\)", poll)]
    return int(total.group(1)), counts


@pytest.fixture(scope="module")
def server():
    instance = bench_class.Server()
    yield instance
    instance.stop()


def test_forty_students_each_counted_once_across_reloads_and_second_clicks(server):
    from explorer.lecture import GENERATION

    assert GENERATION.slide(1).question is not None  # the test's premise: the class starts on a question
    title = GENERATION.slide(1).title
    last: dict[str, int] = {}  # each id's last answer, as the students clicked them

    async def poll():
        teacher = Teacher(server.port, GENERATION, wait=WAIT)
        await teacher.open(title)
        code = await teacher.start_class()
        gate = asyncio.Semaphore(AT_ONCE)
        voters = [Voter(server.port, code) for _ in range(STUDENTS)]  # new browsers: the server issues their ids

        async def first_answer(n: int, voter: Voter) -> None:
            async with gate:
                await voter.join(title)
                choices = sorted(key for key in voter.drawn.keys if key.startswith("vote-"))
                assert choices == [f"vote-{c}" for c in range(len(choices))] and len(choices) >= 2, choices
                voter.choices = len(choices)
                answer = n % voter.choices
                await voter.vote(answer)
                if n in TWICE:  # a double click, or a change of mind
                    answer = answer if n < 13 else (answer + 1) % voter.choices
                    await voter.vote(answer)
                last[voter.student] = answer

        await asyncio.gather(*(first_answer(n, v) for n, v in enumerate(voters)))

        async def reload(n: int) -> None:
            async with gate:
                await voters[n].close()
                kept = voters[n].student
                again = Voter(server.port, code, kept)  # the same browser: it presents the id it kept
                again.choices = voters[n].choices
                await again.join(title)
                assert again.student == kept  # the kept id is the session's: no new one issued
                assert again.primary == {f"vote-{last[kept]}"}  # the id's answer, remembered across the reload
                choice = (n + n % 2) % voters[n].choices
                await again.vote(choice)
                last[kept] = choice
                voters[n] = again

        await asyncio.gather(*(reload(n) for n in RELOADED))

        await teacher.rerun()
        seen = answered(await teacher.until(lambda drawn: drawn.shows(title), "the teacher's page"))
        # Only two students stay for the reveal (the others' tabs close): each open tab reruns with the poll.
        stay, gone = voters[20], voters[21:] + voters[:20]
        await asyncio.gather(*(voter.close() for voter in gone))
        await teacher.send("class_reveal")
        revealed = poll_counts(await teacher.until(lambda drawn: drawn.shows(title), "the revealed poll"))

        # After the reveal: the staying student's page, rerun by the teacher's reveal, has no vote buttons, and
        # its old button's click counts for nothing; neither does a newcomer's.
        after = await stay.until(lambda drawn: any("explorer-poll" in text for text in drawn.texts), "the poll")
        buttons_after = {key for key in after.keys if key.startswith("vote-")}
        await stay.send(f"vote-{(last[stay.student] + 1) % stay.choices}")
        await stay.until(lambda drawn: drawn.shows(title), "the late click's run")
        # A newcomer's page draws neither vote buttons nor the id's component: its client sends both anyway, with
        # the ids the other student's page had.
        newcomer = Voter(server.port, code, secrets.token_hex(16))  # an old browser's id: never issued
        await newcomer.open(title)
        buttons_after |= {key for key in newcomer.drawn.keys if key.startswith("vote-") or key == "class-student"}
        newcomer.widgets.update({key: stay.widgets[key] for key in ("class-student", "vote-0")})
        await newcomer.send("class-student", {"id": newcomer.student})
        await newcomer.until(lambda drawn: drawn.shows(title), "the newcomer's id's run")
        await newcomer.send("vote-0")
        await newcomer.until(lambda drawn: drawn.shows(title), "the newcomer's click's run")
        await teacher.rerun()
        final = poll_counts(await teacher.until(lambda drawn: drawn.shows(title), "the poll after late clicks"))
        for client in (teacher, stay, newcomer):
            await client.close()
        errors = [error for client in (teacher, stay, newcomer, *voters) for error in client.errors]
        return seen, revealed, buttons_after, final, voters[0].choices, errors

    seen, revealed, buttons_after, final, choices, errors = asyncio.run(poll())
    assert errors == []
    expected = Counter(last.values())
    assert len(last) == STUDENTS
    assert seen == STUDENTS  # "**40** answered": every distinct id once
    assert revealed == (STUDENTS, [expected[c] for c in range(choices)])  # each id's last answer
    assert buttons_after == set()
    assert final == revealed  # the poll is closed: late clicks counted nothing


def forged_ids(honest: list[str], count: int) -> list[str]:
    """``count`` ids one session presents, one before each of its votes, all but the last kind made up: fresh random
    hex (what browsers made before the server issued ids), the issued ids' shape under no secret and under another
    server's, an honest student's id cut short or with one digit changed, none at all (asking to be issued another),
    and another student's real id (the session is someone already, so it stays who it is)."""
    other_secret = secrets.token_bytes(32)

    def altered(student: str) -> str:
        at = secrets.randbelow(len(student))
        digit = "0123456789abcdef"[("0123456789abcdef".index(student[at]) + 1) % 16] if student[at] != "-" else "0"
        return student[:at] + digit + student[at + 1 :]

    kinds = [
        lambda: secrets.token_hex(16),
        lambda: f"{secrets.token_hex(12)}-{secrets.token_hex(16)}",
        lambda: codes.new_student_id(other_secret),
        lambda: honest[0][: -1 - secrets.randbelow(8)],
        lambda: altered(honest[0]),
        lambda: "",
        lambda: honest[1],
    ]
    return [kinds[n % len(kinds)]() for n in range(count)]


async def forgery(ports: list[int], title: str) -> dict:
    """A teacher, ``HONEST`` students (on each server in turn) and one forging session (on the last server) in one
    class; what the teacher counts, and what each honest student's page shows as their answer, after the forger's
    ``FORGED`` votes and a reload of an honest student on another server."""
    from explorer.lecture import GENERATION

    teacher = Teacher(ports[0], GENERATION, wait=WAIT)
    await teacher.open(title)
    if "class_passphrase" in teacher.widgets:  # a hosted server
        code = await teacher.start_class()
    else:  # a local one starts a class for anyone
        await teacher.send("class_start")
        await teacher.until(lambda drawn: "key=" in teacher.address, "teacher link")
        code = teacher.code
    honest = [Voter(ports[n % len(ports)], code) for n in range(HONEST)]
    for n, voter in enumerate(honest):
        await voter.join(title)
        await voter.vote(n % 2)
    forger = Voter(ports[-1], code)
    await forger.open(title)
    for n, presented in enumerate(forged_ids([voter.student for voter in honest], FORGED)):
        await forger.vote_as(presented, (n + 1) % 2)  # honest[1] answered 1: the forger ends on 0
    # A reload of honest[0] on the other server (or this one): the id it kept, its answer remembered.
    again = Voter(ports[1 % len(ports)], code, honest[0].student)
    await again.join(title)
    mine = []
    for voter in honest[1:]:
        await voter.rerun()
        await voter.until(lambda drawn: drawn.shows(title), "an honest student's page")
        mine.append(voter.primary)
    await teacher.rerun()
    counted = answered(await teacher.until(lambda drawn: drawn.shows(title), "the teacher's count"))
    clients = (teacher, forger, again, *honest)
    for client in clients:
        await client.close()
    return {
        "counted": counted,
        "forger given": forger.given,
        "honest ids": {voter.student for voter in honest},
        "reloaded": (again.student == honest[0].student, again.primary),
        "answers": mine,
        "errors": [error for client in clients for error in client.errors],
    }


def assert_one_forged_voter(seen: dict) -> None:
    assert seen["errors"] == []
    assert seen["counted"] == HONEST + 1  # the forger's FORGED votes added one voter
    forgers = seen["forger given"]
    assert len(forgers) == 1 and not forgers & seen["honest ids"]  # one id issued to it, nobody else's
    assert len(seen["honest ids"]) == HONEST
    assert seen["reloaded"] == (True, {"vote-0"})  # honest[0]'s reload: the same student, its answer kept
    assert seen["answers"] == [{f"vote-{n % 2}"} for n in range(1, HONEST)]  # the forger moved nobody's answer


def test_one_session_presenting_forged_ids_adds_one_voter(server):
    from explorer.lecture import GENERATION

    assert_one_forged_voter(asyncio.run(forgery([server.port], GENERATION.slide(1).title)))


# -- a creation flood (issue 39): only teachers start classes, a few at a time -----------------------------------

FLOOD = 20  # clicks on "Start a live class" by each flooding session


class Flooder(ClassClient):
    """A tab that clicks "Start a live class" as fast as the server answers: it keeps the codes of the classes the
    server started for it (its address given a ``class=`` with a ``key=``: the teacher link) and each click's
    notices (the ``st.info`` boxes of the click's run)."""

    def __init__(self, port: int, deck):
        super().__init__(port, urlencode({"deck": deck.name, "slide": 1}), wait=WAIT)
        self.opening = self.address  # the lecture's own link: no class in it
        self.started: list[str] = []  # class codes, in the order they started
        self.notices: list[str] = []  # of the run under way, and then of the last finished run
        self.asks = False  # whether the last finished run drew the passphrase field
        self._asks = False

    def observe(self, message, kind) -> None:
        super().observe(message, kind)
        if kind == "page_info_changed":
            given = parse_qs(message.page_info_changed.query_string)
            if "key" in given and given["class"][0] not in self.started:
                self.started.append(given["class"][0])
        elif kind == "script_finished":
            self.asks, self._asks = self._asks, False
        elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
            element = message.delta.new_element
            if element.WhichOneof("type") == "alert":
                self.notices.append(element.alert.body)
            elif element.WhichOneof("type") == "text_input" and element.text_input.id.endswith("-class_passphrase"):
                self._asks = True

    async def start(self, passphrase: str | None, title: str) -> list[str]:
        """One click, with ``passphrase`` typed where the page asks for it (None: nothing), from the lecture
        without a class (its first link again, after a class started); the click's run's notices."""
        if "class" in parse_qs(self.address):
            self.address = self.opening
            await self.rerun()
            await self.until(lambda drawn: "class_start" in drawn.keys, "the lecture without a class")
        self.notices = []
        # As a browser submits the form: its field as typed ("" for nothing); no field once the tab is a teacher's.
        await self.send("class_start", texts={"class_passphrase": passphrase or ""} if self.asks else None)
        await self.until(lambda drawn: drawn.shows(title), "the click's run")
        return self.notices


async def start_flood(port: int, title: str, store_classes=None) -> dict:
    """Two sessions flood "Start a live class" (``FLOOD`` clicks each) on ``port``: a guesser with nothing typed and
    wrong passphrases in turn, then once with the right one; and a holder of the right one. What each click was
    told, the classes started for each, and ``store_classes()`` (the store's class codes, where the test can read
    the store) before, between and after."""
    from explorer.lecture import GENERATION

    counts = [store_classes() if store_classes else None]
    guesser, holder = Flooder(port, GENERATION), Flooder(port, GENERATION)
    await guesser.open(title)
    asked = guesser.asks
    guessed = [await guesser.start(None if n % 2 else f"not the passphrase {n}", title) for n in range(FLOOD)]
    guessed.append(await guesser.start(bench_class.TEACHER_PASSPHRASE, title))  # too late: too many guesses
    counts.append(store_classes() if store_classes else None)
    await holder.open(title)
    held = [await holder.start(bench_class.TEACHER_PASSPHRASE, title) for _ in range(FLOOD)]
    counts.append(store_classes() if store_classes else None)
    for client in (guesser, holder):
        await client.close()
    return {
        "asked": asked,
        "guessed": guessed,
        "guesser started": guesser.started,
        "held": held,
        "holder started": holder.started,
        "store": counts,
        "errors": guesser.errors + holder.errors,
    }


def assert_flood_refused(seen: dict) -> None:
    from explorer.classroom import teachers
    from explorer.ui.classroom import WRONG_PASSPHRASE

    assert FLOOD > teachers.PER_SESSION_GUESSES and FLOOD > teachers.PER_SESSION  # the test's premise: a flood
    assert seen["errors"] == []
    assert seen["asked"]  # the server has a teacher passphrase: its page asks for it
    # Nothing typed, or a wrong passphrase: no class, and each click is told why; after PER_SESSION_GUESSES
    # tries even the right passphrase is refused in that tab.
    assert seen["guesser started"] == []
    too_many = [n for n, said in enumerate(seen["guessed"]) if len(said) == 1 and "Too many passphrases" in said[0]]
    assert seen["guessed"][: teachers.PER_SESSION_GUESSES] == [[WRONG_PASSPHRASE]] * teachers.PER_SESSION_GUESSES
    assert too_many == list(range(teachers.PER_SESSION_GUESSES, FLOOD + 1)), seen["guessed"]
    # The right passphrase: PER_SESSION classes, then each click told the tab's limit.
    assert len(seen["holder started"]) == teachers.PER_SESSION, seen["holder started"]
    assert seen["held"][: teachers.PER_SESSION] == [[]] * teachers.PER_SESSION
    limit = f"This browser tab has started {teachers.PER_SESSION} classes in the last"
    refused = seen["held"][teachers.PER_SESSION :]
    assert all(len(said) == 1 and said[0].startswith(limit) for said in refused), refused


async def teach_after_flood(teacher_port: int, student_port: int, title: str) -> tuple[str, Drawn, list[str]]:
    """A teacher in a new session starts a class on ``teacher_port``; a student opens its link on ``student_port``:
    the class's code, the student's page, and both clients' errors."""
    from explorer.lecture import GENERATION

    teacher = Teacher(teacher_port, GENERATION, wait=WAIT)
    await teacher.open(title)
    code = await teacher.start_class()
    student = ClassClient(student_port, urlencode({"class": code}), wait=WAIT)
    await student.open(title)
    for client in (teacher, student):
        await client.close()
    return code, student.drawn, teacher.errors + student.errors


def assert_following(code: str, drawn: Drawn) -> None:
    assert "class_detach" in drawn.keys, drawn.keys  # a student's bar: following, with "Explore on my own"
    assert any("Following the teacher" in text and f"class {code}" in text for text in drawn.texts), drawn.texts


def test_a_start_flood_starts_no_class_without_the_passphrase_and_a_few_with_it(server):
    """One session clicks "Start a live class" ``FLOOD`` times with nothing typed or wrong passphrases, then with
    the right one; another ``FLOOD`` times with the right one: none, then ``PER_SESSION`` classes, every refusal
    said; a teacher in a new session then starts a class and a student joins it."""
    from explorer.lecture import GENERATION

    title = GENERATION.slide(1).title
    assert_flood_refused(asyncio.run(start_flood(server.port, title)))
    code, drawn, errors = asyncio.run(teach_after_flood(server.port, server.port, title))
    assert errors == []
    assert_following(code, drawn)
