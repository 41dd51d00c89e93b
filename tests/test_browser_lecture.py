"""The Lecture page in a real browser (issue 28): both decks walked with a presenter's keys at 1280×720 and
1920×1080, every slide drawing its view so that it fills the window with nothing outside it or overlapping, and
nothing asked of the internet (the keys still move after a click inside BertViz's frame); a question answered by
clicking reveals the view with the true answer marked; every slide's link restores it; the remote runs the deck
(issue 38 §3): "." and "b" reveal, Space on a focused button presses that button, Esc opens the full page and Back
or Esc comes back, a control moved on one slide stays there; the presenter view opens as a second window that the
projector's window follows.

Screenshots of every slide land in tests/artifacts/screenshots/ (lecture-<deck>-<n>-<size>.png).
"""

from __future__ import annotations

import re
import time

import pytest

from explorer.lecture import DECKS, tour
from tests.axe import assert_accessible
from tests.browser import needs_chromium, open_tab, screenshot, wait_until_idle, wait_until_settled

pytestmark = needs_chromium

SIZES = [(1280, 720), (1920, 1080)]
VIEW = "[data-testid='stPlotlyChart'] .main-svg, [data-testid='stVegaLiteChart'] svg, iframe"
# Where each slide's parts sit, and how large its text is drawn.
LAYOUT = """
() => {
  const box = (el) => {
    const r = el.getBoundingClientRect();
    return {left: r.left, top: r.top, right: r.right, bottom: r.bottom, width: r.width, height: r.height};
  };
  const views = [...document.querySelectorAll(
      "[data-testid='stPlotlyChart'], [data-testid='stVegaLiteChart'], [data-testid='stIFrame'], iframe")]
    .map(box).filter((r) => r.width > 50 && r.height > 50);
  const texts = [...document.querySelectorAll(
      ".st-key-lecture-title h2, .st-key-lecture-look p, .st-key-lecture-sources p, .st-key-lecture-verdict p")];
  const ticks = [...document.querySelectorAll("[data-testid='stPlotlyChart'] .xtick text, "
      + "[data-testid='stPlotlyChart'] .ytick text")];
  const size = (el) => parseFloat(getComputedStyle(el).fontSize);
  return {view: views[0] || null, views: views.length, texts: texts.map(box), textSizes: texts.map(size),
          tickSizes: ticks.map(size), title: (document.querySelector(".st-key-lecture-title h2") || {}).textContent,
          place: (document.querySelector(".st-key-lecture-place [data-testid='stMarkdownContainer']")
                  || {}).textContent,
          scrolls: document.querySelector("[data-testid='stMain']").scrollHeight
                   > document.querySelector("[data-testid='stMain']").clientHeight + 1};
}
"""


def shown_slide(page) -> str | None:
    return page.evaluate("() => new URL(location.href).searchParams.get('slide')")


def wait_for_slide(page, number: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while shown_slide(page) != str(number) and time.monotonic() < deadline:
        time.sleep(0.2)
    settle_slide(page)


def settle_slide(page) -> None:
    wait_until_idle(page)
    page.locator(VIEW).first.wait_for(state="attached", timeout=120_000)
    wait_until_settled(page)  # the size probe may ask for one more run once the browser measured the room


def overlaps(a: dict, b: dict) -> bool:
    return (
        a["left"] < b["right"] - 1
        and b["left"] < a["right"] - 1
        and a["top"] < b["bottom"] - 1
        and b["top"] < a["bottom"] - 1
    )


KEYS = ["PageDown", "ArrowRight", "Space"]  # what remotes send, in turn


@pytest.mark.parametrize("deck_name", list(DECKS))
def test_walking_a_deck_with_the_keys_every_slide_fills_the_window(browser, app_url, deck_name):
    """Each slide checked at both projector sizes: at the size the walk is at, then with the window resized to
    the other, where the next slide starts (so each size is checked as a slide the keys moved to and as a window
    resized under a drawn slide, and the decks start at different sizes)."""
    deck = DECKS[deck_name]
    revealed = tour.write_answers(dict.fromkeys(tour.questions(deck), tour.REVEALED))
    size = SIZES[list(DECKS).index(deck_name) % 2]
    tab = open_tab(browser, width=size[0], height=size[1])
    tab.page.goto(f"{app_url}/lecture?deck={deck_name}&slide=1&answers={revealed}")
    links = {}
    for number in range(1, len(deck) + 1):
        if number > 1:
            tab.page.keyboard.press(KEYS[number % len(KEYS)])
        wait_for_slide(tab.page, number)
        check_slide(tab.page, deck, number, *size)
        size = next(other for other in SIZES if other != size)
        tab.page.set_viewport_size({"width": size[0], "height": size[1]})
        settle_slide(tab.page)
        check_slide(tab.page, deck, number, *size)
        links[number] = tab.page.url
        if number < len(deck) and type(deck.slide(number).view).__name__ == "BertViz":
            # A click inside the frame takes the keyboard there: the next press must still move the deck.
            tab.page.frame_locator("iframe").first.locator("body").click(position={"x": 5, "y": 5})
            assert tab.page.evaluate("() => document.activeElement.tagName") == "IFRAME"
    assert tab.errors == [] and tab.external == []
    # Every slide's link restores it (two of them here, the walk's first and last: each costs a page load).
    for number in (2, len(deck)):
        other = open_tab(browser, width=size[0], height=size[1])
        other.page.goto(links[number])
        wait_for_slide(other.page, number)
        assert other.page.evaluate(LAYOUT)["title"] == deck.slide(number).title
        other.context.close()
    tab.context.close()


def check_slide(page, deck, number: int, width: int, height: int) -> None:
    """The slide fills the window: one view, inside it, nothing scrolls or overlaps, text at projector size."""
    layout = page.evaluate(LAYOUT)
    screenshot(page, f"lecture-{deck.name}-{number}-{width}x{height}.png")
    view, where = layout["view"], f"slide {number} at {width}×{height}: {layout}"
    assert page.evaluate("() => [innerWidth, innerHeight]") == [width, height], where
    assert layout["title"] == deck.slide(number).title, where
    assert layout["place"].replace(" ", "") == f"{number}/{len(deck)}", where
    assert view is not None and layout["views"] == 1, where
    assert max(view["width"] / width, view["height"] / height) >= 0.75, where
    assert view["left"] >= 0 and view["top"] >= 0 and view["right"] <= width and view["bottom"] <= height, where
    assert not layout["scrolls"], where
    assert not any(overlaps(view, text) for text in layout["texts"]), where
    least = 16 if width < 1920 else 20
    assert min(layout["textSizes"]) >= least, where
    assert not layout["tickSizes"] or min(layout["tickSizes"]) >= least, where
    if width == SIZES[0][0] and number in (1, tour.questions(deck)[0], len(deck)):  # a revealed answer among them
        assert_accessible(page, f"{deck.name} slide {number}")


def test_a_question_answered_by_clicking_reveals_the_view_with_the_answer_marked(browser, app_url):
    deck = DECKS["generation"]
    number = tour.questions(deck)[0]
    slide = deck.slide(number)
    result = slide.view.result()
    choices, truth = slide.question.choices(result), slide.question.answer(result)
    tab = open_tab(browser, width=1280, height=720)
    tab.page.goto(f"{app_url}/lecture?deck=generation&slide={number}")
    tab.page.locator(".st-key-lecture-choices button").first.wait_for(timeout=120_000)
    wait_until_idle(tab.page)
    assert tab.page.locator(VIEW).count() == 0  # hidden: not drawn at all
    assert_accessible(tab.page, f"generation slide {number}, its question open")
    buttons = tab.page.locator(".st-key-lecture-choices button")
    assert [buttons.nth(i).inner_text() for i in range(len(choices))] == list(choices)
    buttons.nth(choices.index(truth)).click()
    wait_for_slide(tab.page, number)
    verdict = tab.page.locator(".st-key-lecture-verdict").inner_text()
    assert f"Your answer, {truth}, is right." in verdict
    assert f"answers={number}-{choices.index(truth)}" in tab.page.url
    assert_accessible(tab.page, f"generation slide {number}, answered")
    screenshot(tab.page, "lecture-question-answered.png")
    assert tab.errors == [] and tab.external == []
    tab.context.close()


CHOICES = ".st-key-lecture-choices button"
VERDICT = ".st-key-lecture-verdict"
IN_VERDICT = f"() => Boolean(document.activeElement && document.activeElement.closest('{VERDICT}'))"


def query(page) -> dict:
    return page.evaluate("() => Object.fromEntries(new URL(location.href).searchParams)")


def wait_for_question(page, number: int) -> None:
    page.wait_for_function(f"() => new URL(location.href).searchParams.get('slide') === '{number}'", timeout=60_000)
    page.locator(CHOICES).first.wait_for(timeout=120_000)
    wait_until_idle(page)


def wait_for_verdict(page) -> None:
    page.locator(VERDICT).wait_for(timeout=60_000)
    page.locator(VIEW).first.wait_for(state="attached", timeout=120_000)
    wait_until_settled(page)


def test_the_remote_runs_the_deck(browser, app_url):
    """One keyboard walk: "." and "b" reveal, Space on a focused choice answers it and on ← goes back, the focus
    on the verdict, Esc and Back, Esc and Esc, a control moved on slide 7 and not drawn on slide 8."""
    deck = DECKS["generation"]
    ban, temperature = 6, 7  # "Greedy, beam, and a ban"; "Temperature", whose temperature slide 8 must not get
    assert deck.slide(ban).title == "Greedy, beam, and a ban" and deck.slide(temperature).question
    tab = open_tab(browser, width=1280, height=720)
    page = tab.page
    page.goto(f"{app_url}/lecture?deck=generation&slide=1&presenter=1")
    wait_for_question(page, 1)
    page.keyboard.press(".")
    wait_for_verdict(page)
    assert query(page)["answers"] == "1-r" and page.evaluate(IN_VERDICT)

    for _ in range(ban - 1):
        page.keyboard.press("PageDown")
    wait_for_question(page, ban)
    page.keyboard.press("b")
    wait_for_verdict(page)
    assert query(page)["answers"] == f"1-r.{ban}-r"

    page.keyboard.press("Escape")  # the slide's view on its full page, in presentation mode
    page.wait_for_url("**/beam_search*", timeout=60_000)
    page.locator(VIEW).first.wait_for(state="attached", timeout=120_000)
    wait_until_settled(page)  # drawn: a run still going when Back comes would write its own address after it
    assert {"beams": "5", "steps": "32", "present": "true"}.items() <= query(page).items()
    page.go_back()
    wait_for_slide(page, ban)
    assert {"presenter": "1", "answers": f"1-r.{ban}-r"}.items() <= query(page).items()
    assert page.locator(VERDICT).count() == 1 and "Notes" in page.locator("[data-testid='stMain']").inner_text()

    page.keyboard.press("ArrowRight")
    wait_for_question(page, temperature)
    page.locator(CHOICES).first.focus()
    page.keyboard.press("Space")  # answers the choice: the deck stays
    wait_for_verdict(page)
    assert shown_slide(page) == str(temperature) and f"{temperature}-0" in query(page)["answers"]
    assert page.evaluate(IN_VERDICT)
    page.locator(".st-key-previous button").first.focus()
    page.keyboard.press("Space")  # presses ←: back, never forward
    wait_for_slide(page, ban)
    page.keyboard.press("ArrowRight")
    wait_for_slide(page, temperature)

    page.locator("[data-testid='stPopoverButton']", has_text="Controls").click()
    page.locator(f".st-key-s{temperature}_temperature input[type='range']").press("ArrowRight")
    page.wait_for_function(
        f"() => new URL(location.href).searchParams.has('s{temperature}_temperature')", timeout=60_000
    )
    wait_until_settled(page)
    page.locator(".st-key-lecture-title h2").click()  # the popover closes; the keys are the deck's again
    page.locator("[data-testid='stPopoverBody']").wait_for(state="detached", timeout=10_000)
    page.keyboard.press("ArrowRight")
    wait_for_slide(page, temperature + 1)
    own = deck.slide(temperature + 1).view.temperature
    assert not [key for key in query(page) if re.fullmatch(r"s\d+_\w+", key)]
    page.locator("[data-testid='stPopoverButton']", has_text="Controls").click()  # slide 8's own temperature
    shown = page.locator(f".st-key-s{temperature + 1}_temperature input[type='range']").input_value()
    assert float(shown) == own
    page.locator(".st-key-lecture-title h2").click()
    page.locator("[data-testid='stPopoverBody']").wait_for(state="detached", timeout=10_000)

    page.keyboard.press("Escape")
    page.wait_for_url("**/sampling*", timeout=60_000)
    page.locator(VIEW).first.wait_for(state="attached", timeout=120_000)
    wait_until_settled(page)
    assert {"top_k": "50", "top_p": "0.9"}.items() <= query(page).items()
    page.keyboard.press("Escape")  # Esc again: back to the slide
    page.wait_for_url("**/lecture*", timeout=60_000)
    wait_for_slide(page, temperature + 1)
    assert {"presenter": "1", "answers": f"1-r.{ban}-r.{temperature}-0"}.items() <= query(page).items()
    screenshot(page, "lecture-remote-walk.png")
    assert tab.errors == [] and tab.external == []
    tab.context.close()


def test_the_presenter_view_opens_beside_the_projector_with_the_notes_the_next_title_and_a_timer(browser, app_url):
    deck = DECKS["anatomy"]
    tab = open_tab(browser, width=1920, height=1080)
    tab.page.goto(f"{app_url}/lecture?deck=anatomy&slide=2")
    wait_for_slide(tab.page, 2)
    tab.page.locator("[data-testid='stPopoverButton']", has_text="Controls").click()
    with tab.context.expect_page() as opened:
        tab.page.get_by_role("button", name="Open the presenter view").click()
    presenter = opened.value
    presenter.set_viewport_size({"width": 1920, "height": 1080})
    wait_for_slide(presenter, 2)
    assert query(presenter)["presenter"] == "1"
    text = presenter.locator("[data-testid='stMain']").inner_text()
    assert deck.slide(2).notes[:40] in text
    assert f"Next: {deck.slide(3).title}" in text
    timer = presenter.get_by_text(re.compile(r"^Elapsed \d+:\d\d$"))  # inside the component's shadow root
    first = timer.first.inner_text()
    time.sleep(2.2)
    assert timer.first.inner_text() != first  # it runs
    screenshot(presenter, "lecture-presenter-1920x1080.png")
    presenter.keyboard.press("ArrowRight")  # the presenter moves; the projector's window follows
    wait_for_slide(presenter, 3)
    wait_for_slide(tab.page, 3, timeout=30)
    assert shown_slide(tab.page) == "3" and "presenter" not in query(tab.page)
    assert deck.slide(3).notes[:40] not in tab.page.locator("[data-testid='stMain']").inner_text()  # the slide alone
    assert tab.errors == [] and tab.external == []
    tab.context.close()
