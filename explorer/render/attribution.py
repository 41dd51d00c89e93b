"""Input attribution drawn: how much each input token moved one prediction's log-probability.

- ``shaded_text_html``: the text as its tokens, each on a background shaded by its score (an HTML string);
- ``attribution_bars``: one bar per token, the same colours.

Both colour by the diverging scale of the patching maps (ColorBrewer's RdBu, readable with the common colour-vision
deficiencies), centred on 0 and stretched to the largest |score|: red raises the target's log-probability, blue
lowers it. Token labels come from visitors' texts: escaped, with visible stand-ins for control characters.
Takes plain arrays and labels, so a page keeps only what it draws.
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from explorer.labels import visible
from explorer.render.layout import batched, relayout, update_axes
from explorer.render.patching import DIVERGING
from explorer.render.style import FONT, GRID, INK, MUTED, SCREEN, FigureInfo, Look, abbreviate, escape, finish

LABEL_CHARS = 12
DARK = 0.35  # beyond this distance from the scale's white middle, a token is written in white


def score_limit(scores: np.ndarray) -> float:
    """The colour scale's half-width: the largest |score| (1 for all zeros, so nothing divides by 0)."""
    largest = float(np.max(np.abs(scores))) if np.size(scores) else 0.0
    return largest if largest > 0 else 1.0


def shade(scores: np.ndarray, limit: float) -> list[tuple[str, bool]]:
    """(background colour, dark?) of each score on the diverging scale from −limit to +limit."""
    where = np.clip(0.5 + 0.5 * np.asarray(scores, dtype=np.float64) / limit, 0.0, 1.0)
    return [(colour, abs(t - 0.5) > DARK) for colour, t in zip(sample_colorscale(DIVERGING, where), where, strict=True)]


def shaded_text_html(tokens, scores: np.ndarray, *, target_token: str, font_size: int = 18) -> str:
    """The tokens in order, each shaded by its score, its exact score in its tooltip, and a key below."""
    values = np.asarray(scores, dtype=np.float32)
    limit = score_limit(values)
    spans = [
        f'<span title="#{i} {_attribute_text(token)}: {v:+.4f}" style="background:{colour};'
        f'color:{"#ffffff" if dark else INK};padding:0.1em 0.05em;border-radius:0.2em">{_text(token)}</span>'
        for i, (token, v, (colour, dark)) in enumerate(zip(tokens, values.tolist(), shade(values, limit), strict=True))
    ]
    target = _text(repr(target_token))
    key = (
        f'<div style="color:{MUTED};font-size:0.7em;margin-top:0.6em">Red raises log p({target}), blue lowers it; '
        f"the strongest colour is ±{limit:.3g}. Hover a token for its score.</div>"
    )
    return (
        f'<div class="attribution-text" style="font-family:{html.escape(FONT)};font-size:{font_size}px;'
        f'line-height:1.9;color:{INK};white-space:pre-wrap;overflow-wrap:anywhere">'
        f"{''.join(spans)}{key}</div>"
    )


def _text(label: str) -> str:
    return html.escape(visible(label), quote=False)


def _attribute_text(label: str) -> str:
    return html.escape(visible(label), quote=True)


def attribution_bars(
    tokens,
    scores: np.ndarray,
    *,
    score_title: str,
    info: FigureInfo,
    look: Look = SCREEN,
) -> go.Figure:
    """scores [token]: one bar per input token, coloured as ``shaded_text_html`` shades it; ``score_title`` names
    the score on the y axis."""
    values = np.asarray(scores, dtype=np.float32)
    limit = score_limit(values)
    labels = [f"#{i} {escape(abbreviate(token, LABEL_CHARS))}" for i, token in enumerate(tokens)]
    hover = [
        f"<b>#{i} {escape(token)}</b><br>{v:+.4f}"
        for i, (token, v) in enumerate(zip(tokens, values.tolist(), strict=True))
    ]
    figure = go.Figure(
        go.Bar(
            x=labels,
            y=values,
            marker={"color": values, "colorscale": DIVERGING, "cmin": -limit, "cmax": limit, "line": {"width": 0}},
            customdata=hover,
            hovertemplate="%{customdata}<extra></extra>",
        )
    )
    with batched(figure):
        finish(figure, info, look)
        relayout(figure, margin={"l": 80, "r": 30, "t": look.title_band, "b": 110}, showlegend=False, bargap=0.25)
        ticks = {"tickfont": {"size": look.tick_size}, "gridcolor": GRID}
        update_axes(figure, "x", ticks, type="category", tickangle=-40 if len(labels) > 8 else 0, showgrid=False)
        update_axes(figure, "y", ticks, title={"text": score_title}, zeroline=True, zerolinecolor=MUTED)
    return figure
