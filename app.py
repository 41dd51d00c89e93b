"""Attention & Decoding Explorer: the entry point (`streamlit run app.py`).

Draws what every page shares (the page config, the sidebar model picker and presentation mode), then runs
the page chosen in the navigation. The menu (sections, titles, icons) is ``PAGES`` in
``explorer/ui/navigation.py``; the pages are the scripts in ``pages/``.
"""

from explorer.ui.navigation import run_app

run_app()
