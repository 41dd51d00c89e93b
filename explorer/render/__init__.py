"""The render layer: turns captured arrays into figures and short strings, never calling ``st.*``.

Each function takes the data contract of ``explorer.data`` (or plain arrays) and returns a Plotly
figure, an Altair chart or an HTML string, so the same views work in the app, in a notebook and in
tests. Token labels are user text: everything here escapes them before they reach anything that
interprets HTML.

Figures share one set of conventions (``style``): pass a ``FigureInfo`` (what the figure shows) and a
``Look`` (how big: ``SCREEN``, ``presentation_look(...)``, ``SLIDE``) to any figure function, and
``export``/``save`` it as PNG, SVG or standalone HTML::

    from explorer.render import SLIDE, FigureInfo, attention_heatmap, save
    info = FigureInfo("Attention weights", model=lm.name, text=text, where=("layer 2", "head 5"))
    figure = attention_heatmap(cap.main, 2, 5, info=info, look=SLIDE)
    figure.show()
    save(figure, info, "png")   # attention-weights_all-minilm-l6-v2_time-flies-like-an-arrow_layer-2_head-5_….png
"""

from explorer.render.export import save
from explorer.render.heatmap import attention_heatmap, token_matrix
from explorer.render.style import SCREEN, SLIDE, FigureInfo, Look, presentation_look, screen_look

__all__ = [
    "SCREEN",
    "SLIDE",
    "FigureInfo",
    "Look",
    "attention_heatmap",
    "presentation_look",
    "save",
    "screen_look",
    "token_matrix",
]
