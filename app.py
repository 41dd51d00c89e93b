"""Attention & Decoding Explorer: the entry point (`streamlit run app.py`).

Sets up what every page shares (`ui.app_shell`: `st.set_page_config`, the sidebar model picker and
presentation mode), then runs the page chosen in the navigation.
"""

from pathlib import Path

import streamlit as st

from explorer import ui

HERE = Path(__file__).resolve().parent
# (section, file, title, icon) in menu order; the first is the default page. A listed page whose file does
# not exist yet is skipped; a page file not listed here still appears (under "More"), titled after its name.
PAGES = [
    ("Attention", "pages/attention_heatmaps.py", "Attention heatmaps", ":material/grid_on:"),
    ("Attention", "pages/tokens_embeddings.py", "Tokens and embeddings", ":material/text_fields:"),
    ("Attention", "pages/model_anatomy.py", "Model anatomy", ":material/account_tree:"),
    ("Attention", "pages/attention_step_by_step.py", "Attention step by step", ":material/functions:"),
    ("Attention", "pages/neuron_view.py", "Neuron view", ":material/blur_linear:"),
    ("Attention", "pages/heads_overview.py", "All heads", ":material/apps:"),
    ("Attention", "pages/bertviz_views.py", "Head and model views", ":material/share:"),
    ("Attention", "pages/head_statistics.py", "Head statistics", ":material/table_chart:"),
    ("Attention", "pages/compare_attention.py", "Compare", ":material/compare:"),
    ("Decoding", "pages/greedy_search.py", "Greedy search", ":material/trending_flat:"),
    ("Decoding", "pages/beam_search.py", "Beam search", ":material/account_tree:"),
    ("Decoding", "pages/sampling.py", "Sampling and temperature", ":material/casino:"),
    ("Decoding", "pages/compare_strategies.py", "Compare strategies", ":material/view_column:"),
    ("Decoding", "pages/generation_attention.py", "Attention while generating", ":material/stacked_line_chart:"),
]


def navigation_pages() -> dict[str, list]:
    listed = [entry for entry in PAGES if (HERE / entry[1]).exists()]
    known = {path for _, path, _, _ in PAGES}
    extra = [
        ("More", f"pages/{file.name}", file.stem.replace("_", " ").capitalize(), None)
        for file in sorted((HERE / "pages").glob("*.py"))
        if f"pages/{file.name}" not in known and not file.name.startswith("_")
    ]
    sections: dict[str, list] = {}
    for index, (section, path, title, icon) in enumerate(listed + extra):
        sections.setdefault(section, []).append(st.Page(HERE / path, title=title, icon=icon, default=index == 0))
    return sections


ui.app_shell()  # page config, the sidebar model picker and presentation mode, shared by every page
st.navigation(navigation_pages(), expanded=True).run()
