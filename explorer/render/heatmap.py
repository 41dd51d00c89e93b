"""Token-by-token matrices as Plotly heatmaps: one attention head, queries down the y axis, keys along x.

Design choices, and why:

- Only the shown [query, key] matrix goes into the figure, as float32. Plotly serializes NumPy arrays as
  base64 typed arrays, 4 bytes a cell: exact values in less space than rounded decimal text would take.
- Axes are categories named ``#i 'token'``: the position keeps repeated tokens apart (Plotly merges
  equal category names) and lets the hover name both tokens without a per-cell text array.
  ``ticktext`` then shows the bare tokens.
- The geometry is computed here, in pixels, from the figure's ``Look``: square cells, the token labels
  thinned, turned or abbreviated so that no two overlap (``style.token_ticks``), the colour bar beside
  the matrix, the whole block centred. The same function lays out a browser window and a 1920×1080
  slide, so exports are not squeezed copies of the screen.
- Masked cells (keys a query may not attend to) are NaN, which Plotly leaves blank; the colour scale
  starts at a visible tint so that a weight of 0 never looks like a masked cell.
- Tokens are escaped: Plotly renders tags such as ``<b>`` or ``<a>`` in labels and hover text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from explorer.data import AttentionStack
from explorer.render.layout import batched, relayout, update_axes
from explorer.render.style import (
    MUTED,
    SCREEN,
    SEQUENTIAL,
    FigureInfo,
    Look,
    TokenTicks,
    cell_text_colour,
    cell_text_colours,
    escape,
    finish,
    text_width,
    token_ticks,
)

HOVER = "<b>%{z:.6g}</b><br>query %{y} → key %{x}<extra></extra>"
MASKED_GREY = "#8a8f99"  # masked cells when they are shown (−∞), darker than any weight's lightest tint
MAX_CELL_EMS = 5  # the largest cell, in tick-label font sizes
MIN_CELL_TEXT = 11  # px: smaller printed values would not be readable; the hover still gives them


def attention_heatmap(
    stack: AttentionStack,
    layer: int,
    head: int,
    *,
    color_max: float | None = 1.0,
    info: FigureInfo | None = None,
    look: Look = SCREEN,
    segment_b_start: int | None = None,
    skip_first_row: bool = False,
) -> go.Figure:
    """The weights of one head, [query, key], with masked cells blank.

    ``color_max`` is the weight drawn darkest: 1.0 compares heads on one scale; None stretches the
    colours to this head's largest weight (with ``skip_first_row``, its largest below the first row: in a
    causal model the first query can only attend to itself, so its weight is always 1 and would wash out
    every later row). ``info`` names the figure (default: "Attention weights · layer L · head H", counted
    from 0). ``segment_b_start`` draws the boundary of a sentence pair.
    """
    info = info or FigureInfo("Attention weights", where=(f"layer {layer}", f"head {head}"))
    return weights_heatmap(
        masked_weights(stack, layer, head),
        stack.query_tokens,
        stack.key_tokens,
        color_max=color_max,
        info=info,
        look=look,
        boundaries=() if segment_b_start is None else (segment_b_start,),
        skip_first_row=skip_first_row,
    )


def weights_heatmap(
    weights: np.ndarray,
    query_tokens,
    key_tokens,
    *,
    color_max: float | None = 1.0,
    info: FigureInfo,
    look: Look = SCREEN,
    boundaries: tuple[int, ...] = (),
    skip_first_row: bool = False,
) -> go.Figure:
    """One head's [query, key] weights (NaN where masked), coloured as ``attention_heatmap`` describes.

    Takes only the matrix it draws, so a page can keep it for a later export without keeping a whole capture.
    """
    top = _color_max(weights[1:] if skip_first_row and len(weights) > 1 else weights, color_max)
    return token_matrix(
        weights,
        query_tokens,
        key_tokens,
        info=info,
        look=look,
        zmax=top,
        colorbar_title=colorbar_title(top, stretched=color_max is None, without_first_row=skip_first_row),
        boundaries=boundaries,
    )


def token_matrix(
    values: np.ndarray,
    row_tokens,
    column_tokens,
    *,
    info: FigureInfo,
    look: Look = SCREEN,
    zmax: float = 1.0,
    zmin: float = 0.0,
    colorbar_title: str | None = None,
    row_title: str = "query (attending)",
    column_title: str = "key (attended to)",
    hovertemplate: str = HOVER,
    boundaries: tuple[int, ...] = (),
    colorscale=None,
    value_format: str = ".2f",
    masked_label: str | None = None,
    show_colorbar: bool = True,
    value_chars: int = 4,
) -> go.Figure:
    """Any [row, column] matrix over tokens, laid out for ``look``; NaN cells stay blank.

    ``boundaries`` are token indices where a dashed line separates rows and columns (a sentence pair's
    second segment, the first generated token). ``masked_label`` (e.g. "−∞") fills the NaN cells with
    grey and that label instead of leaving them blank. ``value_format`` prints values in cells that fit them
    (``value_chars`` characters wide: "0.25" is 4, a mask's "1" is 1).
    """
    rows, columns = position_labels(row_tokens), position_labels(column_tokens)
    geometry = matrix_geometry(
        row_tokens, column_tokens, look, colorbar=show_colorbar, column_title_lines=column_title.count("<br>") + 1
    )
    trace = go.Heatmap(
        z=np.asarray(values, dtype=np.float32),
        x=columns,
        y=rows,
        zmin=zmin,
        zmax=zmax,
        colorscale=colorscale or SEQUENTIAL,
        colorbar=_colorbar(colorbar_title or f"weight<br>darkest = {zmax:.3g}", geometry, look),
        showscale=show_colorbar,
        hovertemplate=hovertemplate,
        hoverongaps=False,
        **_readable(_cell_style(geometry.cell, look, value_format, value_chars), values, zmin, zmax, colorscale),
    )
    figure = go.Figure(trace)
    if masked_label is not None:
        figure.add_trace(_masked_cells(np.asarray(values), rows, columns, masked_label, geometry.cell, look))
    with batched(figure):
        finish(figure, info, look)
        relayout(figure, margin={"l": 0, "r": 0, "t": geometry.top, "b": 0, "autoexpand": False})
        update_axes(figure, "x", _axis(columns, geometry.x_ticks, column_title, look), domain=geometry.x_domain)
        update_axes(
            figure, "y", _axis(rows, geometry.y_ticks, row_title, look), domain=geometry.y_domain, autorange="reversed"
        )
    for boundary in boundaries:
        _draw_boundary(figure, boundary, len(rows), len(columns))
    return figure


def masked_weights(stack: AttentionStack, layer: int, head: int) -> np.ndarray:
    """[query, key] float32 copy of one head's weights, NaN where the mask forbids attending."""
    return blank_masked(stack.attentions[layer, head], stack.masks_by_layer()[layer])


def blank_masked(weights: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """A float32 copy of ``weights`` with NaN (drawn blank) where ``allowed`` is False."""
    return np.where(allowed, weights, np.nan).astype(np.float32)


def position_labels(tokens) -> list[str]:
    """``#i 'token'``, escaped: unique per position even when tokens repeat."""
    return [f"#{i} '{escape(token)}'" for i, token in enumerate(tokens)]


def colorbar_title(color_max: float, *, stretched: bool, without_first_row: bool = False) -> str:
    """What the darkest colour means, always said on the colour bar."""
    if stretched:
        where = "max below row 0" if without_first_row else "this head's max"
        return f"weight<br>darkest = {color_max:.2g}<br>({where})"
    return f"weight<br>darkest = {color_max:g}"


def verification_caption(error: float, *, tolerance: float = 1e-4) -> str:
    """A one-line verdict on ``capture.verify()``: recomputing softmax(q . k) reproduces the weights."""
    if math.isnan(error):  # a weights-only stack: nothing to recompute from, so nothing is claimed
        return "⚠ not verified: nothing to recompute from, queries and keys are not available for this architecture"
    if not math.isfinite(error) or error > tolerance:
        return f"⚠ not verified: max |recomputed − captured| = {error:.1e} (above {tolerance:.0e})"
    return f"✓ verified: max |recomputed − captured| = {error:.1e}"


def agreement_caption(what: str, difference: float, *, tolerance: float = 1e-4) -> str:
    """A one-line verdict on a recomputation shown beside the model's own numbers: the ✓ only when the measured
    difference earns it (a NaN or a difference above ``tolerance`` gets a ⚠ saying so)."""
    if not math.isfinite(difference) or difference > tolerance:
        return f"⚠ {what}: max difference {difference:.1e}, above {tolerance:.0e}: they disagree."
    return f"✓ {what}: max difference {difference:.1e}."


@dataclass(frozen=True)
class MatrixGeometry:
    """Where a token matrix sits in its figure, in pixels and in Plotly's paper fractions."""

    cell: float  # side of one square cell, px
    top: int  # px above the plot area (title band)
    x_domain: tuple[float, float]
    y_domain: tuple[float, float]
    colorbar_x: float
    x_ticks: TokenTicks
    y_ticks: TokenTicks
    colorbar_below: bool = False  # horizontal, under the key labels (a narrow figure: two side by side)
    colorbar_y: float = 0.0  # paper fraction of the horizontal bar's top


def matrix_geometry(
    row_tokens, column_tokens, look: Look, *, colorbar: bool = True, column_title_lines: int = 1
) -> MatrixGeometry:
    """Square cells as large as the figure allows once labels, axis titles and the colour bar have room.

    The colour bar goes beside the matrix or, where that leaves larger cells (a figure in a narrow column,
    where a bar's ~170 px beside the matrix cost a third of its width), under it.
    """
    if not colorbar:
        return _placed(row_tokens, column_tokens, look, column_title_lines, side_room=0, below_room=0)
    beside = _placed(row_tokens, column_tokens, look, column_title_lines, side_room=_colorbar_room(look), below_room=0)
    below = _placed(row_tokens, column_tokens, look, column_title_lines, side_room=0, below_room=_colorbar_band(look))
    return below if below.cell > beside.cell * 1.05 else beside


def _placed(row_tokens, column_tokens, look: Look, column_title_lines: int, *, side_room: int, below_room: int):
    """The geometry with ``side_room`` px kept right of the matrix and ``below_room`` px under its key labels.

    Label room depends on the cell size (narrow cells turn or thin the labels) and the cell size on the
    label room, so the two are settled by a few rounds of refinement. Without a colour bar the matrix takes
    its room too (a mask drawn beside the scores was half as wide as it could be).
    """
    n_rows, n_columns = max(len(row_tokens), 1), max(len(column_tokens), 1)
    title_room = int(look.font_size * 1.8)  # an axis title and its gap
    under_room = title_room + int(look.font_size * 1.3 * (column_title_lines - 1))  # the x title's extra lines
    plot_height = look.height - look.title_band
    cell = min(look.width / (n_columns + 4), plot_height / (n_rows + 4))
    chars = 10 if look.presentation else 12  # projector text is large: shorter labels leave room for cells
    for _ in range(4):
        x_ticks = token_ticks(column_tokens, cell, look.tick_size, horizontal_axis=True, max_chars=chars)
        y_ticks = token_ticks(row_tokens, cell, look.tick_size, horizontal_axis=False, max_chars=chars)
        room_w = look.width - y_ticks.extent - title_room - side_room - 16
        room_h = plot_height - x_ticks.extent - under_room - below_room - 8
        # Capped: a five-token sentence reads better as a compact matrix than as a wall of colour.
        cell = max(min(room_w / n_columns, room_h / n_rows, MAX_CELL_EMS * look.tick_size), 1.0)
    x_ticks = token_ticks(column_tokens, cell, look.tick_size, horizontal_axis=True, max_chars=chars)
    y_ticks = token_ticks(row_tokens, cell, look.tick_size, horizontal_axis=False, max_chars=chars)
    left = y_ticks.extent + title_room
    width, height = n_columns * cell, n_rows * cell
    offset = max((look.width - (left + width + side_room)) / 2, 0)
    x0 = (offset + left) / look.width
    x1 = min(x0 + width / look.width, 1.0)
    y0 = max(1 - height / plot_height, 0.0)
    # The horizontal bar's top (its title's, which Plotly counts in): under the key labels and the axis title.
    gap = BAR_GAP_EMS if x_ticks.angle == 0 else 0.6  # (a turned label's extent already counts its corners)
    bar_top = y0 - (x_ticks.extent + under_room + look.font_size * gap) / plot_height
    return MatrixGeometry(
        cell=cell,
        top=look.title_band,
        x_domain=(x0, x1),
        y_domain=(y0, 1.0),
        colorbar_x=min(x1 + 14 / look.width, 1.0),
        x_ticks=x_ticks,
        y_ticks=y_ticks,
        colorbar_below=below_room > 0,
        colorbar_y=bar_top,
    )


def _colorbar_room(look: Look) -> int:
    return int(14 + 14 + text_width("(this head's", look.font_size) + 10)


# Between the key axis's title and a horizontal colour bar's title, under labels written across (Plotly sets the
# axis title lower than the 1.8 em its room counts under them).
BAR_GAP_EMS = 1.6


def _colorbar_band(look: Look) -> int:
    """Px under the key labels for a horizontal bar: a gap, its one-line title, the bar and its tick labels."""
    return int(look.font_size * (BAR_GAP_EMS + 1.5) + 12 + look.tick_size * 1.6 + 8)  # the larger gap


def _colorbar(title: str, geometry: MatrixGeometry, look: Look) -> dict:
    if geometry.colorbar_below:
        return _colorbar_below(title, geometry, look)
    return {
        # The trailing break keeps the top tick label ("1") clear of the title.
        "title": {"text": title + "<br>", "side": "top", "font": {"size": look.font_size, "color": MUTED}},
        "thickness": 14,
        "outlinewidth": 0,
        "x": geometry.colorbar_x,
        "xanchor": "left",
        "y": geometry.y_domain[1],
        "yanchor": "top",
        "len": geometry.y_domain[1] - geometry.y_domain[0],
        "lenmode": "fraction",
        "tickfont": {"size": look.tick_size},
    }


def _colorbar_below(title: str, geometry: MatrixGeometry, look: Look) -> dict:
    """A horizontal bar as wide as the matrix, under it, its title on one line above the bar."""
    x0, x1 = geometry.x_domain
    one_line = title.replace("<br>", ", ", 1).replace("<br>", " ")
    return {
        "title": {"text": one_line, "side": "top", "font": {"size": look.font_size, "color": MUTED}},
        "orientation": "h",
        "thickness": 12,
        "ypad": 0,  # the band above counts every pixel (Plotly's default pads 10 px above and below)
        "outlinewidth": 0,
        "x": x0,
        "xanchor": "left",
        "len": x1 - x0,
        "lenmode": "fraction",
        "y": geometry.colorbar_y,
        "yanchor": "top",
        "tickfont": {"size": look.tick_size},
    }


def _color_max(weights: np.ndarray, color_max: float | None) -> float:
    if color_max is not None:
        return float(color_max)
    peak = np.nanmax(weights) if np.isfinite(weights).any() else 1.0
    return float(peak) if peak > 0 else 1.0


def _cell_style(cell: float, look: Look, value_format: str = ".2f", value_chars: int = 4) -> dict:
    """Thin gaps while cells are big enough to show them; printed values while they fit in a cell (a value of
    ``value_chars`` characters, about 0.6 em each, plus a margin; never taller than the cell)."""
    style = {"xgap": 1, "ygap": 1} if cell >= 6 else {}
    size = min(look.cell_text_size, cell / (0.6 * value_chars + 0.4), cell / 1.4)
    # On a projector a value is printed only where it can be as large as the ticks (16 px or more).
    if size >= (look.cell_text_size if look.presentation else MIN_CELL_TEXT):
        style["texttemplate"] = f"%{{z:{value_format}}}"
        style["textfont"] = {"size": int(size)}
    return style


def _readable(style: dict, values, zmin: float, zmax: float, colorscale) -> dict:
    """``style`` with its printed values in black or white, whichever reads better on each cell (WCAG AA's
    4.5:1 on every colour; Plotly's own choice fell to 3.6:1 on mid-blue cells). The colours travel as the
    cells' ``text``, which the template writes into the value's style."""
    if "texttemplate" not in style:
        return style
    colours = cell_text_colours(np.asarray(values, dtype=np.float64), zmin, zmax, colorscale)
    return {**style, "text": colours, "texttemplate": f'<span style="color:%{{text}}">{style["texttemplate"]}</span>'}


def _masked_cells(values: np.ndarray, rows, columns, label: str, cell: float, look: Look) -> go.Heatmap:
    """Grey cells, labelled (e.g. "−∞"), where ``values`` is NaN: what masking puts into the scores."""
    masked = np.where(np.isnan(values), 1.0, np.nan).astype(np.float32)
    style = _cell_style(cell, look)
    if "texttemplate" in style:  # a label in masked cells only (a texttemplate would print in every cell)
        style["text"] = np.where(np.isnan(values), label, "").tolist()
        style["texttemplate"] = f'<span style="color:{cell_text_colour(MASKED_GREY)}">%{{text}}</span>'
    return go.Heatmap(
        z=masked,
        x=columns,
        y=rows,
        zmin=0,
        zmax=1,
        colorscale=[[0, MASKED_GREY], [1, MASKED_GREY]],
        showscale=False,
        hovertemplate=f"<b>{label}</b> (masked)<br>query %{{y}} → key %{{x}}<extra></extra>",
        hoverongaps=False,
        **style,
    )


def scores_heatmap(
    scores: np.ndarray,
    query_tokens,
    key_tokens,
    *,
    info: FigureInfo,
    look: Look = SCREEN,
    boundaries: tuple[int, ...] = (),
) -> go.Figure:
    """Pre-softmax scores [query, key] (scale · q·k + bias), −∞ where the mask forbids attending."""
    finite = np.where(np.isfinite(scores), scores, np.nan).astype(np.float32)
    low, high = (float(np.nanmin(finite)), float(np.nanmax(finite))) if np.isfinite(finite).any() else (0.0, 1.0)
    return token_matrix(
        finite,
        query_tokens,
        key_tokens,
        info=info,
        look=look,
        zmin=low,
        zmax=high if high > low else low + 1.0,
        colorbar_title=f"score<br>darkest = {high:.3g}<br>lightest = {low:.3g}",
        hovertemplate="<b>%{z:.6g}</b><br>query %{y} → key %{x}<extra></extra>",
        boundaries=boundaries,
        value_format=".1f",
        masked_label="−∞",
    )


def mask_heatmap(allowed: np.ndarray, query_tokens, key_tokens, *, info: FigureInfo, look: Look = SCREEN) -> go.Figure:
    """The attention mask [query, key] as the chapter writes it (``torch.tril(torch.ones(n, n))`` for a causal
    model): 1 where a query may attend, 0 where it may not. The model adds 0 or −∞ to the scores accordingly."""
    ones = np.asarray(allowed, dtype=np.float32)
    return token_matrix(
        ones,
        query_tokens,
        key_tokens,
        info=info,
        look=look,
        zmin=0.0,
        zmax=1.0,
        colorscale=[[0, "#eeeeee"], [1, SEQUENTIAL[3][1]]],
        show_colorbar=False,
        # The legend, under the keys: an all-1 mask (an encoder's) would otherwise have no key to its colours.
        column_title="key (attended to)<br>1 = may attend · 0 = may not",
        value_chars=1,
        hovertemplate="<b>%{z:.0f}</b> (1 = may attend; 0 = masked: its score becomes −∞)<br>"
        "query %{y} → key %{x}<extra></extra>",
        value_format=".0f",
    )


def _axis(labels: list[str], ticks: TokenTicks, title: str, look: Look) -> dict:
    return {
        "type": "category",
        "title": {"text": title, "font": {"size": look.font_size}},
        "tickmode": "array",
        "tickvals": [labels[i] for i in ticks.positions],
        "ticktext": list(ticks.text),
        "tickangle": ticks.angle,
        "tickfont": {"size": look.tick_size},
        "showgrid": False,
        "zeroline": False,
        "automargin": False,
        "ticks": "",
    }


def _draw_boundary(figure: go.Figure, index: int, num_rows: int, num_columns: int) -> None:
    """A dashed line before token ``index`` across and down the matrix (category axes count from 0)."""
    line = {"color": "#d55e00", "width": 2, "dash": "dash"}
    if 0 < index < num_columns:
        figure.add_shape(type="line", x0=index - 0.5, x1=index - 0.5, y0=-0.5, y1=num_rows - 0.5, line=line)
    if 0 < index < num_rows:
        figure.add_shape(type="line", y0=index - 0.5, y1=index - 0.5, x0=-0.5, x1=num_columns - 0.5, line=line)
