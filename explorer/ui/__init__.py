"""The Streamlit side of the explorer: the only part of the package that imports Streamlit.

One module per concern; pages import what they need from here:

- ``shell``: page config, sidebar, presentation mode, page headers (``page_shell`` is every page's
  first line).
- ``models``: the cached, shared model and the sidebar model picker.
- ``results``: ``run_model``, every model run through ``explorer.gateway`` with the page's spinner or progress
  bar (cached for the whole server: moving a widget never reruns the model).
- ``widgets``: text inputs, index sliders, toggles and stack choice, all bound to the URL, with
  notices for link values that do not fit.
- ``figures``: figures sized to the window, with PNG/SVG/HTML exports at slide size.
- ``text``: visitor-controlled text shown literally inside Markdown messages.
- ``messages``: what the components' JavaScript sends, read within bounds (installed on import).
"""

# loading first: importing it draws the app's first line, as the imports after it take seconds on a server's
# first run (see explorer.ui.loading)
from explorer.ui import loading, wakeups  # noqa: F401 (loading draws as it is imported)
from explorer.ui.figures import export_buttons, figure_builder, figure_look, show_figure
from explorer.ui.messages import guard_component_messages
from explorer.ui.models import (
    MODEL_KEY,
    bundled_choices,
    cached_model,
    display_name,
    model_picker_ui,
    request_model,
    require_model,
    selected_model,
)
from explorer.ui.presets import apply_pending_preset, preset_button, preset_notice
from explorer.ui.results import run_model, run_view, show_view, shown_progress
from explorer.ui.shell import (
    app_shell,
    controls,
    explanation,
    page_header,
    page_shell,
    present_slides,
    presenting,
    stage,
)
from explorer.ui.text import literal, literal_table, prompt_and_continuation
from explorer.ui.widgets import (
    STACK_LABELS,
    add_notice,
    choice_ui,
    expander_ui,
    heads_ui,
    index_slider_ui,
    layer_slider_ui,
    notices_ui,
    number_slider_ui,
    set_value,
    stack_ui,
    text_inputs_ui,
    text_ui,
    toggle_ui,
    token_ids_state,
    views_ui,
)

__all__ = [
    "MODEL_KEY",
    "STACK_LABELS",
    "add_notice",
    "app_shell",
    "apply_pending_preset",
    "bundled_choices",
    "cached_model",
    "choice_ui",
    "controls",
    "display_name",
    "expander_ui",
    "explanation",
    "export_buttons",
    "figure_builder",
    "figure_look",
    "heads_ui",
    "index_slider_ui",
    "layer_slider_ui",
    "literal",
    "literal_table",
    "model_picker_ui",
    "notices_ui",
    "number_slider_ui",
    "page_header",
    "page_shell",
    "present_slides",
    "presenting",
    "preset_button",
    "preset_notice",
    "prompt_and_continuation",
    "request_model",
    "require_model",
    "run_model",
    "run_view",
    "selected_model",
    "set_value",
    "show_figure",
    "show_view",
    "shown_progress",
    "stack_ui",
    "stage",
    "text_inputs_ui",
    "text_ui",
    "toggle_ui",
    "token_ids_state",
    "views_ui",
]

wakeups.install()  # fewer event-loop wake-ups under a class: see explorer.ui.wakeups
guard_component_messages()  # a component's malformed message reads as none: see explorer.ui.messages
