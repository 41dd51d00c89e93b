"""Lecture: the two chapters as slide decks, each slide one live view with what to look at, the sources' numbers
beside the model's, and questions to answer before the view shows.

The presenter moves with a remote or the keyboard (→ ← PageDown PageUp Space Home End; "." or "b" shows the
question's answer; Esc opens the slide's view on its full page, and Back or Esc there comes back); ``presenter=1``
(a second window, from "Open the presenter view" under Controls) adds the speaker notes, the next slide's title
and a timer, and the projector's window follows it. While a slide shows, the slides around it are computed in the
background, so moving only draws.

A live class (``?class=CODE``, see ``explorer.ui.classroom``): students follow the teacher's slide and answer
its questions as a poll; a student's slide is a fragment that the teacher's moves rerun alone.
"""

from explorer import ui
from explorer.lecture import ahead
from explorer.ui import classroom, lecture

ui.page_shell()
ui.present_slides()
lecture.slide_css()

seat = classroom.seat_ui()
lecture.student_css(seat)
following = seat is not None and seat.follows
if following:
    lecture.show_slide(seat.state.deck, seat.state.slide)
deck = lecture.deck_ui()
number = lecture.slide_number(deck)
if following:  # in a fragment: the teacher's moves rerun the slide alone, not the app and sidebar around it
    classroom.follow_ui(seat, deck)
else:
    number, press = lecture.keys_ui(deck, number, seat)
    lecture.slide_ui(deck, number, seat, escaped=press.leave)
if seat is None:
    lecture.score_ui(deck)
lecture.deck_file_ui(deck)
ahead.compute_ahead(lecture.around(deck, number))
