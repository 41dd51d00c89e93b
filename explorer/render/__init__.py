"""The render layer: turns captured arrays into figures and short strings, never calling ``st.*``.

Each function takes the data contract of ``explorer.data`` (or plain arrays) and returns a Plotly
figure or a string, so the same views work in the app, in a notebook and in tests. Token labels are
user text: everything here escapes them before they reach anything that interprets HTML.
"""
