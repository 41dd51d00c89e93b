"""The live class in a real browser (issue 29): a teacher and three students in separate Chromium contexts (each its
own localStorage, so its own student id), one server for the module.

- The teacher starts a class from "Live class" and reads the student link off the "Class" popover; the students
  open it and follow five moves (the keys, once the arrow button) and a control moved on a slide. How long each
  student took to show each slide after the teacher's page showed it is printed and written to
  tests/artifacts/class-follow.json (measured, never asserted: the machines are shared).
- A student exploring on their own stays put while the teacher moves, moves alone, and comes back.
- Crafted links (wrong, empty, another class's, the teacher's key minus or plus one character) lead nothing,
  whatever is pressed or clicked in their tab; a code that leads nowhere gets one message.
- A poll: distinct students counted once across a change of mind and a reload, nothing shown before the reveal,
  the verdict, the class's answers and the view after it, in the window.
- The teacher link opened in a second window (with an older slide in it) joins the class where it is, moving
  nobody; a move in either teacher window is followed by the other, and by the students (issue 39 §3).
- Every tab asks nothing of the internet and has no page errors. Screenshots of the teacher's "Class" popover, a
  follower and a revealed poll at 1280×720 and 1920×1080 land in tests/artifacts/screenshots/ (class-*.png).
"""

from __future__ import annotations

import json
import re
import statistics
import time
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest

from explorer.lecture import DECKS
from explorer.ui.classroom import NO_SUCH_CLASS
from tests.browser import CHART, ROOT, needs_chromium, open_tab, screenshot, wait_until_settled
from tests.test_browser_lecture import LAYOUT, overlaps

pytestmark = needs_chromium

GENERATION = DECKS["generation"]
SIZES = [(1280, 720), (1920, 1080)]
FIRST = 3  # the class starts here, on a slide without a question
MOVES = [(4, "ArrowRight"), (5, "ArrowRight"), (6, "next"), (7, "ArrowRight"), (8, "ArrowRight")]
CONTROL = f"s{MOVES[-1][0]}_temperature"  # moved on the last of the moves' slides (its own key)
QUESTION = 1  # "Which token will greedy search take first": the model's own distribution beside the poll
FOLLOW_TIMEOUT = 30_000  # ms: generous, the machine is shared; the times themselves are measured, not asserted
ARTIFACT = ROOT / "tests" / "artifacts" / "class-follow.json"
TITLE = ".st-key-lecture-title h2"
BAR = ".st-key-class-bar"
ARROWS = ".st-key-lecture-place, .st-key-previous, .st-key-next"
CLASS_POPOVER = "[data-testid='stPopoverButton']"

# Installed in every tab before its page loads: each slide title the page shows, with the time it first showed
# (Date.now(): one clock for every tab of the browser), so that a follower's delay is read off the pages
# themselves, not off the test's own polling.
RECORD_TITLES = """
window.__titles = [];
new MutationObserver(() => {
  const title = document.querySelector(".st-key-lecture-title h2");
  const text = title && title.textContent;
  const last = window.__titles[window.__titles.length - 1];
  if (text && (!last || last[0] !== text)) window.__titles.push([text, Date.now()]);
}).observe(document, {subtree: true, childList: true, characterData: true});
"""
SHOWN_SINCE = "([title, since]) => (window.__titles.find(([t, at]) => t === title && at >= since) || [null, null])[1]"
# The slide's chart as drawn: Plotly's title and traces, or Vega-Lite's text (titles, axes, legend: the
# figure's title names the controls' values) and how many marks it drew.
DRAWN = """
() => {
  const plot = document.querySelector("[data-testid='stPlotlyChart'] .js-plotly-plot");
  if (plot && plot.data) {
    const title = plot.querySelector(".gtitle");
    return JSON.stringify({title: title && title.textContent,
                           data: plot.data.map((t) => [t.type, t.x, t.y, t.z, t.text])});
  }
  const vega = document.querySelector("[data-testid='stVegaLiteChart'] svg");
  if (vega) return JSON.stringify({text: vega.textContent, marks: vega.querySelectorAll(".mark-rect path").length});
  return null;
}
"""
# Every enabled button of the page itself (not the sidebar's, a popover's or a chart's own toolbar), named by its
# widget key and text, and marked with its place in that list for the click.
BUTTONS = """
() => {
  document.querySelectorAll("[data-probe]").forEach((b) => delete b.dataset.probe);
  const widgets = "button[data-testid^='stBaseButton']:not([data-testid='stBaseButton-elementToolbar'])";
  return [...document.querySelectorAll(`[data-testid='stMain'] ${widgets}`)]
  .filter((b) => !b.disabled && b.offsetParent !== null)
  .map((b, index) => {
    b.dataset.probe = String(index);
    const keyed = b.closest("[class*='st-key-']");
    const key = keyed ? [...keyed.classList].find((c) => c.startsWith("st-key-")) : "";
    return [index, key + "|" + b.innerText.replace(/\\s+/g, " ").trim()];
  });
}
"""


# -- the tabs --------------------------------------------------------------------------------------------------


def settle(page, pause: float = 1.0) -> None:
    """The page's runs over, its size probes quiet, and still so a third of ``pause`` later: a student's page also
    reruns when the server pushes a move, which nothing in the tab announces (``wait_until_settled``)."""
    wait_until_settled(page, quiet=pause)
    time.sleep(pause / 3)
    wait_until_settled(page, quiet=pause)


def title_of(page) -> str | None:
    return page.evaluate(f"() => (document.querySelector({TITLE!r}) || {{}}).textContent || null")


def wait_for_title(page, title: str, timeout: float = FOLLOW_TIMEOUT) -> None:
    page.wait_for_function(
        f"(title) => (document.querySelector({TITLE!r}) || {{}}).textContent === title", arg=title, timeout=timeout
    )


def query(page) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(page.url).query, keep_blank_values=True).items()}


def now(page) -> int:
    return page.evaluate("() => Date.now()")


def drawn(page) -> str | None:
    return page.evaluate(DRAWN)


def new_tab(browser, opened: list, url: str, *, width: int = 1280, height: int = 720):
    tab = open_tab(browser, width=width, height=height)
    tab.page.add_init_script(RECORD_TITLES)
    opened.append(tab)
    tab.page.goto(url)
    return tab


def assert_clean(*tabs) -> None:
    """No request left 127.0.0.1 and no page error, in any of ``tabs``."""
    for tab in tabs:
        assert tab.external == [], tab.external
        assert tab.errors == [], tab.errors


def start_class(browser, opened: list, app_url: str, number: int, *, passphrase: str | None = None):
    """A teacher's tab on slide ``number`` that starts a class, typing ``passphrase`` (a server with a teacher
    passphrase): (tab, code, key, the student link as shown)."""
    teacher = new_tab(browser, opened, f"{app_url}/lecture?deck=generation&slide={number}")
    teacher.page.locator(f"{CHART} .main-svg").first.wait_for(timeout=120_000)
    settle(teacher.page, 1.5)
    teacher.page.locator(CLASS_POPOVER, has_text="Live class").click()
    if passphrase is not None:
        teacher.page.locator(".st-key-class_passphrase input").fill(passphrase)
    teacher.page.locator(".st-key-class_start button").click()
    teacher.page.wait_for_url("**key=*", timeout=60_000)
    settle(teacher.page)
    code, key = query(teacher.page)["class"], query(teacher.page)["key"]
    open_class_popover(teacher.page, code)
    shown = teacher.page.locator("[data-testid='stPopoverBody'] strong").first.inner_text()
    link = shown.replace("\u2060", "")  # the word joiner that keeps Markdown from making it a live link
    return teacher, code, key, link


def open_class_popover(page, code: str) -> None:
    button = page.locator(CLASS_POPOVER, has_text=f"Class {code}")
    if button.get_attribute("aria-expanded") != "true":
        button.click()
    page.locator("[data-testid='stPopoverBody'] img").first.wait_for(timeout=30_000)


def close_popover(page) -> None:
    page.locator(TITLE).click()  # a click outside closes it (Esc would too)
    page.locator("[data-testid='stPopoverBody']").wait_for(state="detached", timeout=10_000)


def local(link: str, app_url: str) -> str:
    """The shown link on this machine: its host may be the machine's network address (students elsewhere)."""
    parts = urlsplit(link)
    return f"{app_url}{parts.path}?{parts.query}"


@pytest.fixture(scope="module")
def opened():
    tabs: list = []
    yield tabs
    for tab in tabs:
        tab.context.close()


@pytest.fixture(scope="module")
def klass(browser, app_url, opened):
    """A class started on slide FIRST by a teacher, followed by three students on the link the teacher was shown."""
    teacher, code, key, link = start_class(browser, opened, app_url, FIRST)
    assert link.startswith("http") and urlsplit(link).path == "/lecture"
    assert parse_qs(urlsplit(link).query) == {"class": [code]}, "the student link carries the code and nothing else"
    for width, height in SIZES:  # the projector's view of the popover: the link and its QR code
        teacher.page.set_viewport_size({"width": width, "height": height})
        settle(teacher.page)
        open_class_popover(teacher.page, code)
        assert teacher.page.locator("[data-testid='stPopoverBody'] img").first.is_visible()
        screenshot(teacher.page, f"class-teacher-popover-{width}x{height}.png")
    teacher.page.set_viewport_size({"width": 1280, "height": 720})
    close_popover(teacher.page)
    students = [new_tab(browser, opened, local(link, app_url)) for _ in range(3)]
    title = GENERATION.slide(FIRST).title
    for student in students:
        student.page.locator(BAR).wait_for(timeout=120_000)
        wait_for_title(student.page, title, timeout=120_000)
        settle(student.page)
    return SimpleNamespace(teacher=teacher, students=students, code=code, key=key, link=link, url=app_url)


def teacher_moves(klass, how: str) -> None:
    page = klass.teacher.page
    settle(page, 0.5)
    if how == "next":
        page.locator(".st-key-lecture-place .st-key-next button:visible").click()
    else:
        page.keyboard.press(how)


# -- following --------------------------------------------------------------------------------------------------


def test_students_follow_every_move_and_control_of_the_teacher(klass):
    teacher, students = klass.teacher, klass.students
    assert title_of(teacher.page) == GENERATION.slide(FIRST).title
    moves = []
    for number, how in MOVES:
        title = GENERATION.slide(number).title
        since = now(teacher.page)
        teacher_moves(klass, how)
        wait_for_title(teacher.page, title)
        for student in students:
            wait_for_title(student.page, title)  # every student follows every move
            # The bar's text comes in the same run as the title, just after it (a timeout fails the test).
            student.page.locator(BAR, has_text=f"slide {number} ·").wait_for(timeout=FOLLOW_TIMEOUT)
        shown = teacher.page.evaluate(SHOWN_SINCE, [title, since])
        seen = [student.page.evaluate(SHOWN_SINCE, [title, since]) for student in students]
        moves.append({"slide": number, "how": how, "seconds": [round((at - shown) / 1000, 3) for at in seen]})
        assert query(teacher.page)["slide"] == str(number)
    _write_follow_times(moves)

    # A control moved on the teacher's slide: every student draws the teacher's chart.
    settle(teacher.page)
    for student in students:
        settle(student.page)
        assert drawn(student.page) == drawn(teacher.page)
    before = drawn(teacher.page)
    assert before is not None
    teacher.page.locator(CLASS_POPOVER, has_text="Controls").click()
    teacher.page.locator(f".st-key-{CONTROL} input[type='range']").press("ArrowRight")
    teacher.page.wait_for_function(f"(before) => ({DRAWN})() !== before", arg=before, timeout=60_000)
    close_popover(teacher.page)
    settle(teacher.page, 1.5)
    after = drawn(teacher.page)
    assert after != before and CONTROL in query(teacher.page)
    for student in students:
        student.page.wait_for_function(f"(after) => ({DRAWN})() === after", arg=after, timeout=FOLLOW_TIMEOUT)
    for width, height in reversed(SIZES):  # a follower, as a student's laptop shows it
        follower = students[0].page
        follower.set_viewport_size({"width": width, "height": height})
        settle(follower, 1.5)
        screenshot(follower, f"class-follower-{width}x{height}.png")
    assert_clean(teacher, *students)


def _write_follow_times(moves: list[dict]) -> None:
    seconds = [delay for move in moves for delay in move["seconds"]]
    summary = {
        "students": len(moves[0]["seconds"]),
        "measured": "from the teacher's page showing the new slide title to each student's page showing it",
        "p50_s": round(statistics.median(seconds), 3),
        "max_s": max(seconds),
        "moves": moves,
    }
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\nclass follow times (s), {len(seconds)} = moves x students: {seconds}")
    print(f"p50 {summary['p50_s']} s, max {summary['max_s']} s -> {ARTIFACT.relative_to(ROOT)}")


def test_a_student_exploring_on_their_own_stays_put_and_comes_back(klass):
    teacher, (follower, _, explorer) = klass.teacher, klass.students
    start = int(query(teacher.page)["slide"])
    assert start + 3 <= len(GENERATION)
    explorer.page.locator(".st-key-class_detach button").click()
    explorer.page.locator(".st-key-class_rejoin").wait_for(timeout=60_000)
    settle(explorer.page)
    assert "Exploring on your own" in explorer.page.locator(BAR).inner_text()
    assert explorer.page.locator(".st-key-lecture-place .st-key-next button:visible").is_visible(), "their own arrows"

    for number in (start + 1, start + 2):  # the teacher moves twice; the explorer stays where they were
        teacher_moves(klass, "ArrowRight")
        wait_for_title(follower.page, GENERATION.slide(number).title)
    settle(explorer.page, 1.5)
    assert title_of(explorer.page) == GENERATION.slide(start).title

    explorer.page.keyboard.press("ArrowLeft")  # on their own: their keys move them alone
    wait_for_title(explorer.page, GENERATION.slide(start - 1).title)
    settle(follower.page, 1.5)
    assert title_of(follower.page) == title_of(teacher.page) == GENERATION.slide(start + 2).title

    settle(explorer.page)
    explorer.page.locator(".st-key-class_rejoin button").click()
    wait_for_title(explorer.page, GENERATION.slide(start + 2).title)
    explorer.page.locator(".st-key-class_detach").wait_for(timeout=60_000)
    assert "Following the teacher" in explorer.page.locator(BAR).inner_text()
    teacher_moves(klass, "ArrowRight")  # and follows again
    wait_for_title(explorer.page, GENERATION.slide(start + 3).title)
    assert_clean(teacher, follower, explorer)


# -- links that lead nothing ---------------------------------------------------------------------------------------


def test_crafted_links_move_nobody(browser, klass, opened):
    teacher, follower = klass.teacher, klass.students[0]
    other, _, other_key, _ = start_class(browser, opened, klass.url, 2)
    close_popover(other.page)
    settle(teacher.page)
    at, other_at = title_of(teacher.page), title_of(other.page)
    crafted = {
        "wrong": "x" * len(klass.key),
        "empty": "",
        "another class's": other_key,
        "minus one": klass.key[:-1],
        "plus one": klass.key + "A",
    }
    visitor = open_tab(browser, width=1280, height=720)
    opened.append(visitor)
    for name, key in crafted.items():
        visitor.page.goto(f"{klass.url}/lecture?class={klass.code}&key={key}")
        visitor.page.locator(BAR).wait_for(timeout=120_000)
        settle(visitor.page)
        where = f"key {name}: {visitor.page.url}"
        assert "key" not in query(visitor.page), where
        assert visitor.page.locator(ARROWS).count() == 0, where
        assert visitor.page.locator(CLASS_POPOVER, has_text="Class ").count() == 0, where
        assert visitor.page.locator(".st-key-class_end, .st-key-class_reveal").count() == 0, where
        # Every key the remote sends, from each crafted link; every button too, from the first one: a page that
        # offers the same buttons whatever key was refused (the checks above) needs its buttons pressed once.
        if name == "wrong":
            clicked = _press_and_click_everything(visitor.page)
            assert "st-key-class_detach|Explore on my own" in clicked, where
        else:
            _press_remote_keys(visitor.page)
        settle(teacher.page)
        settle(follower.page)
        assert title_of(teacher.page) == at and title_of(follower.page) == at, where
        assert title_of(other.page) == other_at, where
    assert_clean(teacher, follower, other, visitor)


def _press_and_click_everything(page) -> list[str]:
    """Every key of a presenter's remote, then every button the page offers, each once (what a click reveals
    too: "Explore on my own" brings arrows), the keys again after each; returns what was clicked."""
    clicked: list[str] = []
    for _ in range(12):
        _press_remote_keys(page)
        fresh = [(index, name) for index, name in page.evaluate(BUTTONS) if name not in clicked]
        if not fresh:
            return clicked
        index, name = min(fresh, key=lambda button: "class_rejoin" in button[1])  # back to the teacher last
        page.locator(f"[data-probe='{index}']").click()
        clicked.append(name)
        settle(page, 0.5)
    return clicked


def _press_remote_keys(page) -> None:
    for key in ("ArrowRight", "PageDown", "End", "Home"):
        page.keyboard.press(key)
    settle(page, 0.5)


def test_a_code_that_leads_nowhere_shows_one_message(browser, app_url, opened):
    tab = new_tab(browser, opened, f"{app_url}/lecture?class=ZZZZZZ")
    tab.page.locator(TITLE).wait_for(timeout=120_000)
    settle(tab.page, 1.5)
    alerts = tab.page.locator("[data-testid='stAlert'] [data-testid='stMarkdownContainer']")
    assert [alerts.nth(i).inner_text().strip() for i in range(alerts.count())] == [NO_SUCH_CLASS]
    assert "class" not in query(tab.page)
    assert tab.page.locator(ARROWS).count() > 0, "the lecture goes on without a class"
    assert_clean(tab)


# -- a poll -------------------------------------------------------------------------------------------------------


def test_a_poll_counts_students_once_and_reveals_beside_the_view(klass):
    teacher, students = klass.teacher, klass.students
    slide = GENERATION.slide(QUESTION)
    settle(teacher.page)
    teacher.page.keyboard.press("Home")
    for tab in (teacher, *students):
        wait_for_title(tab.page, slide.title)
        tab.page.locator(".st-key-lecture-question").wait_for(timeout=FOLLOW_TIMEOUT)
    for student in students:
        student.page.locator(".st-key-vote-0 button").wait_for(timeout=FOLLOW_TIMEOUT)
        settle(student.page)

    # Earlier tests' visitors are students of this class too, and may have answered already: one vote each.
    counted = teacher.page.locator(".st-key-lecture-choices").get_by_text(re.compile(r"^\d+ answered$"))
    earlier = int(counted.inner_text().split()[0])
    first, second, silent = students
    vote(first.page, 0)
    vote(second.page, 1)
    vote(first.page, 1)  # a change of mind replaces the first answer
    second.page.reload()  # the same browser (its localStorage id) comes back, and votes again
    second.page.locator(".st-key-vote-0 button").wait_for(timeout=60_000)
    settle(second.page)
    assert second.page.locator(".st-key-vote-1 button[kind='primary']").count() == 1, "its answer, remembered"
    vote(second.page, 0)
    answered = earlier + 2
    teacher.page.locator(".st-key-lecture-choices").get_by_text(f"{answered} answered").wait_for(timeout=FOLLOW_TIMEOUT)
    peek_before_the_reveal(silent, slide)

    for tab in (teacher, *students):  # before the reveal: neither the answer nor the view
        settle(tab.page, 0.5)
        assert tab.page.locator(".st-key-lecture-verdict, div.explorer-poll").count() == 0
        assert tab.page.locator(CHART).count() == 0

    teacher.page.locator(".st-key-class_reveal button").click()
    for tab in (teacher, *students):
        tab.page.locator(".st-key-lecture-verdict").wait_for(timeout=FOLLOW_TIMEOUT)
        tab.page.locator(f"{CHART} .main-svg").first.wait_for(timeout=FOLLOW_TIMEOUT)
        assert f"{answered} answers" in tab.page.locator("div.explorer-poll").inner_text()
    assert "Your answer" in first.page.locator(".st-key-lecture-verdict").inner_text()
    assert "Your answer" in second.page.locator(".st-key-lecture-verdict").inner_text()
    assert "Your answer" not in silent.page.locator(".st-key-lecture-verdict").inner_text()

    for width, height in SIZES:  # the class's answers beside the view, in the window
        first.page.set_viewport_size({"width": width, "height": height})
        settle(first.page, 2.0)
        screenshot(first.page, f"class-poll-revealed-{width}x{height}.png")
        layout = first.page.evaluate(LAYOUT)
        poll = first.page.locator("div.explorer-poll").bounding_box()
        view, where = layout["view"], f"{width}×{height}: {layout}, poll {poll}"
        assert view is not None and layout["views"] == 1, where
        assert view["left"] >= 0 and view["top"] >= 0 and view["right"] <= width and view["bottom"] <= height, where
        assert poll["y"] >= 0 and poll["y"] + poll["height"] <= height, where
        assert not layout["scrolls"], where
        box = {"left": poll["x"], "top": poll["y"], "right": poll["x"] + poll["width"]}
        box["bottom"] = poll["y"] + poll["height"]
        assert not overlaps(view, box) and not any(overlaps(view, text) for text in layout["texts"]), where
    first.page.set_viewport_size({"width": 1280, "height": 720})
    assert_clean(teacher, *students)


def peek_before_the_reveal(student, slide) -> None:
    """A student's two ways to the answer before the teacher reveals (issue 39 §3), both shut: ``presenter=1`` in
    their link (the speaker notes state the answer), then exploring on their own ("Show the answer", the view's
    full page, Esc). The student then follows again."""
    student.page.goto(f"{student.page.url}&presenter=1")
    student.page.locator(".st-key-vote-0 button").wait_for(timeout=60_000)
    settle(student.page)
    text = student.page.locator("[data-testid='stMain']").inner_text()
    assert "presenter" not in query(student.page) and "Next:" not in text and slide.notes[:40] not in text, text
    student.page.locator(".st-key-class_detach button").click()
    student.page.locator(".st-key-class_rejoin").wait_for(timeout=FOLLOW_TIMEOUT)
    settle(student.page)
    assert student.page.get_by_role("button", name="Show the answer").count() == 0
    leave = student.page.locator(".st-key-leave button")  # "Open on its full page": not there, or shut
    assert leave.count() == 0 or leave.is_disabled()
    student.page.keyboard.press("Escape")
    settle(student.page)
    assert "/lecture" in student.page.url and student.page.locator(CHART).count() == 0, student.page.url
    student.page.locator(".st-key-class_rejoin button").click()  # following again: the reveal reaches them
    student.page.locator(".st-key-class_detach").wait_for(timeout=FOLLOW_TIMEOUT)
    settle(student.page)


def vote(page, index: int) -> None:
    settle(page, 0.5)
    page.locator(f".st-key-vote-{index} button").click()
    page.locator(f".st-key-vote-{index} button[kind='primary']").wait_for(timeout=FOLLOW_TIMEOUT)


# -- a second teacher window (issue 39 §3) -----------------------------------------------------------------------


def test_a_second_teacher_window_joins_where_the_class_is_and_follows_the_first(browser, klass, opened):
    teacher, follower = klass.teacher, klass.students[0]
    settle(teacher.page, 0.3)
    start = int(query(teacher.page)["slide"])
    step = 1 if start + 3 <= len(GENERATION) else -1
    older = FIRST if start != FIRST else start + step  # the link as first copied: another slide in it
    link = f"{klass.url}/lecture?deck=generation&slide={older}&class={klass.code}&key={klass.key}"
    second = new_tab(browser, opened, link)
    wait_for_title(second.page, GENERATION.slide(start).title, timeout=120_000)
    settle(second.page, 0.5)
    assert query(second.page)["slide"] == str(start) and query(second.page)["key"] == klass.key
    assert title_of(teacher.page) == title_of(follower.page) == GENERATION.slide(start).title, "nobody moved"

    key = "ArrowRight" if step == 1 else "ArrowLeft"
    moves = [(teacher, second), (second, teacher), (teacher, second)]  # the first window's keys go on from where
    for count, (window, other) in enumerate(moves, 1):  # the second left the class, and so on
        number = start + count * step
        settle(window.page, 0.3)
        window.page.keyboard.press(key)  # one window moves; the other follows, as the students do
        for tab in (window, other, follower):
            wait_for_title(tab.page, GENERATION.slide(number).title)
    settle(second.page, 0.3)
    assert query(second.page)["slide"] == query(teacher.page)["slide"] == str(number), "no fight"
    assert_clean(teacher, second, follower)
