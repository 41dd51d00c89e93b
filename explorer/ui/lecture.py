"""The lecture page's parts: where in which deck, the presenter's keys, a slide's live controls, its question, and
the presenter's notes.

The deck and slide live in the URL (``?deck=generation&slide=7``), with the answers given so far
(``answers=1-0.6-1``, see ``explorer.lecture.tour``) and every control moved on the slide (``s7_head=3``): a link
restores the slide exactly, and a tour at home resumes from it. A slide's controls are keyed ``s<slide>_<field>``
(``control_key``) so that they never share a value with a page's own widgets or another slide's (a slider's value
the browser still holds, a link's, a class's), and they are dropped when the slide changes: each slide starts
from its own values.

A presenter window (``presenter=1``, opened by ``presenter_window_ui``) and the projector's window run in one
browser: the keys' script tells the projector's window the presenter window's slide over a ``BroadcastChannel``
(``sync_state``), and the projector's window follows (``Press.follow``).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import re
import threading
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

from explorer import gateway, views
from explorer.checks import whole_number
from explorer.errors import InputError
from explorer.lecture import DECKS, Deck, Slide, files, tour
from explorer.lecture.controls import Index, Number, UptoStep, controls_of, moved
from explorer.render.export import ExportUnavailable
from explorer.render.layout import PlotlySpec
from explorer.ui.figures import export_buttons, figure_look
from explorer.ui.full_page import full_page
from explorer.ui.models import request_model
from explorer.ui.results import progress_bar, run_view, show_view
from explorer.ui.shell import PRESENT_KEY
from explorer.ui.text import literal
from explorer.ui.widgets import (
    add_notice,
    choice_ui,
    forget,
    index_slider_ui,
    notices_ui,
    number_slider_ui,
    set_value,
)

CONTROL_PREFIX = "s_"  # the keys before they were per slide: a link's are dropped
_CONTROL_KEY = re.compile(r"s\d+_")  # s7_temperature: slide 7's temperature
_AT = "_lecture_at"  # {deck name: slide number} this session
_ANSWERS = "_lecture_answers"  # {deck name: {slide number: choice index, or tour.REVEALED}}
_KEYS = "lecture-keys"  # the keys' component: its state is the last press, {slide or leave, seq}
_SEQ = "_lecture_seq"  # the last press acted on
_VERDICTS = "_lecture_verdicts"  # answers given this session: a new one takes the keyboard's focus to its verdict
_LEFT = "_lecture_left"  # presentation mode as it was before Esc opened a full page, restored on the way back

_KEYS_JS = """
export default function(component) {
  // One listener for the window, whatever the number of runs that drew this component: each run hands it the
  // slide shown, and the listener reads the latest.
  const state = window.__explorerLecture || (window.__explorerLecture = {seq: 0});
  const { data, setStateValue } = component;
  state.answer = setStateValue;
  state.count = data.count;
  // A run that has seen every press so far says where the deck is (a click on the slide's own arrows, too);
  // one drawn before the last presses reached the server would take the presenter back.
  if (data.seq >= state.seq) { state.seq = data.seq; state.target = data.slide; }
  if (!state.listener) {
    state.listener = (event) => onKey(state, event);
    document.addEventListener("keydown", state.listener, true);
  }
  // A click inside a frame (BertViz) takes the keyboard's focus there: its keys come to the same listener.
  const frames = () => listenInFrames(state);
  window.addEventListener("blur", frames);
  frames();
  if (state.verdict === undefined) state.verdict = data.verdict;  // answers of before this page loaded
  if (data.verdict > state.verdict) { state.verdict = data.verdict; focusVerdict(); }
  const channel = follow(state, data);
  return () => {
    // Left the page (or redrawn): the next drawing installs the listener again.
    document.removeEventListener("keydown", state.listener, true);
    window.removeEventListener("blur", frames);
    state.listener = null;
    if (channel) channel.close();
  };
}

// What a presenter's remote sends: PageDown/PageUp (most remotes), arrows, Space; Home/End; Esc leaves; "." or
// "b" (the remote's blank-screen button) reveals the question's answer.
const MOVES = {ArrowRight: 1, ArrowDown: 1, PageDown: 1, " ": 1, ArrowLeft: -1, ArrowUp: -1, PageUp: -1};
const REVEAL = [".", "b", "B"];

function typing(target) {
  // Keys typed into a text box, or moving a slider or a radio, are theirs, not the deck's.
  return Boolean(target.closest && target.closest('input, textarea, select, [contenteditable="true"], '
    + '[role="slider"], [role="radiogroup"], [role="listbox"], [role="combobox"]'));
}

function pressing(event) {
  // Space and Enter on a focused button or link press it (a choice answers, ← goes back): never the deck's.
  return (event.key === " " || event.key === "Enter")
    && Boolean(event.target.closest && event.target.closest('button, a[href], [role="button"], summary'));
}

function send(state, press) {
  state.seq += 1;
  state.answer("pressed", {...press, seq: state.seq});
}

function onKey(state, event) {
  if (event.ctrlKey || event.altKey || event.metaKey || event.defaultPrevented || typing(event.target)
      || pressing(event)) return;
  if (event.key === "Escape") {
    if (document.querySelector('[data-testid="stPopoverBody"], [role="dialog"]')) return;  // closes those first
    event.preventDefault();
    sessionStorage.setItem("explorer-lecture-entry", String(history.length - 1));  // where Back must return
    send(state, {leave: true});
    return;
  }
  if (REVEAL.includes(event.key)) {
    event.preventDefault();
    send(state, {reveal: true, slide: state.target});
    return;
  }
  let target = null;
  if (event.key === "Home") target = 1;
  else if (event.key === "End") target = state.count;
  else if (event.key in MOVES) target = state.target + (event.key === " " && event.shiftKey ? -1 : MOVES[event.key]);
  if (target === null) return;
  event.preventDefault();  // Space and PageDown would scroll the page
  target = Math.min(Math.max(target, 1), state.count);
  if (target === state.target) return;
  // Several presses before the page answers each count: the next press starts from this one's target. A state,
  // not a trigger: the server always gets the last press, however many runs the presses interrupted.
  state.target = target;
  send(state, {slide: target});
}

function listenInFrames(state) {
  for (const frame of document.querySelectorAll("iframe")) {
    if (!frame.__explorerLecture) {  // a frame drawn again (its page changed) is heard again once loaded
      frame.__explorerLecture = true;
      frame.addEventListener("load", () => listenInFrames(state));
    }
    let inner = null;
    try { inner = frame.contentDocument; } catch (error) { continue; }  // another origin's: not ours to hear
    if (!inner || inner.__explorerLecture === state.listener) continue;
    inner.addEventListener("keydown", (event) => state.listener && state.listener(event), true);
    inner.__explorerLecture = state.listener;
  }
}

function focusVerdict() {
  // After an answer the choices are gone: the keyboard's focus goes to the verdict that replaced them.
  let tries = 0;
  const look = () => {
    const verdict = document.querySelector(".st-key-lecture-verdict");
    if (verdict) {
      verdict.setAttribute("tabindex", "-1");
      verdict.focus({preventScroll: true});
    } else if (++tries < 50) setTimeout(look, 100);
  };
  look();
}

function follow(state, data) {
  // A presenter window (presenter=1) and the projector's window in one browser: the presenter's moves,
  // reveals and controls reach the projector's window, which draws them (no server state between them).
  if (!data.sync || typeof BroadcastChannel === "undefined") return null;
  const channel = new BroadcastChannel("explorer-lecture-" + data.sync.deck);
  if (data.presenter) channel.postMessage(data.sync);
  else channel.onmessage = (message) => {
    const sync = message.data || {};
    if (JSON.stringify(sync) !== JSON.stringify(data.sync)) send(state, {follow: sync, slide: sync.slide});
  };
  return channel;
}
"""
_keys = st.components.v2.component("explorer_lecture_keys", js=_KEYS_JS, html="<span></span>")

_TIMER_JS = """
export default function(component) {
  const { data, parentElement } = component;
  const box = parentElement.querySelector("span");
  const name = "explorer-lecture-start-" + data.deck;
  let start = Number(sessionStorage.getItem(name));
  if (!start) { start = Date.now(); sessionStorage.setItem(name, String(start)); }
  function show() {
    const seconds = Math.floor((Date.now() - start) / 1000);
    const minutes = Math.floor(seconds / 60);
    box.textContent = "Elapsed " + minutes + ":" + String(seconds % 60).padStart(2, "0");
  }
  show();
  const timer = setInterval(show, 1000);
  box.onclick = () => { start = Date.now(); sessionStorage.setItem(name, String(start)); show(); };
  return () => clearInterval(timer);
}
"""
_timer = st.components.v2.component(
    "explorer_lecture_timer",
    js=_TIMER_JS,
    html='<span title="Time since the deck opened; click to restart" style="cursor:pointer"></span>',
)


# Projector-sized text that leaves the window to the view: at least 16 px at 1280×720 and 20 px at 1920×1080.
SLIDE_CSS = """
<style>
[data-testid="stMainBlockContainer"] { padding: 1rem 3rem 0.5rem 3rem; }
[data-testid="stMainBlockContainer"] [data-testid="stVerticalBlock"] { gap: 0.4rem; }
.st-key-lecture-title h2 { font-size: max(26px, 1.7vw); padding: 0; line-height: 1.2; }
.st-key-lecture-look p, .st-key-lecture-sources p, .st-key-lecture-verdict p, .st-key-lecture-place p,
.st-key-lecture-choices button p, .st-key-class-bar p { font-size: max(16px, 1.05vw); line-height: 1.35; }
[class*="st-key-lecture-"] [data-testid="stMarkdownContainer"] { margin-bottom: 0; }
[class*="st-key-lecture-"] p { margin-bottom: 0.15rem; }
.st-key-lecture-sources p { color: #555; }
.st-key-class-link p { font-size: max(20px, 1.5vw); }
.st-key-lecture-question p { font-size: max(22px, 1.45vw); font-weight: 600; }
.st-key-lecture-choices button { min-height: 2.6em; padding: 0.3em 1em; }
</style>
"""


def slide_css() -> None:
    st.html(SLIDE_CSS)


# -- where in which deck --------------------------------------------------------------------------------------


def deck_ui() -> Deck:
    """The deck chosen in the sidebar, kept in the URL (always, so that the link says it is the lecture's)."""
    came_back()
    with st.sidebar:
        name = choice_ui(
            "Lecture",
            list(DECKS),
            key="deck",
            labels={name: deck.title for name, deck in DECKS.items()},
            horizontal=False,
        )
    st.query_params["deck"] = name
    if st.query_params.get("presenter", "1") != "1":  # only presenter=1 means something: no other value is kept
        st.query_params.pop("presenter")
    return DECKS[name]


def slide_number(deck: Deck) -> int:
    """The slide this session shows in ``deck``: where it last was, else the link's (a bad one gives a notice)."""
    at = st.session_state.setdefault(_AT, {})
    if deck.name not in at:
        at[deck.name] = _linked_slide(deck)
    st.query_params["slide"] = str(at[deck.name])
    return at[deck.name]


def _linked_slide(deck: Deck) -> int:
    raw = st.query_params.get("slide")
    if raw is None:
        return 1
    number = whole_number(raw, digits=4)
    if number is not None and 1 <= number <= len(deck):
        return number
    add_notice(f"The link's slide “{literal(raw[:20])}” is not one of the {len(deck)} slides: showing slide 1.")
    return 1


def show_slide(deck_name: str, number: int) -> None:
    """Show slide ``number`` of the deck named ``deck_name`` (a teacher's, for a class that follows): the deck
    chooser and the slide set before they are drawn. A deck or slide this server does not have is left alone."""
    if deck_name in DECKS and 1 <= number <= len(DECKS[deck_name]):
        set_value("deck", deck_name)
        st.session_state.setdefault(_AT, {})[deck_name] = number


def control_key(number: int, field: str) -> str:
    """The widget and link key of slide ``number``'s control of ``field`` (``s7_temperature``): its own, so
    that no other slide's slider, link or class state can hand it a value."""
    return f"s{number}_{field}"


def _is_control_key(key) -> bool:
    return bool(_CONTROL_KEY.match(str(key))) or str(key).startswith(CONTROL_PREFIX)


def go_to(deck: Deck, number: int) -> int:
    """Show slide ``number`` (kept within the deck) from its own values: every slide's moved controls are
    dropped. Returns the number."""
    number = min(max(number, 1), len(deck))
    st.session_state.setdefault(_AT, {})[deck.name] = number
    st.query_params["slide"] = str(number)
    named = {
        control_key(at, control.field) for at, slide in enumerate(deck.slides, 1) for control in controls_of(slide.view)
    }
    forget(named | {key for key in (*st.session_state, *st.query_params) if _is_control_key(key)})
    return number


def around(deck: Deck, number: int) -> list:
    """The views to compute ahead while slide ``number`` shows: the next slide's first, then the previous one's."""
    return [deck.slide(n).view for n in (number + 1, number - 1) if 1 <= n <= len(deck)]


MAX_SEQ = 2**53  # the presses a page counts stay exact in JavaScript's numbers
MAX_ANSWERS_TEXT = 1_000  # a followed window's answers: more than any deck's questions write


@dataclasses.dataclass(frozen=True)
class Press:
    """One press of the presenter's keys as a page sent it. ``seq`` counts a page's presses (0: none); ``slide``:
    where it moves, or the slide whose answer it reveals; ``leave``: Esc; ``reveal``: "." or "b"; ``follow``: a
    presenter window's slide (``sync_state``), for the projector's window of the same browser."""

    seq: int = 0
    slide: int | None = None
    leave: bool = False
    reveal: bool = False
    follow: dict | None = None


def read_press(state) -> Press:
    """The keys component's last press, whatever a client sent: anything malformed reads as no press (seq 0), a
    slide that is not a whole number as none, a followed state that is not one as none. (Malformed or deeply
    nested JSON never gets here: ``explorer.ui.messages``.)"""
    press = (state or {}).get("pressed") if isinstance(state, dict) else getattr(state, "pressed", None)
    if not isinstance(press, dict) or type(press.get("seq")) is not int or not 0 < press["seq"] < MAX_SEQ:
        return Press()
    slide = press.get("slide")
    return Press(
        press["seq"],
        slide if type(slide) is int else None,
        leave=press.get("leave") is True,
        reveal=press.get("reveal") is True,
        follow=_followed(press.get("follow")),
    )


def _followed(sync) -> dict | None:
    """A presenter window's ``sync_state`` as the projector's window got it, checked: None if it is not one."""
    if not isinstance(sync, dict) or type(sync.get("slide")) is not int or not isinstance(sync.get("deck"), str):
        return None
    answers_text, controls = sync.get("answers", ""), sync.get("controls", {})
    if not isinstance(answers_text, str) or len(answers_text) > MAX_ANSWERS_TEXT or not isinstance(controls, dict):
        return None
    numbers = {
        field: value
        for field, value in controls.items()
        if isinstance(field, str) and type(value) in (int, float) and math.isfinite(value)
    }
    return {"deck": sync["deck"], "slide": sync["slide"], "answers": answers_text, "controls": numbers}


def keys_ui(deck: Deck, number: int, seat=None) -> tuple[int, Press]:
    """The presenter's keys: acts on a press this session has not acted on yet (a move, a reveal, a presenter
    window's state to follow) and returns (the slide to show, that press; ``Press()`` when none). Their
    listener is drawn by ``draw_keys``, once the slide's controls are known."""
    press = read_press(st.session_state.get(_KEYS))
    if press.seq <= st.session_state.get(_SEQ, 0):
        return number, Press()
    st.session_state[_SEQ] = press.seq
    if press.follow is not None:
        number = _follow(deck, number, press.follow)
    elif press.reveal:
        if press.slide == number:  # not a slide the presenter has left since
            _reveal(deck, number, seat)
    elif press.slide is not None and not press.leave:
        number = go_to(deck, press.slide)
    return number, press


def _reveal(deck: Deck, number: int, seat) -> None:
    """ "." or "b" on a question's slide: its answer shown (to the class, from a teacher's window)."""
    from explorer.ui import classroom  # imported here: classroom imports this module

    if deck.slide(number).question is None:
        return
    if seat is None and number not in answers(deck):
        _answer(deck, number, tour.REVEALED)
    elif seat is not None and seat.role == "teacher":
        classroom._reveal(seat, number)  # what its "Show the answer to the class" does


def _follow(deck: Deck, number: int, sync: dict) -> int:
    """The projector's window to the presenter window's slide, answers and controls (its own deck's only)."""
    if sync["deck"] != deck.name:
        return number
    number = go_to(deck, sync["slide"])
    given, _ = tour.read_answers(sync["answers"], deck)
    st.session_state.setdefault(_ANSWERS, {})[deck.name] = given
    _write_answers(given)
    for control in controls_of(deck.slide(number).view):
        value = sync["controls"].get(control.field)
        if isinstance(control, Index) and type(value) is int and value >= 0:
            set_value(control_key(number, control.field), value + control.first)
        elif isinstance(control, Number) and value is not None:
            set_value(control_key(number, control.field), value)
    return number


def sync_state(deck: Deck, number: int, slide: Slide, view) -> dict:
    """What a presenter window tells the projector's window: the deck, slide, answers and moved controls."""
    given = answers(deck)
    return {
        "deck": deck.name,
        "slide": number,
        "answers": tour.write_answers(given) if given else "",
        "controls": {field: value for field, value in moved(view, slide.view).items() if value is not None},
    }


def draw_keys(deck: Deck, number: int, sync: dict | None = None) -> None:
    """The keys' listener (drawn once per run, after the slide's controls: ``sync`` carries them)."""
    data = {
        "slide": number,
        "count": len(deck),
        "seq": st.session_state.get(_SEQ, 0),
        "verdict": st.session_state.get(_VERDICTS, 0),
        "presenter": st.query_params.get("presenter") == "1",
        "sync": sync,
    }
    _keys(key=_KEYS, data=data, default={"pressed": None}, on_pressed_change=lambda: None, height=0)


def title_row_ui(deck: Deck, number: int, slide: Slide, seat):
    """The slide's title, where it is in the deck (← n / N →), the live class, and the Controls popover, which it
    returns. A student following a class gets its class bar in place of all but the title (and None)."""
    from explorer.ui import classroom  # imported here: classroom imports this module (its verdict line)

    following = seat is not None and seat.follows
    widths = [7, 5] if following else [6, 3, 2, 2]
    title_column, place_column, *other_columns = st.columns(widths, vertical_alignment="center")
    with title_column, st.container(key="lecture-title"):
        st.markdown(f"## {literal(slide.title)}")
    if following:
        with place_column:
            classroom.student_bar_ui(seat)
        return None
    with place_column:
        _arrows_ui(deck, number)
    with other_columns[0]:
        if seat is None:
            classroom.start_ui(deck, number)
        elif seat.role == "teacher":
            classroom.teacher_ui(seat)
        else:
            classroom.student_bar_ui(seat)
    return other_columns[1].popover("Controls", icon=":material/tune:", width="stretch")


def _arrows_ui(deck: Deck, number: int) -> None:
    with st.container(horizontal=True, vertical_alignment="center", key="lecture-place"):
        st.button(
            "",
            icon=":material/arrow_back:",
            key="previous",
            on_click=go_to,
            args=(deck, number - 1),
            disabled=number == 1,
            help="Previous slide (←, PageUp)",
        )
        st.markdown(f"**{number}** / {len(deck)}")
        st.button(
            "",
            icon=":material/arrow_forward:",
            key="next",
            on_click=go_to,
            args=(deck, number + 1),
            disabled=number == len(deck),
            help="Next slide (→, PageDown, Space)",
        )


# -- a slide's controls ---------------------------------------------------------------------------------------


def controls_ui(view, result, number: int):
    """Slide ``number``'s live controls (the presenter moves the head, the temperature, the step), keyed by
    ``control_key``; returns the view with their values."""
    changed = {}
    for control in controls_of(view):
        key = control_key(number, control.field)
        if isinstance(control, Number):
            value = number_slider_ui(
                control.label, control.low, control.high, control.value(view, result), key=key, step=control.step
            )
        elif isinstance(control, Index):
            value = _index_ui(control, view, result, key)
        changed[control.field] = value
    return dataclasses.replace(view, **changed) if changed else view


def _index_ui(control: Index, view, result, key: str) -> int:
    count = control.count(view, result)
    shown = control.value(view, result) + control.first
    index = index_slider_ui(control.label, count, key=key, first=control.first, default=shown)
    if isinstance(control, UptoStep) and index == count - 1:
        return None  # the last step: the view as it opens
    return index


# -- predict, then reveal ---------------------------------------------------------------------------------------


def answers(deck: Deck) -> dict[int, int]:
    """This session's answers in ``deck`` (a link's, the first time), kept in the URL."""
    every = st.session_state.setdefault(_ANSWERS, {})
    if deck.name not in every:
        every[deck.name], problems = tour.read_answers(st.query_params.get("answers"), deck)
        if problems:  # one notice, however many pairs did not fit
            add_notice(f"The link's answers: {literal('; '.join(problems))}: ignored.")
    _write_answers(every[deck.name])
    return every[deck.name]


def _write_answers(given: dict[int, int]) -> None:
    if given:
        st.query_params["answers"] = tour.write_answers(given)
    else:
        st.query_params.pop("answers", None)


def _answer(deck: Deck, number: int, choice: int) -> None:
    given = st.session_state.setdefault(_ANSWERS, {}).setdefault(deck.name, {})
    given[number] = choice
    _write_answers(given)
    st.session_state[_VERDICTS] = st.session_state.get(_VERDICTS, 0) + 1


def question_ui(deck: Deck, number: int, slide: Slide, result) -> bool:
    """The slide's question, before its view: returns whether the view may show (answered or revealed)."""
    question = slide.question
    given = answers(deck).get(number)
    choices = question.choices(result)
    if given is None:
        with st.container(key="lecture-question"):
            st.markdown(literal(question.ask))
        with st.container(horizontal=True, key="lecture-choices"):
            for index, choice in enumerate(choices):
                st.button(literal(choice), key=f"choice-{index}", on_click=_answer, args=(deck, number, index))
            st.button("Show the answer", type="tertiary", on_click=_answer, args=(deck, number, tour.REVEALED))
        return False
    verdict_ui(question, choices, given, result)
    return True


def verdict_ui(question, choices: tuple[str, ...], given: int | None, result) -> None:
    """The answer beside the viewer's own (``given``: a choice's index; ``tour.REVEALED`` or None for none), and
    why, in one line."""
    with st.container(key="lecture-verdict"):
        st.markdown(_verdict(choices, given, question.answer(result)) + f" {literal(question.explanation(result))}")


def _verdict(choices: tuple[str, ...], given: int | None, truth: str) -> str:
    answer = f"**{literal(truth)}**"
    if given is None or not 0 <= given < len(choices):  # revealed without an answer (tour.REVEALED), or none
        return f"The answer: {answer}."
    if choices[given] == truth:
        return f":green[Your answer, {answer}, is right.]"
    return f":red[Your answer: {literal(choices[given])}.] The answer: {answer}."


def score(deck: Deck, results: dict[int, object]) -> str:
    """ "3 of 10 questions answered, 2 right" over the answers given and the results of their slides."""
    given = answers(deck)
    right = sum(
        1
        for number, choice in given.items()
        if number in results and _is_right(deck.slide(number), results[number], choice)
    )
    return f"{len(given)} of {len(tour.questions(deck))} questions answered, {right} right"


def _is_right(slide: Slide, result, choice: int) -> bool:
    choices = slide.question.choices(result)
    return 0 <= choice < len(choices) and choices[choice] == slide.question.answer(result)


# -- the slide ---------------------------------------------------------------------------------------------------


def slide_ui(deck: Deck, number: int, seat, *, escaped: bool = False) -> None:
    """Slide ``number`` of ``deck`` in the main area (nothing in the sidebar: a class's follower draws it in a
    fragment, see ``classroom.follow_ui``): its title row, view, question or poll, text, and the presenter's side
    with ``presenter=1`` (never a student's in a class: ``classroom.NO_NOTES``). ``seat``: this session's in a
    class, or None; ``escaped``: Esc asked for the slide's full page."""
    from explorer.ui import classroom  # imported here: classroom imports this module (its verdict line)

    following = seat is not None and seat.follows
    teaching = seat is not None and seat.role == "teacher"
    presenter = st.query_params.get("presenter") == "1"
    if presenter and seat is not None and not teaching:  # the notes give answers away: never a student's
        st.query_params.pop("presenter")
        add_notice(classroom.NO_NOTES)
        presenter = False
    slide = deck.slide(number).with_model(available)
    waiting = bool(slide.question) and classroom.hides_answer(seat, deck.name, number)  # a student's, in class
    stage, side = st.columns([3, 1]) if presenter else (st.container(), None)
    with stage:
        controls = title_row_ui(deck, number, slide, seat)
        try:
            result = run_view(slide.view)
        except InputError as error:
            notices_ui()
            st.info(literal(error))
            if not following:
                draw_keys(deck, number)  # the keys still move on from a slide that cannot be drawn
            st.stop()
        if following:
            view, leave = classroom.controls_for(seat, slide, result), False
        else:
            if teaching:  # a window that joins the class where it is: the class's controls on its sliders
                classroom.join_controls(seat, slide, result)
            with controls:
                view = controls_ui(slide.view, result, number)
                leave = st.button(
                    "Open on its full page",
                    icon=":material/open_in_full:",
                    key="leave",
                    help=classroom.WAITS_FOR_REVEAL if waiting else "Esc",
                    disabled=waiting,  # its full page would show the answer
                )
                presenter_window_ui(deck, seat)
        if teaching:  # the class moves now, while this page draws: its students' pages draw at the same time
            classroom.publish(seat, deck, number, slide, view)
        answers(deck)  # the link's answers read (with a notice for what does not fit) before the notices show
        notices_ui()
        shown_result = result if view == slide.view else run_view(view)
        if (leave or escaped) and not waiting:
            leave_for_full_page(view)

        poll = None
        if slide.question and seat is not None:  # in a class, a question is the class's: no "Show the answer"
            poll = classroom.question_in_class_ui(seat, deck.name, number, slide, result)
            answered = poll is not None
        else:
            answered = question_ui(deck, number, slide, result) if slide.question else True
        slide_text_ui(slide, shown_result, answered=answered)
        if answered:
            show_slide_view(view, shown_result, exports=controls, beside=poll)
        if not following:  # a class's follower moves with its teacher, not with keys
            draw_keys(deck, number, sync_state(deck, number, slide, view) if seat is None else None)

    if side is not None:
        with side:
            presenter_ui(deck, number, slide)


def slide_text_ui(slide: Slide, result, *, answered: bool) -> None:
    """What to look at, then the sources' numbers beside the model's (once the question, if any, is answered:
    they would give the answer away), in the projector's text size."""
    with st.container(key="lecture-look"):
        shown = (*slide.look, *(slide.revealed(result) if answered else ()))  # after the answer: they give it
        st.markdown(" ".join(literal(line) for line in shown))
    compared = [*(slide.compared(result) if answered else ()), *filter(None, [slide.ran_instead()])]
    if compared:
        with st.container(key="lecture-sources"):
            st.markdown("  \n".join(literal(line) for line in compared))


def show_slide_view(view, result, exports, beside: str | None = None) -> None:
    """The slide's view filling what is left of the window, as its page draws it on a projector; its PNG, SVG
    and HTML exports go in ``exports`` (the Controls popover: below the figure they would leave the window;
    None: none, for a class that follows the teacher). ``beside``: HTML in a column left of the view (a class's
    poll)."""
    if beside is not None:
        left, right = st.columns([1, 3])
        left.html(beside)
        with right:
            show_slide_view(view, result, exports)
        return
    if isinstance(view, views.attention.BertViz):
        look = figure_look("slide", wide=True)
        zoom = view.zoom(result, look.height)
        st.iframe(view.html(result, zoom, look.width), height=view.height(result, zoom))
        figure = None
    else:
        figure = show_view(view, result, key="slide", wide=True, exports=False, shared=view)
    if exports is None:
        return
    with exports:
        st.caption("This slide's view at slide size")
        plotly = figure is None or isinstance(figure, go.Figure | PlotlySpec)  # BertViz: drawn by Chrome too
        export_buttons(view.figure(result), view.info(result), key="slide", plotly=plotly)


def score_ui(deck: Deck) -> None:
    """The tour's progress in the sidebar: questions answered and how many right."""
    given = answers(deck)
    results = {number: deck.slide(number).view.result() for number in given}
    with st.sidebar:
        st.caption(score(deck, results))


# -- the deck as a file --------------------------------------------------------------------------------------


# (deck, format, paper) -> the file: the same for every visitor of the server. Only a PDF has a paper ("" else).
_FILES: dict[tuple[str, str, str], bytes] = {}
_FILES_LOCK = threading.Lock()  # one deck file made at a time: the renderer worker draws one image at a time anyway


def deck_file_ui(deck: Deck) -> None:
    """In the sidebar: the whole deck as PDF (on A4 or Letter), PPTX or HTML, made on request (with progress) in
    the export worker, then downloaded. A file is made once per server: the next visitor who asks gets it at once."""
    with st.sidebar:
        st.markdown(":gray[The deck as a file]")
        fmt = (
            st.segmented_control(
                "Format",
                list(files.MIME),
                default="pdf",
                format_func=str.upper,
                key="deck_format",
                label_visibility="collapsed",
            )
            or "pdf"
        )
        paper = paper_ui() if fmt == "pdf" else ""
        made = _FILES.get((deck.name, fmt, paper))
        if made is None and st.button(f"Make the {fmt.upper()}", icon=":material/slideshow:", key="make_deck"):
            made = _make(deck, fmt, paper)
        if made is not None:
            name = files.deck_file_name(deck, fmt, files.deck_models(deck), datetime.date.today())
            st.download_button(
                f"Download {fmt.upper()}",
                made,
                file_name=name,
                mime=files.MIME[fmt],
                on_click="ignore",
                icon=":material/download:",
                key="deck_download",
            )


def paper_ui() -> str:
    """The PDF's paper, landscape: A4 or US Letter (the pages are laid out for each, text at 9 pt or more)."""
    names = {"a4": "A4", "letter": "Letter"}
    return st.selectbox("Paper", files.PAPERS, format_func=names.get, key="deck_paper")


def _make(deck: Deck, fmt: str, paper: str) -> bytes | None:
    # Under the lock: a second visitor asking for the same file waits for it instead of drawing it again.
    key = (deck.name, fmt, paper)
    with progress_bar("Drawing the deck: slide {done} of {total}") as step, _FILES_LOCK:
        if key not in _FILES:
            try:
                _FILES[key] = files.export_deck(deck, fmt, paper=paper or "a4", progress=step)
            except (files.RenderFailed, ExportUnavailable) as error:
                st.error(literal(error))
                return None
    return _FILES[key]


# -- leaving for the full page --------------------------------------------------------------------------------


_BACK_JS = """
export default function(component) {
  // Esc on the full page a slide opened, or the browser's Back, goes back to the slide's own entry in the
  // history: the full page's runs each add entries of their own (its widgets write the address), which one
  // Back would only step through.
  const entry = Number(sessionStorage.getItem("explorer-lecture-entry"));
  const page = location.pathname;
  const toSlide = (from) => {
    const steps = entry - from;
    if (Number.isInteger(entry) && steps < 0) history.go(steps); else history.back();
  };
  const onKey = (event) => {
    if (event.key !== "Escape" || event.defaultPrevented || event.ctrlKey || event.altKey || event.metaKey) return;
    if (document.querySelector('[data-testid="stPopoverBody"], [role="dialog"]')) return;  // closes those first
    event.preventDefault();
    toSlide(history.length - 1);
  };
  const onBack = (event) => {
    if (location.pathname !== page) return;  // the slide's entry: the app draws it
    // An entry of the full page's own: the app must not draw it (its run would outlast the slide's).
    event.stopImmediatePropagation();
    toSlide(history.length - 2);  // one step back from the newest so far
  };
  document.addEventListener("keydown", onKey, true);
  window.addEventListener("popstate", onBack, true);  // before the app's own listener
  return () => {
    document.removeEventListener("keydown", onKey, true);
    window.removeEventListener("popstate", onBack, true);
  };
}
"""
_back = st.components.v2.component("explorer_lecture_back", js=_BACK_JS, html="<span></span>")


def leave_for_full_page(view) -> None:
    """Open the page this view comes from in presentation mode, showing what the slide showed (its model, text
    and settings). The browser's Back, or Esc there (``back_to_slide_ui``), returns to the slide."""
    page, values = full_page(view)
    request_model(view.model)
    for key, value in values.items():
        set_value(key, value)
    st.session_state[_LEFT] = {
        "page": Path(page).stem,
        "present": bool(st.session_state.get(PRESENT_KEY)),
        "query": st.query_params.to_dict(),  # the slide's link (its answers, presenter=1), for the way back
    }
    set_value(PRESENT_KEY, True)
    st.switch_page(page)


def back_to_slide_ui(page_path: str) -> None:
    """On the full page a slide opened (``page_path``: its url path), Esc goes back to the slide."""
    left = st.session_state.get(_LEFT)
    if left is not None and left["page"] == page_path:
        _back(key="lecture-back", data={}, height=0)


def came_back() -> None:
    """Back on the lecture from a slide's full page: the slide's link and presentation mode as they were before
    (the address may hold the full page's values: the history entry the browser went back to)."""
    left = st.session_state.pop(_LEFT, None)
    if left is not None:
        set_value(PRESENT_KEY, left["present"])
        st.query_params.from_dict(left["query"])


# -- the presenter's side -------------------------------------------------------------------------------------

_PRESENTER_JS = """
export default function(component) {
  // A second window beside the projector's, on the same slide with presenter=1: its moves, reveals and
  // controls reach this window through the keys' BroadcastChannel (``follow`` in the keys' script).
  const { parentElement, data } = component;
  parentElement.querySelector("button").onclick = () => {
    const url = new URL(window.location.href);
    url.searchParams.set("presenter", "1");
    window.open(url.toString(), "explorer-presenter-" + data.deck, "popup,width=1280,height=800");
  };
}
"""
_presenter_window = st.components.v2.component(
    "explorer_lecture_presenter",
    js=_PRESENTER_JS,
    html='<button type="button" style="font: inherit; padding: 0.3em 0.8em; border-radius: 0.5rem; '
    'border: 1px solid rgba(49, 51, 63, 0.3); background: white; color: inherit; cursor: pointer">'
    "Open the presenter view</button>",
)

# A student's slide alone: the app's menu, the model picker and the deck chooser are the teacher's business.
STUDENT_CSS = """
<style>
[data-testid="stSidebar"], [data-testid="stExpandSidebarButton"], [data-testid="stSidebarCollapseButton"] {
  display: none !important;
}
</style>
"""


def presenter_window_ui(deck: Deck, seat) -> None:
    """In the projector's window (never a student's, never the presenter's own): the button that opens the
    presenter view (notes, the next slide, a timer) as a second window, which this window then follows."""
    if st.query_params.get("presenter") == "1" or (seat is not None and seat.role != "teacher"):
        return
    _presenter_window(key="lecture-presenter", data={"deck": deck.name}, height=40)
    st.caption("Notes, the next slide and a timer on your own screen: this window shows the slide alone.")


def student_css(seat) -> None:
    """A student's link shows the slide without the app's menu and model picker."""
    if seat is not None and seat.role != "teacher":
        st.html(STUDENT_CSS)


def presenter_ui(deck: Deck, number: int, slide: Slide) -> None:
    """What only the presenter sees: the speaker notes, the next slide's title, a timer."""
    _timer(key="lecture-timer", data={"deck": deck.name}, height=28)
    st.markdown("**Notes**")
    st.markdown(literal(slide.notes))
    following = f"Next: {literal(deck.slide(number + 1).title)}" if number < len(deck) else "Last slide."
    st.caption(following)


def available(model_name: str) -> bool:
    """Whether a slide may run the source's own model: loaded already, or in the Hub cache (never downloaded)."""
    return not gateway.needs_download(model_name)
