"""Attention & Decoding Explorer: the entry point (`streamlit run app.py`).

Sets up what every page shares (`ui.app_shell`: `st.set_page_config` and the sidebar model picker), then
runs the page chosen in the navigation.
"""

from pathlib import Path

import streamlit as st

from explorer import ui

HERE = Path(__file__).resolve().parent
# (file, title, icon) in menu order; the first is the default page. Pages not listed here still appear,
# titled after their file name, so a new page shows up as soon as its file exists.
PAGES = [
    ("pages/attention_heatmaps.py", "Attention heatmaps", ":material/grid_on:"),
]


def navigation_pages() -> list:
    listed = [(path, title, icon) for path, title, icon in PAGES if (HERE / path).exists()]
    known = {path for path, _, _ in PAGES}
    extra = [
        (f"pages/{file.name}", file.stem.replace("_", " ").capitalize(), None)
        for file in sorted((HERE / "pages").glob("*.py"))
        if f"pages/{file.name}" not in known and not file.name.startswith("_")
    ]
    return [
        st.Page(path, title=title, icon=icon, default=index == 0)
        for index, (path, title, icon) in enumerate(listed + extra)
    ]


ui.app_shell()  # page config and the sidebar model picker, shared by every page
st.navigation(navigation_pages()).run()
