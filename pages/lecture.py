"""Lecture: the two chapters as slide decks, each slide one live view with what to look at, the sources' numbers
beside the model's, and questions to answer before the view shows.

The presenter moves with a remote or the keyboard (→ ← PageDown PageUp Space Home End; Esc opens the slide's
view on its full page); ``presenter=1`` adds the speaker notes, the next slide's title and a timer. While a
slide shows, the slides around it are computed in the background, so moving only draws.

A live class (``?class=CODE``, see ``explorer.ui.classroom``): students follow the teacher's slide and answer
its questions as a poll.
"""

import streamlit as st

import explorer
from explorer import ui
from explorer.lecture import ahead
from explorer.ui import classroom, lecture

ui.page_shell()
ui.present_slides()
lecture.slide_css()

seat = classroom.seat_ui()
following = seat is not None and seat.follows
teaching = seat is not None and seat.role == "teacher"
if following:
    lecture.show_slide(seat.state.deck, seat.state.slide)
deck = lecture.deck_ui()
number = lecture.slide_number(deck)
number, escaped = (number, False) if following else lecture.keys_ui(deck, number)
presenter = st.query_params.get("presenter") == "1"
slide = deck.slide(number).with_model(lecture.available)

stage, side = st.columns([3, 1]) if presenter else (st.container(), None)
with stage:
    controls = lecture.title_row_ui(deck, number, slide, seat)
    try:
        result = ui.run_view(slide.view)
    except explorer.InputError as error:
        ui.notices_ui()
        st.info(ui.literal(error))
        st.stop()
    if following:
        view, leave = classroom.controls_for(seat, slide, result), False
    else:
        with controls:
            view = lecture.controls_ui(slide.view, result)
            leave = st.button("Open on its full page", icon=":material/open_in_full:", key="leave", help="Esc")
    if teaching:  # the class moves now, while this page draws: its students' pages draw at the same time
        classroom.publish(seat, deck, number, slide, view)
    lecture.answers(deck)  # the link's answers read (with a notice for what does not fit) before the notices show
    ui.notices_ui()
    shown_result = result if view == slide.view else ui.run_view(view)
    if leave or escaped:
        lecture.leave_for_full_page(view)

    poll = None
    if slide.question and seat is not None and seat.role != "explorer":
        poll = classroom.poll_ui(seat, number, slide, result)
        answered = poll is not None
    else:
        answered = lecture.question_ui(deck, number, slide, result) if slide.question else True
    lecture.slide_text_ui(slide, shown_result, answered=answered)
    if answered:
        lecture.show_slide_view(view, shown_result, exports=controls, beside=poll)

if side is not None:
    with side:
        lecture.presenter_ui(deck, number, slide)
if seat is None:
    lecture.score_ui(deck)
lecture.deck_file_ui(deck)
ahead.compute_ahead(lecture.around(deck, number))
