"""The app's menu and its run: ``run_app`` is all of app.py.

The pages are the scripts in ``pages/`` beside the app's main script, listed here with their sections,
titles and icons. ``run_app`` draws the menu and what every page shares (``shell.app_shell``) and runs the page
the visitor asked for through ``st.navigation``.

The menu is drawn by the app (``menu_ui``), not by Streamlit: with a ``pages/`` folder, Streamlit lists the
folder's raw file names ("app", "head ablation", "View 8 more") above a blank page until some run calls
``st.navigation``, seconds into a server's first run. ``.streamlit/config.toml`` switches that list off
(``client.showSidebarNavigation = false``, which hides ``st.navigation``'s own menu too), so a visitor only
ever sees the app's loading line (``explorer.ui.loading``), then this menu.
"""

from __future__ import annotations

import html
from pathlib import Path

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from explorer import settings
from explorer.ui import aria, loading
from explorer.ui.aria import aria_ui
from explorer.ui.shell import PAGE_CONFIG, app_shell
from explorer.ui.text import literal

# (section, file, title, icon) in menu order; the first is the default page. A listed page whose file does
# not exist is skipped; a page file not listed here still appears (under "More"), titled after its name.
PAGES = [
    ("Attention", "pages/attention_heatmaps.py", "Attention heatmaps", ":material/grid_on:"),
    ("Attention", "pages/tokens_embeddings.py", "Tokens and embeddings", ":material/text_fields:"),
    ("Attention", "pages/model_anatomy.py", "Model anatomy", ":material/account_tree:"),
    ("Attention", "pages/attention_step_by_step.py", "Attention step by step", ":material/functions:"),
    ("Attention", "pages/neuron_view.py", "Neuron view", ":material/blur_linear:"),
    ("Attention", "pages/heads_overview.py", "All heads", ":material/apps:"),
    ("Attention", "pages/bertviz_views.py", "Head and model views", ":material/share:"),
    ("Attention", "pages/head_statistics.py", "Head statistics", ":material/table_chart:"),
    ("Attention", "pages/head_types.py", "Head types", ":material/category:"),
    ("Attention", "pages/compare_attention.py", "Compare", ":material/compare:"),
    ("Decoding", "pages/greedy_search.py", "Greedy search", ":material/trending_flat:"),
    ("Decoding", "pages/beam_search.py", "Beam search", ":material/account_tree:"),
    ("Decoding", "pages/sampling.py", "Sampling and temperature", ":material/casino:"),
    ("Decoding", "pages/compare_strategies.py", "Compare strategies", ":material/view_column:"),
    ("Decoding", "pages/generation_attention.py", "Attention while generating", ":material/stacked_line_chart:"),
    ("Inside the model", "pages/logit_lens.py", "Logit lens", ":material/layers:"),
    ("Inside the model", "pages/head_ablation.py", "Which heads matter", ":material/block:"),
    ("Inside the model", "pages/patching.py", "Patching", ":material/swap_horiz:"),
    ("Inside the model", "pages/why_this_token.py", "Why this token?", ":material/help:"),
    ("Teach", "pages/lecture.py", "Lecture", ":material/co_present:"),
]


MENU_KEY = "menu"  # the menu's container: class "st-key-menu" in the page


def app_root() -> Path:
    """The folder of the script Streamlit was started with (app.py, in a checkout or an installed package)."""
    return Path(get_script_run_ctx().main_script_path).resolve().parent


def navigation_pages(root: Path) -> dict[str, list]:
    """{section: [st.Page]} for every page script under ``root / "pages"``."""
    listed = [entry for entry in PAGES if (root / entry[1]).exists()]
    known = {path for _, path, _, _ in PAGES}
    extra = [
        ("More", f"pages/{file.name}", file.stem.replace("_", " ").capitalize(), None)
        for file in sorted((root / "pages").glob("*.py"))
        if f"pages/{file.name}" not in known and not file.name.startswith("_")
    ]
    sections: dict[str, list] = {}
    for index, (section, path, title, icon) in enumerate(listed + extra):
        sections.setdefault(section, []).append(st.Page(root / path, title=title, icon=icon, default=index == 0))
    return sections


def run_app() -> None:
    """The whole app: the menu and the shared shell (page config, sidebar), then the chosen page; in place of it,
    what is wrong with the server's settings, when something is (``explorer.settings``)."""
    if wrong := settings.problems():
        settings_ui(wrong)
        st.stop()
    menu = st.sidebar.container(key=MENU_KEY)  # on top of the sidebar, drawn once the pages are known
    app_shell()  # first: its page config (the app's icon) must come before st.navigation sets the page's
    sections = navigation_pages(app_root())
    page = st.navigation(sections, position="hidden")  # routing only: the menu is menu_ui's
    st.set_page_config(page_title=page_title(page.title))
    menu_ui(sections, menu, current=page.title)
    from explorer.ui.lecture import back_to_slide_ui  # the lecture's parts import this module's neighbours

    back_to_slide_ui(page.url_path)  # a slide's full page: Esc goes back to the slide
    loading.clear()
    page.run()


def settings_ui(problems: list[str]) -> None:
    """The server's settings it cannot use, one sentence each, for whoever runs it (visitors see it too)."""
    st.error(
        "This server cannot start: its settings need fixing by whoever runs it.\n\n"
        + "\n\n".join(f"- {literal(problem)}" for problem in problems),
        icon=":material/settings_alert:",
    )


def page_title(title: str) -> str:
    """The browser tab's title (and what a screen reader announces first): the page's own, then the app's."""
    return f"{title} · {PAGE_CONFIG['page_title']}"


def menu_ui(sections: dict[str, list], slot, *, current: str | None = None) -> None:
    """The sidebar menu in ``slot``: each section's heading, then its pages as a list of links (the page shown is
    highlighted). ``menu_rules`` gives them what a screen reader needs and ``st.page_link`` does not draw."""
    with slot:
        for index, (section, pages) in enumerate(sections.items()):
            # A heading, not a caption (captions are the sidebar's notes), in the sidebar's small grey.
            st.html(f'<h2 class="menu-section">{html.escape(section)}</h2>{_HEADING_CSS if index == 0 else ""}')
            with st.container(key=f"{MENU_KEY}-list-{index}"):
                for page in pages:
                    st.page_link(page)
        aria_ui([*aria.RULES, *menu_rules(current)], key=f"{MENU_KEY}-aria")


_HEADING_CSS = (
    "<style>h2.menu-section { font-size: 0.875rem; font-weight: 400; color: #4b5060; padding: 0.5rem 0 0 0;"
    " margin: 0; }</style>"
)


def menu_rules(current: str | None) -> list[dict]:
    """The menu as a navigation landmark whose sections are lists, with the shown page's link marked."""
    lists = f"[class*='st-key-{MENU_KEY}-list-']"
    return [
        {"selector": f".st-key-{MENU_KEY}", "attributes": {"role": "navigation", "aria-label": "Pages"}},
        {"selector": lists, "attributes": {"role": "list"}},
        {"selector": f"{lists} > *", "attributes": {"role": "listitem"}},
        {
            "selector": f".st-key-{MENU_KEY} a[data-testid='stPageLink-NavLink']",
            "attributes": {"aria-current": "page"},
            "label": current or "",
        },
    ]
