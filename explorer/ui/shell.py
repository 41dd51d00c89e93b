"""What every page shares: the page config, the sidebar (model picker, presentation mode) and its look.

``app_shell`` is drawn by the app (``navigation.run_app``) before it runs the chosen page. ``page_shell`` is
every page's first line, for the runs where Streamlit starts a page without the app: a folder named
``pages/`` beside the main script puts Streamlit in its first multipage mode (each file of ``pages/`` a page
of its own) until some run calls ``st.navigation``: the first visit after a server starts, when it is a
shared link to a page, and every ``AppTest`` run (it resets that mode for each run). The page then runs the
app, which draws the shell and the real navigation and runs the page through it.

Presentation mode (a toggle kept in the URL as ``present``) is for projectors: the page's header
and padding shrink, and its title, text, controls and explanation share one row of small buttons. The
page's controls (``with controls():``) open from a "Controls" button over the figure, and its main view
(``with stage():``) comes right below that row, so a 16:9 figure with projector-sized text fills the
window without scrolling (see ``explorer.ui.figures``).
"""

from __future__ import annotations

import contextlib
import threading

import streamlit as st

from explorer.ui.models import model_picker_ui
from explorer.ui.widgets import toggle_ui

PAGE_CONFIG = {"page_title": "Attention & Decoding Explorer", "page_icon": "🔍", "layout": "wide"}
PRESENT_KEY = "present"
_SHELL_KEY = "_shell_drawn"  # set by the app's run, consumed by the page it runs
# Where this script run draws its controls and main view in presentation mode. Per thread: each session's
# run has its own script thread, and page_header sets both at the start of every run.
_slots = threading.local()

# Less chrome for a projector: a transparent, shorter header and less padding above the content.
_PRESENTATION_CSS = """
<style>
[data-testid="stHeader"] { background: transparent; height: 2.25rem; }
/* The header overlaps the top of the page's first row: only its own buttons take clicks. */
[data-testid="stHeader"], [data-testid="stHeader"] * { pointer-events: none !important; }
[data-testid="stHeader"] button, [data-testid="stHeader"] a,
[data-testid="stHeader"] button *, [data-testid="stHeader"] a * { pointer-events: auto !important; }
[data-testid="stMainBlockContainer"] { padding-top: 1.5rem; padding-bottom: 1rem; }
[data-testid="stMainBlockContainer"] h1 { font-size: 1.75rem; padding-top: 0; padding-bottom: 0.25rem; }
[data-testid="stToolbar"] [data-testid="stAppDeployButton"] { display: none; }
/* Controls open over the figure: wide enough for a page's row of sliders. */
[data-testid="stPopoverBody"] { min-width: min(760px, 90vw); }
</style>
"""


def app_shell() -> None:
    """What the app draws before running a page: the page config and the sidebar."""
    _slots.slides = False  # until the lecture page says it shows slides (``present_slides``)
    _draw_shell()
    st.session_state[_SHELL_KEY] = True


def page_shell() -> None:
    """First line of every page: when Streamlit ran the page file on its own, run the app instead.

    The app then draws the shell and the real navigation (not Streamlit's list of page files) and runs
    this page through it, so the page looks and behaves as it always does.
    """
    if st.session_state.pop(_SHELL_KEY, False):
        return
    from explorer.ui.navigation import run_app  # navigation imports this module: imported when needed

    run_app()
    st.stop()


def _draw_shell() -> None:
    # A projector needs the width: presentation links, and the lecture's (its links always name their deck; the
    # page is not known yet here), open with the sidebar folded away.
    folded = str(st.query_params.get(PRESENT_KEY, "")).lower() == "true" or "deck" in st.query_params
    st.set_page_config(**PAGE_CONFIG, initial_sidebar_state="collapsed" if folded else "auto")
    model_picker_ui()
    with st.sidebar:
        st.divider()
        toggle_ui(
            "Presentation mode",
            key=PRESENT_KEY,
            help="For a projector: larger text, 16:9 figures that fit the window, less page chrome.",
        )
    if presenting():
        st.html(_PRESENTATION_CSS)


def presenting() -> bool:
    """Whether presentation mode is on for this session, or this run shows a lecture slide (read by pages and
    figures)."""
    return bool(st.session_state.get(PRESENT_KEY, False)) or getattr(_slots, "slides", False)


def present_slides(*, css: bool = True) -> None:
    """This run shows lecture slides: figures get the projector's look, as in presentation mode, whether or not
    the sidebar's toggle is on; the page's chrome shrinks the same way. ``css=False``: a fragment's run alone,
    on a thread of its own, where the page drawn around the fragment keeps its chrome."""
    _slots.slides = True
    if css:
        st.html(_PRESENTATION_CSS)


def page_header(title: str, explanation: str):
    """The page's title and a sentence or two for students; returns a container for the page's text inputs.

    In presentation mode the title, the text (behind a small button, see ``text_inputs_ui(compact=True)``),
    the controls and the explanation (behind "What am I looking at?") share one row, to leave the window
    to the figure.
    """
    _slots.controls = _slots.stage = _slots.explanation = _slots.picker = None
    if not presenting():
        st.title(title)
        st.caption(explanation)
        return st.container()
    columns = st.columns([3, 3, 2, 2], vertical_alignment="center")
    with columns[0]:
        st.title(title)
    with columns[2]:
        _slots.controls = st.popover("Controls", icon=":material/tune:", width="stretch")
    _slots.explanation = columns[3].popover("What am I looking at?", width="stretch")
    with _slots.explanation:
        st.caption(explanation)
    _slots.stage = st.container()
    _slots.picker = columns[1]  # a page's text inputs (``text_inputs_ui(compact=True)``) or its views
    return columns[1]


def controls():
    """Where the page's controls go: in place, or behind the "Controls" button in presentation mode."""
    return getattr(_slots, "controls", None) or contextlib.nullcontext()


def explanation():
    """Where a page adds to its explanation what depends on the view (cross-attention's rows, say): in place, or
    inside "What am I looking at?" in presentation mode."""
    return getattr(_slots, "explanation", None) or contextlib.nullcontext()


def picker():
    """Where a page's choice of view goes (``widgets.views_ui``): in place, or in the header row in presentation
    mode, where a page without text inputs leaves a column free."""
    return getattr(_slots, "picker", None) or contextlib.nullcontext()


def stage():
    """Where the page's main view goes: in place, or right below the header row in presentation mode."""
    return getattr(_slots, "stage", None) or contextlib.nullcontext()
