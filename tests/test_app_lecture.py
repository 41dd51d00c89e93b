"""The Lecture page (issue 28), run headless by AppTest: every slide of both decks draws its view's own figure of
the gateway's result; a question hides the view until it is answered, then marks the viewer's answer and the
model's; links restore the slide, its moved controls and the answers; crafted links give notices; a slide opens
on its full page showing the same figure; moving to another slide starts it from its own values."""

from __future__ import annotations

import json

import plotly.io as pio
import pytest
from streamlit.testing.v1 import AppTest

from explorer import views
from explorer.lecture import DECKS, tour
from explorer.render.layout import PlotlySpec
from explorer.render.style import look_for
from explorer.ui.full_page import full_page
from explorer.ui.lecture import Press
from explorer.ui.text import literal

TIMEOUT = 180
SLIDES = [(name, number) for name, deck in DECKS.items() for number in range(1, len(deck) + 1)]


def open_lecture(**params) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params.update({key: str(value) for key, value in params.items()})
    at.run()
    at.switch_page("pages/lecture.py")
    return at.run()


def all_revealed(deck) -> str:
    return tour.write_answers(dict.fromkeys(tour.questions(deck), tour.REVEALED))


def shown_specs(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in (*at.get("plotly_chart"), *at.get("vega_lite_chart"))]


def drawn_spec(view, result) -> dict:
    """The view's figure as the slide sends it, at the projector look of a window not measured yet (AppTest)."""
    figure = view.figure(result)(look=look_for(None, None, presentation=True, wide=True))
    if isinstance(figure, PlotlySpec):
        return json.loads(pio.to_json(figure.sent(), validate=False))
    if hasattr(figure, "to_dict") and hasattr(figure, "to_image"):
        return json.loads(pio.to_json(figure.to_dict(), validate=False))
    spec = figure.spec if hasattr(figure, "spec") else figure.to_dict(validate=False)
    return json.loads(json.dumps(spec))


def param(at: AppTest, key: str) -> str | None:
    value = at.query_params.get(key)
    return value[0] if isinstance(value, list) else value


def markdown(at: AppTest) -> str:
    return "\n".join(element.value for element in at.markdown)


@pytest.mark.parametrize(("deck_name", "number"), SLIDES, ids=[f"{d}-{n}" for d, n in SLIDES])
def test_every_slide_draws_its_views_figure_and_opens_on_its_full_page(deck_name, number):
    deck = DECKS[deck_name]
    slide = deck.slide(number)
    at = open_lecture(deck=deck_name, slide=number, answers=all_revealed(deck))
    assert not at.exception
    assert f"**{number}** / {len(deck)}" in markdown(at)
    assert param(at, "deck") == deck_name and param(at, "slide") == str(number)
    result = slide.view.result()
    if isinstance(slide.view, views.attention.BertViz):
        assert len(at.get("iframe")) == 1
    else:
        shown = shown_specs(at)
        assert len(shown) == 1
        drawn = drawn_spec(slide.view, result)
        if "data" in drawn and "layout" in drawn:  # Plotly: the same traces and layout
            assert shown[0]["data"] == drawn["data"] and shown[0]["layout"] == drawn["layout"]
        else:  # Vega-Lite: Streamlit moves the datasets out of the spec; the marks and encodings are the view's
            assert shown[0]["title"] == drawn["title"]
    for line in slide.compared(result):  # the sources' numbers beside the model's own, as written
        assert literal(line) in markdown(at)
    opens_on_its_full_page(at, slide.view)


def opens_on_its_full_page(at: AppTest, view) -> None:
    """The slide's "open the full page" button: the page's widgets hold the slide's values, and the page draws the
    slide's figure (the same data under the same title) among its own."""
    slide_titles, slide_specs = chart_titles(at), shown_specs(at)
    at.button(key="leave").click().run()
    assert not at.exception
    _, values = full_page(view)
    for key, value in values.items():
        if key in at.session_state and not isinstance(value, str | bool | tuple) and value is not None:
            assert at.session_state[key] == value, key
    if not isinstance(view, NOT_THE_SAME_CHART):
        assert slide_titles[0] in chart_titles(at), (slide_titles, chart_titles(at))
        page_spec = shown_specs(at)[chart_titles(at).index(slide_titles[0])]
        assert drawn_data(page_spec) == drawn_data(slide_specs[0])  # the same figure, not only its title


QUESTIONS = [(name, n) for name, deck in DECKS.items() for n in tour.questions(deck)]


@pytest.mark.parametrize(("deck_name", "number"), QUESTIONS, ids=[f"{d}-{n}" for d, n in QUESTIONS])
def test_a_question_hides_the_view_until_answered_then_marks_both_answers(deck_name, number):
    deck = DECKS[deck_name]
    slide = deck.slide(number)
    result = slide.view.result()
    choices, truth = slide.question.choices(result), slide.question.answer(result)
    assert truth in choices
    at = open_lecture(deck=deck_name, slide=number)
    assert not at.exception
    assert not shown_specs(at) and not at.get("iframe")  # hidden: not drawn at all
    for line in (*slide.compared(result), *slide.revealed(result)):  # they would give the answer away
        assert literal(line) not in markdown(at)
    wrong = next((i for i, choice in enumerate(choices) if choice != truth), None)
    picked = wrong if wrong is not None else choices.index(truth)
    at.button(key=f"choice-{picked}").click().run()
    assert not at.exception
    assert shown_specs(at) or at.get("iframe")
    verdict = markdown(at)
    why = slide.question.explanation(result)
    assert "Your answer" in verdict and why.split(",")[0].split(":")[0][:20] in verdict.replace("\\", "")
    assert all(literal(line) in verdict for line in slide.revealed(result))  # shown with the answer
    assert ("is right" in verdict) == (choices[picked] == truth)
    assert param(at, "answers") == f"{number}-{picked}"


def test_the_tour_counts_answers_and_resumes_from_the_link():
    deck = DECKS["generation"]
    first = tour.questions(deck)[0]
    result = deck.slide(first).view.result()
    right = deck.slide(first).question.choices(result).index(deck.slide(first).question.answer(result))
    at = open_lecture(deck="generation", slide=first, answers=f"{first}-{right}")
    assert not at.exception
    assert shown_specs(at)  # answered in the link: revealed
    assert f"1 of {len(tour.questions(deck))} questions answered, 1 right" in "\n".join(c.value for c in at.caption)


def test_a_moved_control_is_in_the_link_and_the_next_slide_starts_from_its_own():
    deck = DECKS["anatomy"]
    number = next(n for n, s in enumerate(deck.slides, 1) if isinstance(s.view, views.attention.Neuron))
    head, layer = f"s{number}_head", f"s{number}_layer"
    at = open_lecture(deck="anatomy", slide=number, answers=all_revealed(deck), **{head: 3})
    assert not at.exception
    assert at.slider(key=head).value == 3
    assert "head 3" in chart_titles(at)[0]
    at.slider(key=layer).set_value(2).run()
    assert param(at, layer) == "2" and param(at, head) == "3"
    assert "layer 2 · head 3" in chart_titles(at)[0]
    at.button(key="next").click().run()
    assert param(at, "slide") == str(number + 1)
    assert not [key for key in at.query_params if key.startswith("s") and "_" in key]
    at.button(key="previous").click().run()
    assert at.slider(key=head).value == deck.slide(number).view.head  # the slide's own head again


GENERATION_TEMPERATURES = 7  # "Temperature": a temperature to move; slide 8 has one of its own


def test_a_control_moved_on_a_slide_stays_on_that_slide():
    deck = DECKS["generation"]
    number = GENERATION_TEMPERATURES
    own = deck.slide(number + 1).view.temperature
    at = open_lecture(deck="generation", slide=number, answers=all_revealed(deck))
    at.slider(key=f"s{number}_temperature").set_value(0.6).run()
    assert param(at, f"s{number}_temperature") == "0.6"
    at.button(key="next").click().run()
    assert at.slider(key=f"s{number + 1}_temperature").value == own
    assert f"T = {own:g}," in chart_titles(at)[0] and "0.6" not in chart_titles(at)[0]
    assert not [key for key in at.query_params if key.startswith("s") and "_" in key]
    # A link that names another slide's control: this slide draws its own (the keys of slide 7 are not slide 8's).
    linked = open_lecture(deck="generation", slide=number + 1, **{f"s{number}_temperature": 0.6})
    assert linked.slider(key=f"s{number + 1}_temperature").value == own and "0.6" not in chart_titles(linked)[0]


def chart_titles(at: AppTest) -> list[str]:
    """Each chart's title and subtitle (Plotly's layout, or Vega-Lite's title), without their fonts."""
    titles = []
    for spec in shown_specs(at):
        title = spec["layout"]["title"] if "layout" in spec else spec.get("title", {})
        title = title if isinstance(title, dict) else {"text": title}
        subtitle = title.get("subtitle", "")
        titles.append(f"{title.get('text')} — {subtitle.get('text') if isinstance(subtitle, dict) else subtitle}")
    return titles


# Full pages that show the slide's view among other things, not as a chart of the same title: the comparison page
# runs its own three strategies, BertViz is a frame. The slides' own figures of a page's result (issue 38 §2: token
# ids, feed-forward widths, the chain rule, a seeded draw...) are drawn by a section of that page the link opens.
NOT_THE_SAME_CHART = (views.decoding.Comparison, views.attention.BertViz)


def drawn_data(spec: dict):
    """What a chart draws: its Plotly traces' values (their colour bars are placed for the space the page gives),
    or its Vega-Lite data sets."""
    if "datasets" in spec or "layout" not in spec:
        return spec.get("datasets", spec.get("data"))
    return [{key: trace.get(key) for key in ("type", "name", "x", "y", "z", "customdata")} for trace in spec["data"]]


def slide_numbered(deck, title: str) -> int:
    return next(n for n, slide in enumerate(deck.slides, 1) if slide.title == title)


def test_escape_opens_the_ban_and_the_seeded_sampling_as_the_slides_drew_them_then_comes_back():
    from explorer.ui import prompt_and_continuation

    deck = DECKS["generation"]
    revealed = all_revealed(deck)
    # First a full page that leaves values behind (top-p 0.9, another view), then the slides that must not get them.
    at = open_lecture(deck="generation", slide=slide_numbered(deck, "Top-k and top-p"), answers=revealed)
    at = press(at, leave=True)
    assert at.toggle(key="present").value is True  # the full page in presentation mode
    for title, page in (("Sampling, seeded", "sampling"), ("Greedy, beam, and a ban", "beam_search")):
        number = slide_numbered(deck, title)
        at.switch_page("pages/lecture.py").run()  # what the browser's Back does: the lecture as it was
        at = press(at, slide=number)
        assert param(at, "slide") == str(number) and param(at, "answers") == revealed
        at = press(at, leave=True)
        assert not at.exception
        results = deck.slide(number).view.result()
        traces = results.values() if isinstance(results, dict) else [results]
        shown = markdown(at)
        for trace in traces:  # each decoding the slide drew, token for token, with its log-probability
            assert prompt_and_continuation(trace.prompt, trace.continuations[0], seq2seq=False) in shown, page
        if isinstance(results, dict):
            metrics = [metric.value for metric in at.metric]
            assert metrics == [f"{float(trace.sequence_logprobs[0]):.2f}" for trace in traces]
    at.switch_page("pages/lecture.py").run()
    at.run()
    assert param(at, "slide") == str(number) and param(at, "answers") == revealed
    assert at.toggle(key="present").value is False  # presentation mode as it was before Esc


def test_a_moved_slide_opens_on_its_full_page_as_moved():
    deck = DECKS["anatomy"]
    number = next(n for n, s in enumerate(deck.slides, 1) if isinstance(s.view, views.attention.Head))
    at = open_lecture(deck="anatomy", slide=number, **{f"s{number}_layer": 1})
    at.button(key="leave").click().run()
    assert not at.exception
    title = chart_titles(at)[0]
    assert "layer 1" in title and f"head {deck.slide(number).view.head}" in title


@pytest.mark.parametrize(
    ("params", "notices"),
    [
        ({"deck": "evil**bold**", "slide": "2"}, ["lecture “evil\\*\\*bold\\*\\*” is not one of the choices"]),
        ({"deck": "generation", "slide": "abc"}, ["slide “abc” is not one of the 15 slides"]),
        ({"deck": "generation", "slide": "999"}, ["slide “999” is not one of the 15 slides"]),
        ({"deck": "generation", "slide": "-1"}, ["slide “\\-1” is not one of the 15 slides"]),
        (
            {"deck": "anatomy", "slide": "6", "answers": "[x](https://evil.example)-1.6-99.3-0"},
            ["3 pairs are not a slide number and a choice", "slide 3 asks no question"],
        ),
        ({"deck": "anatomy", "slide": "7", "answers": "7-r", "s7_head": "99", "s7_query": "abc"}, ["Head 99 does not"]),
    ],
)
def test_a_crafted_link_gives_notices_never_a_traceback(params, notices):
    at = open_lecture(**params)
    assert not at.exception
    infos = "\n".join(e.value for e in at.info)
    for notice in notices:
        assert notice in infos, infos
    shown = markdown(at) + "\n".join(e.value for e in (*at.info, *at.warning, *at.caption))
    assert "https://evil.example" not in shown.replace("\\", "")
    assert "<b>" not in shown and "**bold**" not in shown


def deck_downloads(at: AppTest) -> list:
    return [button for button in at.get("download_button") if button.key == "deck_download"]


def test_a_slides_view_exports_at_slide_size_from_its_controls():
    at = open_lecture(deck="generation", slide=2)
    keys = {button.key for button in at.get("download_button")}
    assert {"slide-export-png", "slide-export-svg", "slide-export-html"} <= keys


def test_the_deck_as_a_file_is_made_on_request_then_downloaded(monkeypatch):
    from explorer.lecture import files
    from explorer.ui import lecture

    made = []

    def export_deck(deck, fmt, *, paper="a4", progress=None):
        for done in range(1, len(deck) + 1):
            progress(done, len(deck))
        made.append((deck.name, fmt, paper))
        return f"{deck.name}.{fmt}".encode()

    monkeypatch.setattr(files, "export_deck", export_deck)
    monkeypatch.setattr(lecture, "_FILES", {})
    at = open_lecture(deck="generation", slide=2)
    assert not deck_downloads(at)
    at.button(key="make_deck").click().run()
    assert not at.exception
    assert made == [("generation", "pdf", "a4")]
    assert len(deck_downloads(at)) == 1
    again = open_lecture(deck="generation", slide=3)  # another visitor: the file is there, made once
    assert len(deck_downloads(again)) == 1 and made == [("generation", "pdf", "a4")]
    # On Letter: another file, made on request; the paper is a PDF's only.
    again.selectbox(key="deck_paper").set_value("letter").run()
    assert not deck_downloads(again)
    again.button(key="make_deck").click().run()
    assert made[-1] == ("generation", "pdf", "letter") and len(deck_downloads(again)) == 1
    again.segmented_control(key="deck_format").set_value("pptx").run()
    assert [box.key for box in again.selectbox if box.key == "deck_paper"] == []


def test_a_deck_file_that_cannot_be_made_says_why_and_the_slide_stays(monkeypatch):
    from explorer.lecture import files
    from explorer.ui import lecture

    def failing(deck, fmt, *, paper="a4", progress=None):
        raise files.RenderFailed("Slide 3 of the Text generation deck (“*bold*”) could not be drawn: it hung.")

    monkeypatch.setattr(files, "export_deck", failing)
    monkeypatch.setattr(lecture, "_FILES", {})
    at = open_lecture(deck="generation", slide=2)
    at.button(key="make_deck").click().run()
    assert not at.exception
    assert "could not be drawn" in at.error[0].value and "\\*bold\\*" in at.error[0].value
    assert shown_specs(at) and not deck_downloads(at)


FOLLOWED = {"deck": "generation", "slide": 8, "answers": "7-r", "controls": {"temperature": 1.5}}


@pytest.mark.parametrize(
    ("state", "read"),
    [
        ({"pressed": {"slide": 4, "seq": 3}}, Press(3, 4)),
        ({"pressed": {"leave": True, "seq": 5}}, Press(5, leave=True)),
        ({"pressed": {"reveal": True, "slide": 4, "seq": 6}}, Press(6, 4, reveal=True)),
        ({"pressed": {"reveal": 1, "slide": 4, "seq": 6}}, Press(6, 4)),
        ({"pressed": {"follow": FOLLOWED, "slide": 8, "seq": 7}}, Press(7, 8, follow=FOLLOWED)),
        ({"pressed": {"follow": {**FOLLOWED, "slide": "8"}, "seq": 7}}, Press(7)),
        ({"pressed": {"follow": {**FOLLOWED, "answers": "1-0." * 1_000}, "seq": 7}}, Press(7)),
        (
            {
                "pressed": {
                    "follow": {**FOLLOWED, "controls": {"top_k": "5", "head": float("nan"), "x": True}},
                    "seq": 7,
                }
            },
            Press(7, follow={**FOLLOWED, "controls": {}}),
        ),
        ({"pressed": None}, Press()),
        (None, Press()),
        ({"pressed": {"slide": 4, "seq": "x"}}, Press()),
        ({"pressed": {"slide": 4, "seq": True}}, Press()),
        ({"pressed": {"slide": "9", "seq": 2}}, Press(2)),
        ({"pressed": {"slide": 2.5, "seq": 2}}, Press(2)),
        ({"pressed": {"leave": "yes", "seq": 2}}, Press(2)),
        ({"pressed": [1, 2]}, Press()),
        ({"pressed": {"slide": 4, "seq": -1}}, Press()),
        ({"pressed": {"slide": 4, "seq": 2**60}}, Press()),  # past what JavaScript counts exactly
        ({"pressed": {"slide": 10**400, "seq": 2}}, Press(2, 10**400)),  # a number: go_to keeps it in the deck
    ],
)
def test_a_crafted_key_press_reads_as_none_never_a_traceback(state, read):
    from explorer.ui.lecture import read_press

    assert read_press(state) == read


# -- bad input in a lecture link and from its components (issue 39) ------------------------------------------------


@pytest.mark.parametrize(
    ("params", "notice"),
    [
        ({"slide": "²"}, "slide “²” is not one of the 15 slides"),  # "²".isdigit() is True, int("²") raises
        ({"slide": "9" * 5_000}, f"slide “{'9' * 20}” is not one of the 15 slides"),  # int() refuses 4,300+ digits
        ({"slide": "2", "answers": "²-1"}, "“²-1” is not a slide number and a choice"),
        ({"slide": "2", "answers": "1-²"}, "“1-²” is not a slide number and a choice"),
        ({"slide": "2", "answers": "9" * 5_000 + "-1"}, "is not a slide number and a choice"),
        ({"slide": "2", "answers": "1-" + "9" * 5_000}, "is not a slide number and a choice"),
        ({"slide": "2", "answers": ".".join(f"{i}x-{i}" for i in range(99))}, "99 pairs are not a slide number"),
        ({"slide": "2", "answers": ".".join(f"{i}-0" for i in range(20, 120))}, "slides 20, 21, 22 and 97 more"),
    ],
    ids=[
        "superscript-slide",
        "5000-digit-slide",
        "superscript-answer-slide",
        "superscript-answer-choice",
        "5000-digit-answer-slide",
        "5000-digit-answer-choice",
        "99-bad-pairs",
        "100-unasked-slides",
    ],
)
def test_a_crafted_number_in_the_link_gives_one_notice_never_a_traceback(params, notice):
    at = open_lecture(deck="generation", **params)
    assert not at.exception
    assert len(at.info) == 1, [info.value for info in at.info]
    assert notice in at.info[0].value.replace("\\", "")  # as the reader sees it: Markdown's escapes taken out
    assert param(at, "slide") == ("2" if params["slide"] == "2" else "1")  # a bad slide number: the first slide
    assert "answers" not in at.query_params  # nothing in it fits: the link is cleaned


@pytest.mark.parametrize("value", ["p" * 100_000, "0", "yes"])
def test_a_presenter_value_other_than_1_is_not_written_back_into_the_link(value):
    at = open_lecture(deck="generation", slide=2, presenter=value)
    assert not at.exception
    assert "presenter" not in at.query_params and all(len(str(v)) < 100 for v in at.query_params.values())
    assert not at.get("bidi_component") or all(
        element.proto.component_name != "explorer_lecture_timer" for element in at.get("bidi_component")
    )  # the audience's view: no presenter's timer


def test_presenter_1_stays_in_the_link_with_the_presenters_side():
    at = open_lecture(deck="generation", slide=2, presenter=1)
    assert not at.exception and param(at, "presenter") == "1"
    assert "explorer_lecture_timer" in {element.proto.component_name for element in at.get("bidi_component")}


@pytest.fixture(scope="module")
def lecture_at_slide_2() -> AppTest:
    """One lecture session, at slide 2 of the generation deck, that the component tests send messages to."""
    return open_lecture(deck="generation", slide=2)


def send_component_message(at: AppTest, component: str, field: str, text: str) -> AppTest:
    """Rerun ``at`` as if its browser's ``component`` had sent ``text`` as its state (``json_value``) or its
    events (``json_trigger_value``). AppTest cannot send a component's value: its own widget states are sent
    with one more (through its private ``_run``, as ``run`` does)."""
    from streamlit.components.v2.bidi_component.main import _make_trigger_id

    element = next(e for e in at.get("bidi_component") if e.proto.component_name == component)
    states = at._tree.get_widget_states()
    state = states.widgets.add()
    state.id = element.proto.id if field == "json_value" else _make_trigger_id(element.proto.id, "events")
    setattr(state, field, text)
    return at._run(states)


DEEP = "[" * 100_000 + "]" * 100_000
COMPONENT_MESSAGES = {
    "malformed": "{bad",
    "cut-short": '{"pressed": {"slide": 3,',
    "100k-deep": DEEP,
    "deep-inside": '{"pressed": ' + "[" * 5_000 + "]" * 5_000 + "}",
    "5000-digit-seq": '{"pressed": {"slide": 3, "seq": ' + "9" * 5_000 + "}}",
    "wrong-types": '{"pressed": {"slide": "3", "seq": "1"}}',
    "a-list": "[1, 2, 3]",
    "too-long": '{"pressed": {"slide": 3, "seq": 1, "pad": "' + "x" * 100_000 + '"}}',
}


@pytest.mark.parametrize("field", ["json_value", "json_trigger_value"])
@pytest.mark.parametrize("message", sorted(COMPONENT_MESSAGES))
@pytest.mark.parametrize("component", ["explorer_lecture_keys", "explorer_viewport_probe"])
def test_a_crafted_component_message_is_ignored_never_a_traceback(lecture_at_slide_2, component, message, field):
    at = send_component_message(lecture_at_slide_2, component, field, COMPONENT_MESSAGES[message])
    assert not at.exception, at.exception[0].value[:200]
    assert param(at, "slide") == "2" and at.get("plotly_chart")  # the slide as it was
    at.run()  # and the next run too: nothing of the message stays behind to raise again
    assert not at.exception and param(at, "slide") == "2"


def test_a_well_formed_key_press_still_moves_the_slide(lecture_at_slide_2):
    at = send_component_message(
        lecture_at_slide_2, "explorer_lecture_keys", "json_value", '{"pressed": {"slide": 3, "seq": 1000}}'
    )
    assert not at.exception and param(at, "slide") == "3"
    at.button(key="previous").click().run()
    assert param(at, "slide") == "2"


def press(at: AppTest, **pressed) -> AppTest:
    """``at`` rerun as if its keys' script had sent ``pressed`` (a count past every press sent before)."""
    seq = at.session_state["_lecture_seq"] + 1 if "_lecture_seq" in at.session_state else 1
    message = json.dumps({"pressed": {**pressed, "seq": seq}})
    return send_component_message(at, "explorer_lecture_keys", "json_value", message)


def keys_data(at: AppTest) -> dict:
    element = next(e for e in at.get("bidi_component") if e.proto.component_name == "explorer_lecture_keys")
    return json.loads(element.proto.json)


@pytest.mark.parametrize("deck_name", list(DECKS))
def test_the_remotes_blank_screen_key_reveals_the_answer_and_the_view_draws_at_once(deck_name):
    deck = DECKS[deck_name]
    number = tour.questions(deck)[0]
    slide = deck.slide(number)
    result = slide.view.result()
    at = open_lecture(deck=deck_name, slide=number)
    assert not shown_specs(at) and not at.get("iframe")
    before = keys_data(at)["verdict"]
    at = press(at, reveal=True, slide=number + 1)  # a press for another slide than the one shown: nothing
    assert not shown_specs(at) and "answers" not in at.query_params
    at = press(at, reveal=True, slide=number)
    assert not at.exception
    assert shown_specs(at) or at.get("iframe")  # drawn in the same run
    assert param(at, "answers") == f"{number}-r" and param(at, "slide") == str(number)
    assert f"The answer: **{literal(slide.question.answer(result))}**" in markdown(at)
    assert keys_data(at)["verdict"] == before + 1  # the keyboard's focus goes to the verdict


def test_an_answer_sends_the_keyboard_to_the_verdict():
    deck = DECKS["generation"]
    number = tour.questions(deck)[0]
    at = open_lecture(deck="generation", slide=number)
    before = keys_data(at)["verdict"]
    at.button(key="choice-0").click().run()
    assert keys_data(at)["verdict"] == before + 1
    at.button(key="next").click().run()
    assert keys_data(at)["verdict"] == before + 1  # moving is no answer


def test_the_projector_window_follows_the_presenter_windows_slide_answers_and_controls():
    presenter = open_lecture(deck="generation", slide=8, answers="7-r", presenter=1, s8_temperature=1.5)
    sync = keys_data(presenter)["sync"]
    assert keys_data(presenter)["presenter"] is True
    assert sync == {"deck": "generation", "slide": 8, "answers": "7-r", "controls": {"temperature": 1.5}}
    projector = open_lecture(deck="generation", slide=2)
    assert keys_data(projector)["presenter"] is False
    projector = press(projector, follow=sync, slide=8)
    assert not projector.exception
    assert param(projector, "slide") == "8" and param(projector, "answers") == "7-r"
    assert projector.slider(key="s8_temperature").value == 1.5 and shown_specs(projector) == shown_specs(presenter)
    assert keys_data(projector)["sync"] == sync
    projector = press(projector, follow={**sync, "deck": "anatomy", "slide": 3}, slide=3)  # another deck's: none
    assert param(projector, "slide") == "8"


def test_the_projector_window_offers_the_presenter_window_and_the_presenter_window_does_not():
    def offered(at):
        return "explorer_lecture_presenter" in {e.proto.component_name for e in at.get("bidi_component")}

    assert offered(open_lecture(deck="generation", slide=2))
    assert not offered(open_lecture(deck="generation", slide=2, presenter=1))


@pytest.mark.parametrize(
    "viewport",
    ['"x"', "[1, 2]", '{"width": "abc", "room": 5}', '{"width": 1e300, "room": 1e300}', '{"width": -5, "room": true}'],
)
def test_a_crafted_viewport_report_sizes_nothing_never_a_traceback(lecture_at_slide_2, viewport):
    at = send_component_message(
        lecture_at_slide_2, "explorer_viewport_probe", "json_value", f'{{"viewport": {viewport}}}'
    )
    assert not at.exception, at.exception[0].value[:200]
    layout = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]
    assert 0 < layout["width"] <= 1_920 and 0 < layout["height"] <= 1_080  # the look of a window not measured yet


@pytest.mark.parametrize(
    ("viewport", "read"),
    [
        ({"width": 800, "room": 700}, (800, 700)),
        ({"width": 800.5, "room": -40}, (800.5, -40)),  # the figure's top below the window's bottom
        ({"width": 0, "room": 700}, (None, 700)),
        ({"width": True, "room": "700"}, (None, None)),
        ({"width": 1e300, "room": float("nan")}, (None, None)),
        ({"width": 10**400}, (None, None)),
        ("x", (None, None)),
        ([800, 700], (None, None)),
        (None, (None, None)),
    ],
)
def test_a_viewport_report_is_read_within_bounds(viewport, read):
    from explorer.ui.figures import read_viewport

    assert read_viewport(viewport) == read


def test_a_students_link_shows_the_slide_without_the_menu_and_model_picker(monkeypatch):
    from explorer.classroom import state
    from explorer.classroom.memory import InProcessStore
    from explorer.ui.lecture import STUDENT_CSS

    def hides_the_sidebar(at) -> bool:
        return any(STUDENT_CSS.strip() in html.proto.body for html in at.get("html"))

    monkeypatch.setattr(state, "_store", InProcessStore(max_classes=3))
    teacher = open_lecture(deck="generation", slide=2)
    teacher.button(key="class_start").click().run()
    pupil = open_lecture(**{"class": param(teacher, "class")})
    assert not pupil.exception and hides_the_sidebar(pupil)
    assert not hides_the_sidebar(teacher) and not hides_the_sidebar(open_lecture(deck="generation", slide=2))
