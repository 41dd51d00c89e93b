"""Lecture: the two chapters as slide decks, each slide one live view with what to look at, the sources' numbers
beside the model's, and questions to answer before the view shows.

The presenter moves with a remote or the keyboard (→ ← PageDown PageUp Space Home End; Esc opens the slide's
view on its full page); ``presenter=1`` adds the speaker notes, the next slide's title and a timer. While a
slide shows, the slides around it are computed in the background, so moving only draws.
"""

import streamlit as st

import explorer
from explorer import ui
from explorer.lecture import ahead
from explorer.ui import lecture

ui.page_shell()
ui.present_slides()
lecture.slide_css()

deck = lecture.deck_ui()
number = lecture.slide_number(deck)
number, escaped = lecture.keys_ui(deck, number)
presenter = st.query_params.get("presenter") == "1"
slide = deck.slide(number).with_model(lecture.available)

stage, side = st.columns([3, 1]) if presenter else (st.container(), None)
with stage:
    title_column, place_column, controls_column = st.columns([7, 3, 2], vertical_alignment="center")
    with title_column, st.container(key="lecture-title"):
        st.markdown(f"## {ui.literal(slide.title)}")
    with place_column, st.container(horizontal=True, vertical_alignment="center", key="lecture-place"):
        st.button(
            "",
            icon=":material/arrow_back:",
            key="previous",
            on_click=lecture.go_to,
            args=(deck, number - 1),
            disabled=number == 1,
            help="Previous slide (←, PageUp)",
        )
        st.markdown(f"**{number}** / {len(deck)}")
        st.button(
            "",
            icon=":material/arrow_forward:",
            key="next",
            on_click=lecture.go_to,
            args=(deck, number + 1),
            disabled=number == len(deck),
            help="Next slide (→, PageDown, Space)",
        )
    controls = controls_column.popover("Controls", icon=":material/tune:", width="stretch")
    try:
        result = ui.run_view(slide.view)
    except explorer.InputError as error:
        ui.notices_ui()
        st.info(ui.literal(error))
        st.stop()
    with controls:
        view = lecture.controls_ui(slide.view, result)
        leave = st.button("Open on its full page", icon=":material/open_in_full:", key="leave", help="Esc")
    lecture.answers(deck)  # the link's answers read (with a notice for what does not fit) before the notices show
    ui.notices_ui()
    shown_result = result if view == slide.view else ui.run_view(view)
    if leave or escaped:
        lecture.leave_for_full_page(view)

    answered = lecture.question_ui(deck, number, slide, result) if slide.question else True
    lecture.slide_text_ui(slide, shown_result, answered=answered)
    if answered:
        lecture.show_slide_view(view, shown_result, exports=controls)

if side is not None:
    with side:
        lecture.presenter_ui(deck, number, slide)
lecture.score_ui(deck)
lecture.deck_file_ui(deck)
ahead.compute_ahead(lecture.around(deck, number))
