"""A class poll with 40 students over Streamlit's protocol, on a real server (hosted mode): each student's browser
id counts once, across reloads and second clicks, and the poll closes when the teacher shows the answer.

The teacher starts a class on the generation deck's first slide (a question); forty students open the student
link, each says its own 32-hex id (as the ``class-student`` component does from localStorage) and clicks an
answer. Ten then reload (a new session, the same id) and answer again, five the same, five another; five click
twice. The teacher's page must count exactly the forty ids, and the revealed poll each id's last answer; after
the reveal no student can vote. The students are ``bench_class``'s protocol clients, a few at a time (2 cores).
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections import Counter

import pytest

from bench import bench_class
from bench.bench_class import ClassClient, Teacher
from tests.browser import needs_chromium

pytestmark = needs_chromium[:1]  # a server, no browser: marked with the slow tests

STUDENTS = 40
RELOADED = range(10)  # reload and answer again: the even ones their answer, the odd ones another
TWICE = range(10, 15)  # click twice: 10-12 the same button again, 13-14 another
AT_ONCE = 6  # students talking to the server at a time
WAIT = 60.0  # seconds any one step may take (a run takes well under one)


class Voter(ClassClient):
    """A student's tab: says its browser's id, then votes; knows which vote buttons its last run drew primary."""

    def __init__(self, port: int, code: str, student: str):
        super().__init__(port, f"class={code}", wait=WAIT)
        self.student = student
        self.choices = 0  # how many vote buttons its page drew
        self.primary: set[str] = set()  # of the last finished run
        self._primary: set[str] = set()

    def observe(self, message, kind) -> None:
        super().observe(message, kind)
        if kind == "script_finished":
            self.primary, self._primary = self._primary, set()
        elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
            button = message.delta.new_element.button
            if message.delta.new_element.WhichOneof("type") == "button" and button.type == "primary":
                self._primary.add(button.id.split("-", 2)[-1])

    async def join(self, title: str) -> None:
        """Open the student link and say the id (as the component does once it has read localStorage)."""
        await self.open(title)
        await self.send("class-student", {"id": self.student})
        await self.until(lambda drawn: "class-student" in drawn.keys, "the id said")

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
    ids = [secrets.token_hex(16) for _ in range(STUDENTS)]
    last: dict[str, int] = {}  # each id's last answer, as the students clicked them

    async def poll():
        teacher = Teacher(server.port, GENERATION, wait=WAIT)
        await teacher.open(title)
        code = await teacher.start_class()
        gate = asyncio.Semaphore(AT_ONCE)
        voters = [Voter(server.port, code, student) for student in ids]

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
                again = Voter(server.port, code, ids[n])
                again.choices = voters[n].choices
                await again.join(title)
                assert again.primary == {f"vote-{last[ids[n]]}"}  # the id's answer, remembered across the reload
                choice = (n + n % 2) % voters[n].choices
                await again.vote(choice)
                last[ids[n]] = choice
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
        newcomer = Voter(server.port, code, secrets.token_hex(16))
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
