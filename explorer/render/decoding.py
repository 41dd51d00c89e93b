"""Figures of decoding: the candidates of each step, the whole beam search tree, sequence log-probabilities.

Every function takes a ``DecodeTrace`` (or values computed from one) plus ``info`` and ``look`` and follows
the figure conventions of ``explorer.render.style``. Tokens are escaped: they are model output, and the
prompt is user text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from explorer.compute.decoding import mark_leading_space, step_logprobs, tree_at, tree_positions
from explorer.data.decoding import FINISHED, PRUNED, RETURNED, RUNNING, BeamNode, DecodeTrace
from explorer.render.layout import batched, relayout, subplots, update_axes
from explorer.render.style import (
    CATEGORICAL,
    CHAR_WIDTH,
    GRID,
    INK,
    LINE_HEIGHT,
    MUTED,
    SCREEN,
    SEQUENTIAL,
    FigureInfo,
    Look,
    abbreviate,
    cell_text_colours,
    escape,
    finish,
    in_colour,
    text_width,
)

STATUS_STYLE = {
    # status: (label, colour, marker symbol, size factor); colour-blind-safe Okabe–Ito colours, and shapes
    # that differ too, so that statuses survive greyscale printing.
    RETURNED: ("returned", CATEGORICAL[5], "star", 1.5),
    FINISHED: ("finished (in the pool)", CATEGORICAL[1], "diamond", 1.2),
    RUNNING: ("running beam", CATEGORICAL[0], "circle", 1.0),
    PRUNED: ("pruned", "#9aa0aa", "circle-open", 0.8),
}


CELL_GAP = 2  # px between two cells of the candidates grid
COLORBAR_THICKNESS = 14
MIN_CELL_CHARS = 4  # a cell with room for fewer characters ("t…") gets no label
LABEL_GAP = 3  # px kept clear at each end of a label, so that two neighbours never read as one word


def candidates_figure(trace: DecodeTrace, *, info: FigureInfo, look: Look = SCREEN, row: int = 0) -> go.Figure:
    """Each step's top candidates (columns: steps; rows: rank) coloured by probability, the chosen token
    outlined, and the entropy of each step's distribution underneath. Cell labels fit their cells
    (``cell_labels``): token and probability, else the token alone, else the token turned upright."""
    steps = trace.steps
    n = steps[0].candidate_ids.shape[1] if steps else 0
    probs = np.array([step.candidate_probs[row] for step in steps], dtype=np.float32).T  # [candidate, step]
    names = [[step.candidate_tokens[row][rank] for step in steps] for rank in range(n)]
    top = float(probs.max()) if probs.size else 1.0  # small models are unsure: a 0-1 scale would be all pale
    figure = subplots(rows=2, cols=1, row_heights=[0.78, 0.22], shared_xaxes=True, vertical_spacing=0.06)
    x = [step.step + 1 for step in steps]
    y = list(range(1, n + 1))
    cell_text = [
        [f"{escape(abbreviate(names[r][c], 10))}<br>{100 * probs[r, c]:.1f}%" for c in range(len(steps))]
        for r in range(n)
    ]
    colorbar_title = f"probability<br>darkest = {top:.2g}<br>(the highest shown)"
    width, height = cell_size(figure, look, len(steps), n, colorbar_title)
    labels = cell_labels(names, probs, width, height, look)
    colours = cell_text_colours(probs, 0, top)  # black or white, whichever reads better on each cell
    figure.add_trace(
        go.Heatmap(
            z=probs,
            x=x,
            y=y,
            zmin=0,
            zmax=top,
            colorscale=SEQUENTIAL,
            text=_coloured(labels.texts, colours) if labels.upright else None,
            texttemplate="%{text}" if labels.upright else "",
            textfont={"size": labels.size},
            customdata=cell_text,  # the whole token and its probability, on hover whatever the cell shows
            xgap=CELL_GAP,
            ygap=CELL_GAP,
            hovertemplate="step %{x}, choice %{y}<br>%{customdata}<extra></extra>",
            colorbar={
                "title": {"text": colorbar_title, "side": "top"},
                "thickness": COLORBAR_THICKNESS,
                "len": 0.75,
                "y": 1,
                "yanchor": "top",
                "tickfont": {"size": look.tick_size},
            },
        ),
        row=1,
        col=1,
    )
    chosen = [_chosen_rank(step, row) for step in steps]
    boxes = [  # a box around the token each step took
        {
            "type": "rect",
            "x0": x[i] - 0.5,
            "x1": x[i] + 0.5,
            "y0": r + 0.5,
            "y1": r + 1.5,
            "xref": "x",
            "yref": "y",
            # A forced token was not chosen: dashed, so the step reads as "taken" rather than "picked".
            "line": {"color": CATEGORICAL[5], "width": 3, **({"dash": "dash"} if steps[i].forced else {})},
        }
        for i, r in enumerate(chosen)
        if r is not None
    ]
    figure.add_trace(_click_targets(steps, x, n, row, cell_text), row=1, col=1)
    figure.add_trace(
        go.Scatter(
            x=x,
            y=[float(step.entropy[row]) for step in steps],
            mode="lines+markers",
            name="entropy",
            line={"color": INK},
            hovertemplate="step %{x}: entropy %{y:.3f} nats<extra></extra>",
            showlegend=False,
        ),
        row=2,
        col=1,
    )
    with batched(figure):
        finish(figure, info, look)
        # A click selects a candidate (a page may branch there) rather than starting a zoom.
        relayout(
            figure,
            margin={"l": _left(look), "r": CANDIDATES_RIGHT, "t": look.title_band, "b": _bottom(look)},
            shapes=boxes,
            annotations=_turned_labels(labels, colours, x) if labels.turned else [],
            clickmode="event+select",
            dragmode=False,
        )
        update_axes(
            figure,
            "y",
            autorange="reversed",
            tickfont={"size": look.tick_size},
            row=1,
            col=1,
            title={"text": "choice", "standoff": 6},  # set beside its ticks, never on them (automargin)
            automargin=True,
            tickvals=y,
            ticktext=[f"#{r}" for r in y],
            showgrid=False,
            zeroline=False,
        )
        update_axes(figure, "x", tickvals=x, showgrid=False, zeroline=False, row=1, col=1)
        update_axes(
            figure,
            "y",
            title={"text": "entropy<br>(nats)", "font": {"size": look.font_size - 2}, "standoff": 6},
            automargin=True,
            tickfont={"size": look.smaller_ticks(2)},
            gridcolor=GRID,
            row=2,
            col=1,
            rangemode="tozero",
        )
        update_axes(
            figure,
            "x",
            title={"text": "step", "standoff": 6},
            automargin=True,
            tickfont={"size": look.tick_size},
            tickvals=x,
            row=2,
            col=1,
        )
        if any(step.forced for step in steps):
            ticks = [f"{value}<br>forced" if step.forced else str(value) for value, step in zip(x, steps, strict=True)]
            update_axes(figure, "x", ticktext=ticks, row=2, col=1)
    return figure


CANDIDATES_RIGHT = 20


def _left(look: Look) -> int:
    """Room left of the grid for the entropy's ticks ("1.5") and its two-line title, turned, beside them."""
    return int(text_width("0.5", look.tick_size) + 2 * LINE_HEIGHT * look.font_size + 20)


def _bottom(look: Look) -> int:
    """Room under the steps' ticks (two lines where a step says "forced") for the "step" title."""
    return int(2 * LINE_HEIGHT * look.tick_size + LINE_HEIGHT * look.font_size + 16)


@dataclass(frozen=True)
class CellLabels:
    """What the candidates grid writes in its cells, fitted to them: ``texts`` [candidate][step] (HTML), at
    ``size`` px; ``upright`` the heatmap's own text (horizontal), ``turned`` annotations turned 90° (a narrow,
    tall cell), neither: no labels (the cells are too small for any)."""

    texts: tuple[tuple[str, ...], ...]
    size: int
    upright: bool = False
    turned: bool = False


def cell_size(figure: go.Figure, look: Look, columns: int, rows: int, colorbar_title: str) -> tuple[float, float]:
    """(width, height) in px of one cell of the grid's top panel, from the figure's own geometry: the look's size,
    the margins, the colorbar's room beside the plot (its widest title line), and the panel's domain."""
    colorbar = 10 + max(
        COLORBAR_THICKNESS + 6 + text_width("0.00", look.smaller_ticks(2)),
        max(text_width(line, look.font_size) for line in colorbar_title.split("<br>")),
    )
    plot_width = look.width - _left(look) - CANDIDATES_RIGHT - colorbar
    plot_height = look.height - look.title_band - _bottom(look)
    low, high = figure.layout.yaxis.domain or (0, 1)
    width = plot_width / max(columns, 1) - CELL_GAP
    return width, plot_height * (high - low) / max(rows, 1) - CELL_GAP


def cell_labels(names, probs: np.ndarray, width: float, height: float, look: Look) -> CellLabels:
    """The largest labels that fit a ``width`` × ``height`` px cell, from the look's cell text size down to
    three quarters of it: the token and its probability on two lines, else the token alone, else the token
    turned upright in a tall, narrow cell (tokens cut to fit, never shorter than ``MIN_CELL_CHARS``)."""
    largest = look.cell_text_size
    for size in range(largest, max(int(largest * 0.75), 9) - 1, -1):
        line = LINE_HEIGHT * size
        across = int((width - 2 * LABEL_GAP) // (CHAR_WIDTH * size))  # characters that fit across the cell
        along = int((height - 2 * LABEL_GAP) // (CHAR_WIDTH * size))  # ... and along it, turned upright
        if across >= max(MIN_CELL_CHARS, 6) and height >= 2 * line:
            return CellLabels(_texts(names, across, probs), size, upright=True)
        if across >= MIN_CELL_CHARS and height >= line:
            return CellLabels(_texts(names, across), size, upright=True)
        if along >= MIN_CELL_CHARS and width >= line:
            return CellLabels(_texts(names, along), size, turned=True)
    return CellLabels((), largest)


def _texts(names, chars: int, probs: np.ndarray | None = None) -> tuple[tuple[str, ...], ...]:
    def label(r: int, c: int) -> str:
        name, limit = names[r][c], min(chars, 10)
        # An ellipsis is an em wide, two characters of the estimate: a cut token gives up one more letter.
        token = escape(name if len(name) <= limit else abbreviate(name, limit - 1))
        return token if probs is None else f"{token}<br>{100 * probs[r, c]:.1f}%"

    return tuple(tuple(label(r, c) for c in range(len(names[r]))) for r in range(len(names)))


def _coloured(texts, colours: list[list[str]]) -> list[list[str]]:
    """Each cell's label in its own colour (``colours`` [candidate][step])."""
    return [[in_colour(text, colours[r][c]) for c, text in enumerate(row)] for r, row in enumerate(texts)]


def _turned_labels(labels: CellLabels, colours: list[list[str]], x: list[int]) -> list[dict]:
    """Each cell's token as an annotation turned 90° (Plotly cannot turn a heatmap's text), in its cell's text
    colour (``colours`` [candidate][step])."""
    return [
        {
            "x": x[c],
            "y": r + 1,
            "xref": "x",
            "yref": "y",
            "text": text,
            "textangle": -90,
            "showarrow": False,
            "font": {"size": labels.size, "color": colours[r][c]},
        }
        for r, row in enumerate(labels.texts)
        for c, text in enumerate(row)
    ]


def _click_targets(steps, x: list[int], n: int, row: int, cell_text) -> go.Scatter:
    """An invisible marker on every cell, carrying (step index, token id): clicking a candidate selects it
    (heatmap cells report no selection), so a page can branch there. It hovers as its cell does (a marker the
    hover skipped would take no clicks either)."""
    cells = [(column, rank) for column in range(len(steps)) for rank in range(n)]
    return go.Scatter(
        x=[x[column] for column, _ in cells],
        y=[rank + 1 for _, rank in cells],
        mode="markers",
        marker={"symbol": "square", "size": 30, "color": "rgba(0,0,0,0)"},
        customdata=[[column, int(steps[column].candidate_ids[row][rank])] for column, rank in cells],
        text=[cell_text[rank][column] for column, rank in cells],
        hovertemplate="step %{x}, choice %{y}<br>%{text}<extra></extra>",
        showlegend=False,
    )


def _chosen_rank(step, row: int) -> int | None:
    chosen = int(step.chosen_ids[row])
    ids = step.candidate_ids[row].tolist()
    return ids.index(chosen) if chosen in ids else None


def beam_tree_figure(
    trace: DecodeTrace, *, info: FigureInfo, look: Look = SCREEN, upto_step: int | None = None
) -> go.Figure:
    """The whole search: every candidate as a node (token), linked to the beam it extends; running, pruned,
    finished and returned candidates drawn distinctly, the returned paths highlighted, forced tokens ringed.
    Hover gives the cumulative and length-normalised scores. ``upto_step`` shows the search as it stood after
    that step."""
    positions = tree_positions(trace.tree, upto_step)
    # Statuses as they stood at the replay step: "returned" is painted only once the search has returned.
    nodes = [node for node in tree_at(trace.tree, upto_step) if node.id in positions]
    figure = go.Figure()
    figure.add_traces(
        _edge_traces(nodes, positions)
        + _node_traces(nodes, positions, trace, look)
        + _forced_traces(nodes, positions, look)
        + [_prompt_trace(trace, look)]
    )
    with batched(figure):
        finish(figure, info, look)
        _tree_axes(figure, max((node.step for node in nodes), default=0), look)
    return figure


# Edges drawn under the nodes, in this order so that returned paths lie on top: (width, colour) per status.
EDGE_STYLE = {
    PRUNED: (0.8, "#c5c9d0"),
    RUNNING: (1.5, STATUS_STYLE[RUNNING][1]),
    FINISHED: (1.5, STATUS_STYLE[FINISHED][1]),
    RETURNED: (4, STATUS_STYLE[RETURNED][1]),
}


def _edge_traces(nodes: list[BeamNode], positions: dict) -> list[go.Scatter]:
    """One line trace per status: every node linked to its parent (None breaks the line between edges)."""
    traces = []
    for status, (width, colour) in EDGE_STYLE.items():
        xs, ys = [], []
        for node in nodes:
            if node.parent is not None and node.status == status:
                (x0, y0), (x1, y1) = positions[node.parent], positions[node.id]
                xs += [x0, x1, None]
                ys += [y0, y1, None]
        line = {"color": colour, "width": width}
        traces.append(go.Scatter(x=xs, y=ys, mode="lines", line=line, hoverinfo="skip", showlegend=False))
    return traces


def _node_size(look: Look) -> float:
    return max(look.tick_size * 0.75, 8)


def _node_traces(nodes: list[BeamNode], positions: dict, trace: DecodeTrace, look: Look) -> list[go.Scatter]:
    """One marker trace per status (a legend entry each), labelled with the tokens; in a crowded tree the
    pruned nodes lose their labels, which would only cover each other."""
    crowded = len(nodes) > 160
    traces = []
    for status, (label, colour, symbol, size) in STATUS_STYLE.items():
        chosen = [node for node in nodes if node.status == status and node.parent is not None]
        if not chosen:
            continue
        traces.append(
            go.Scatter(
                x=[positions[node.id][0] for node in chosen],
                y=[positions[node.id][1] for node in chosen],
                mode="markers" if crowded and status == PRUNED else "markers+text",
                text=[escape(abbreviate(node.token, 10)) for node in chosen],
                textposition="top center",
                textfont={"size": look.cell_text_size, "color": INK if status != PRUNED else MUTED},
                marker={
                    "symbol": symbol,
                    "size": _node_size(look) * size,
                    "color": colour,
                    "line": {"width": 1, "color": colour},
                },
                name=label,
                # (hover, node id): a click on a node tells the page which node, to branch there
                customdata=[[_node_hover(node, trace), node.id] for node in chosen],
                hovertemplate="%{customdata[0]}<extra></extra>",
            )
        )
    return traces


def _forced_traces(nodes: list[BeamNode], positions: dict, look: Look) -> list[go.Scatter]:
    """A ring around each forced token (none when nothing was forced); the node's own hover says more."""
    forced = [node for node in nodes if node.forced]
    if not forced:
        return []
    return [
        go.Scatter(
            x=[positions[node.id][0] for node in forced],
            y=[positions[node.id][1] for node in forced],
            mode="markers",
            marker={"symbol": "square-open", "size": _node_size(look) * 2.2, "color": INK, "line": {"width": 2}},
            name="forced token",
            hoverinfo="skip",
        )
    ]


def _prompt_trace(trace: DecodeTrace, look: Look) -> go.Scatter:
    return go.Scatter(
        x=[-1],
        y=[0],
        mode="markers+text",
        text=["prompt"],
        textposition="middle left",
        cliponaxis=False,  # the label lies left of the first step's column, partly outside the plot area
        marker={"symbol": "square", "size": _node_size(look) * 1.2, "color": INK},
        showlegend=False,
        hovertemplate=escape(_prompt_hover(trace)) + "<extra></extra>",
    )


def _tree_axes(figure: go.Figure, last: int, look: Look) -> None:
    """Steps along x (the prompt at -1), the legend above the plot; y is only the stacking of candidates."""
    relayout(
        figure,
        margin={"l": 90, "r": 20, "t": look.title_band + 10, "b": 60},
        clickmode="event+select",  # a click on a node selects it (a page may branch there)
        legend={
            "orientation": "h",
            "y": 1.0,
            "yanchor": "bottom",
            "x": 1,
            "xanchor": "right",
            "font": {"size": look.smaller_ticks(1)},
        },
    )
    update_axes(
        figure,
        "x",
        title="step",
        tickvals=list(range(-1, last + 1)),
        ticktext=["prompt"] + [str(step + 1) for step in range(last + 1)],
        range=[-1.6, last + 0.6],
        tickfont={"size": look.tick_size},
        showgrid=True,
        gridcolor=GRID,
        zeroline=False,
    )
    update_axes(figure, "y", visible=False)


def _node_hover(node: BeamNode, trace: DecodeTrace) -> str:
    place = "forced" if node.forced else f"candidate #{node.rank + 1}"
    parts = [
        f"<b>{escape(node.token)}</b> (step {node.step + 1}, {place})",
        f"token log-prob {node.token_logprob:.3f} (p = {np.exp(node.token_logprob):.3f})",
    ]
    if node.forced:
        parts.append(_forced_hover(node, trace))
    else:
        parts.append(f"cumulative score {node.score:.3f}")
    if node.normalized_score is not None:
        # The search's length counts only the tokens it chose, not the forced ones.
        length = node.step + 1 - trace.num_forced
        parts.append(f"length-normalised {node.normalized_score:.3f} (÷ {length}^{trace.settings.length_penalty:g})")
    parts.append(STATUS_STYLE[node.status][0])
    return "<br>".join(parts)


def _forced_hover(node: BeamNode, trace: DecodeTrace) -> str:
    """What the model wanted where this token was forced: its own favourite, and the forced token's rank."""
    step = trace.steps[node.step]
    wanted, p = step.candidate_tokens[0][0], float(np.exp(step.candidate_logprobs[0, 0]))
    return f"first choice here: <b>{escape(wanted)}</b> (p = {p:.3f}); this token ranked #{node.rank + 1}"


def _prompt_hover(trace: DecodeTrace) -> str:
    text = trace.prompt if len(trace.prompt) <= 80 else trace.prompt[:79] + "…"
    return f"prompt: {text}"


def logprob_figure(
    labels: list[str], logprobs: list[float], texts: list[str], *, info: FigureInfo, look: Look = SCREEN
) -> go.Figure:
    """Sequence log-probabilities side by side (higher, nearer 0, means the model finds the text likelier)."""
    # A label longer than a third of the figure goes on two lines, so that the bars keep their room.
    shown = [_two_lines(escape(label), look.tick_size, look.width / 3) for label in labels]
    figure = go.Figure(
        go.Bar(
            x=[float(v) for v in logprobs],
            y=shown,
            orientation="h",
            marker={"color": [CATEGORICAL[i % len(CATEGORICAL)] for i in range(len(labels))]},
            text=[f"{v:.2f}" for v in logprobs],
            textposition="outside",
            customdata=[escape(t if len(t) <= 120 else t[:119] + "…") for t in texts],
            hovertemplate="%{y}: log p = %{x:.3f}<br>%{customdata}<extra></extra>",
        )
    )
    with batched(figure):
        finish(figure, info, look)
        low = min(min(logprobs, default=0.0), 0.0)
        # The axis reaches far enough past the longest bar for its number, written beside it.
        labels_room = max(
            (text_width(line, look.tick_size) for label in shown for line in label.split("<br>")), default=0
        )
        plot = max(look.width - labels_room - 70, 100)
        number = text_width(f"{low:.2f}", look.tick_size) + 8
        # On two lines where one would pass the figure's edge (a narrow figure with projector-sized text).
        title = "log-probability of the continuation (sum over its tokens)"
        lines = 1 if text_width(title, look.font_size) <= plot else 2
        title = title if lines == 1 else title.replace(" (", "<br>(")
        bottom = 60 + int(look.font_size * 1.3) * (lines - 1)
        relayout(figure, margin={"l": 20, "r": 40, "t": look.title_band, "b": bottom}, bargap=0.35)
        update_axes(
            figure,
            "x",
            title=title,
            range=[min(low * 1.15, low / max(1 - number / plot, 0.5)), 0],
            tickfont={"size": look.tick_size},
            gridcolor=GRID,
            zeroline=True,
        )
        # The margin grows to the longest label as drawn ("beam search, 3 beams, no repeated 2-grams").
        update_axes(figure, "y", tickfont={"size": look.tick_size}, autorange="reversed", automargin=True)
    return figure


def _two_lines(label: str, size: int, room: float) -> str:
    """``label`` broken after the comma nearest its middle when it is wider than ``room`` pixels."""
    cuts = [i for i, c in enumerate(label) if c == "," and i + 1 < len(label) and label[i + 1] == " "]
    if text_width(label, size) <= room or not cuts:
        return label
    cut = min(cuts, key=lambda i: abs(i - len(label) / 2))
    return f"{label[: cut + 1]}<br>{label[cut + 2 :]}"


# -- the chain rule, and why logs -----------------------------------------------------------------------------


def _token_ticks(trace: DecodeTrace, count: int) -> list[str]:
    return [
        f"{i + 1}<br>{escape(abbreviate(mark_leading_space(token), 8))}"
        for i, token in enumerate(trace.generated_tokens[0][:count])
    ]


def chain_rule_figure(trace: DecodeTrace, *, info: FigureInfo, look: Look = SCREEN) -> go.Figure:
    """Each generated token's log-probability given the tokens before it (bars) and their running sum (line):
    the last point is the continuation's log-probability, log p(text) = Σ log p(token | tokens before)."""
    logprobs = step_logprobs(trace)
    x = list(range(1, len(logprobs) + 1))
    room = (look.width - 90) / max(len(x), 1)  # px per step
    numbers = [f"{value:.2f}" for value in logprobs]
    written = max((text_width(n, look.cell_text_size) for n in numbers), default=0) <= room * 0.9
    figure = go.Figure(
        [
            go.Bar(
                x=x,
                y=logprobs,
                name="log p(token | tokens before)",
                marker={"color": CATEGORICAL[4]},
                text=numbers if written else None,
                # Inside a bar where it fits, past its end where the bar is short (log p near 0), never shrunk to
                # fit: printed at the look's size (9 pt or more on paper)
                textposition="auto",
                constraintext="none",
                textfont={"size": look.cell_text_size, "color": INK},
                hovertemplate="token %{x}: log p = %{y:.3f}<extra></extra>",
            ),
            go.Scatter(
                x=x,
                y=np.cumsum(logprobs),
                name="running sum = log p(text so far)",
                mode="lines+markers",
                line={"color": CATEGORICAL[5], "width": 3},
                marker={"size": 9},
                hovertemplate="tokens 1 to %{x}: sum %{y:.3f}<extra></extra>",
            ),
        ]
    )
    with batched(figure):
        finish(figure, info, look)
        relayout(
            figure,
            margin={
                "l": int(text_width("−20", look.tick_size) + LINE_HEIGHT * look.font_size + 24),
                "r": 20,
                "t": look.title_band + int(look.font_size * 1.6),
                "b": int(50 + look.tick_size * 2),
            },
            legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom", "font": {"size": look.font_size}},
            bargap=0.3,
        )
        update_axes(
            figure,
            "x",
            tickvals=x,
            ticktext=_token_ticks(trace, len(x)),
            tickangle=0
            if max((text_width(t, look.tick_size) for t in _token_ticks(trace, len(x))), default=0) / 2 <= room
            else -90,
            tickfont={"size": look.tick_size},
            title="generated token",
            showgrid=False,
        )
        update_axes(
            figure,
            "y",
            title={"text": "log-probability (natural log)", "standoff": 8},
            automargin=True,  # the title beside the ticks, never on them
            tickfont={"size": look.tick_size},
            gridcolor=GRID,
            zeroline=True,
            zerolinecolor=MUTED,
        )
    return figure


def products_figure(trace: DecodeTrace, *, info: FigureInfo, look: Look = SCREEN) -> go.Figure:
    """The same tokens two ways, step by step: the product of their probabilities (left, falling towards 0) and
    the sum of their log-probabilities (right, a plain number at every step)."""
    logprobs = step_logprobs(trace)
    x = list(range(1, len(logprobs) + 1))
    figure = subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=("product of probabilities", "sum of log-probabilities"),
    )
    product, total = np.exp(np.cumsum(logprobs)), np.cumsum(logprobs)
    pitch = (look.width - 120) * 0.44 / (len(x) + 0.4)  # px between two steps in one panel
    for col, values, colour, what in ((1, product, CATEGORICAL[0], "product"), (2, total, CATEGORICAL[5], "sum")):
        numbers = (
            [f"{v:.2g}" if v >= 0.01 else f"{v:.0e}" for v in values] if col == 1 else [f"{v:.1f}" for v in values]
        )
        # Every label where they fit side by side, else every second or third: never one over another.
        every = max(1, math.ceil((max(text_width(n, look.cell_text_size) for n in numbers) + 6) / pitch))
        figure.add_trace(
            go.Scatter(
                x=x,
                y=values,
                mode="lines+markers+text",
                line={"color": colour, "width": 3},
                marker={"size": 9},
                text=[n if i % every == 0 else "" for i, n in enumerate(numbers)],
                textposition="top center",
                textfont={"size": look.cell_text_size},
                showlegend=False,
                hovertemplate=f"tokens 1 to %{{x}}: {what} %{{y:.4g}}<extra></extra>",
            ),
            row=1,
            col=col,
        )
    with batched(figure):
        finish(figure, info, look)
        relayout(figure, margin={"l": 80, "r": 40, "t": look.title_band + look.font_size * 2, "b": 70})
        for col in (1, 2):
            update_axes(
                figure,
                "x",
                title="tokens generated",
                tickvals=x,
                tickfont={"size": look.tick_size},
                showgrid=False,
                range=[0.5, len(x) + 0.9],
                row=1,
                col=col,
            )
        update_axes(figure, "y", range=[0, 1.08], tickfont={"size": look.tick_size}, gridcolor=GRID, row=1, col=1)
        low = float(min(total.min(), 0.0)) if len(total) else -1.0
        update_axes(figure, "y", range=[low * 1.12, 0], tickfont={"size": look.tick_size}, gridcolor=GRID, row=1, col=2)
    return figure
