"""Figures of the next-token distribution: the chapter's two panels, temperature side by side, the pipeline.

- ``distribution_panels`` (Altair, two linked panels): how many tokens have each probability (a histogram
  on a log axis) and the cumulative probability of the tokens sorted from most to least likely, with the
  top-k cut and the top-p line. Dragging across the histogram selects a probability band and highlights
  those tokens on the curve: one selection shared by both panels.
- ``temperature_figure`` (Plotly): the most likely tokens at several temperatures, as in the chapter's
  T = 0.5 / 1 / 2 comparison, on the same scale.
- ``stages_figure`` (Plotly): the most likely tokens at every stage of the sampling pipeline.

Only what is drawn is sent: the histogram is binned here, and the curve keeps every one of the first
ranks then log-spaced ranks of the tail (a 50,000-token vocabulary becomes a few hundred points).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import altair as alt
import numpy as np

from explorer.compute.sampling import softmax
from explorer.data.decoding import TokenDistribution
from explorer.labels import visible
from explorer.render.layout import Draft, PlotlySpec, annotation_font, relayout, subplots_draft, update_axes
from explorer.render.style import (
    CATEGORICAL,
    FONT,
    GRID,
    INK,
    SCREEN,
    SEQUENTIAL,
    FigureInfo,
    Look,
    abbreviate,
    altair_look,
    altair_title,
    escape,
    finish,
    text_width,
)
from explorer.render.vega import VegaLite, filled

BLUE, ORANGE, GREEN = CATEGORICAL[0], CATEGORICAL[1], CATEGORICAL[2]
DENSE_RANKS = 200  # every rank up to this is drawn on the cumulative curve; beyond, log-spaced samples
MIN_PLOT_HEIGHT = 200  # px of bars, at least, under the pipeline chart's legend


def histogram_rows(probabilities: np.ndarray, kept: np.ndarray | None = None, bins: int = 40) -> list[dict]:
    """Tokens per probability band, the bands equal on a log scale, split into tokens the sampler may still
    draw (``kept``) and tokens the pipeline removed (zero-probability tokens left out)."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    kept = np.ones(probabilities.shape, dtype=bool) if kept is None else kept
    positive = probabilities > 0
    if not positive.any():
        return []
    low = max(np.log10(probabilities[positive].min()), -12.0)
    edges = np.linspace(low, 0.0, bins + 1)
    logs = np.clip(np.log10(np.where(positive, probabilities, 1.0)), low, 0.0)
    rows = []
    for label, selected in (("kept", positive & kept), ("removed", positive & ~kept)):
        counts, _ = np.histogram(logs[selected], bins=edges)
        rows += [
            {
                "log_low": float(a),
                "log_high": float(b),
                "tokens": int(c),
                "p_low": 10**a,
                "p_high": 10**b,
                "tokens_are": label,
            }
            for a, b, c in zip(edges[:-1], edges[1:], counts, strict=True)
            if c > 0
        ]
    return rows


def curve_rows(probabilities: np.ndarray, tokens: tuple[str, ...]) -> list[dict]:
    """The cumulative curve of sorted probabilities: dense at the top ranks, log-spaced in the tail."""
    order = np.argsort(-probabilities, kind="stable")
    cumulative = np.cumsum(probabilities[order].astype(np.float64))
    count = int((probabilities > 0).sum())
    dense = np.arange(min(DENSE_RANKS, count))
    tail = np.unique(np.geomspace(DENSE_RANKS, max(count, DENSE_RANKS + 1), 200).astype(int) - 1)
    ranks = np.unique(np.concatenate([dense, tail[tail < count]]))
    picked = order[ranks]
    chosen = np.asarray(probabilities)[picked]
    # Whole columns at once: this runs at every slider move of every student (issue 13).
    columns = zip(
        (ranks + 1).tolist(),
        cumulative[ranks].tolist(),
        chosen.tolist(),
        # Named like the histogram's field, so the band selected there tests this point's probability.
        np.log10(np.maximum(chosen.astype(np.float64), 1e-30)).tolist(),
        [visible(tokens[i]) for i in picked.tolist()] if tokens else [str(i) for i in picked.tolist()],
        strict=True,
    )
    return [
        {"rank": rank, "cumulative": total, "p": p, "log_low": log_low, "token": token}
        for rank, total, p, log_low, token in columns
    ]


def distribution_panels(
    distribution: TokenDistribution,
    *,
    info: FigureInfo,
    look: Look = SCREEN,
    band: tuple[float, float] | None = None,
) -> VegaLite:
    """The chapter's two panels, linked, for the distribution after temperature (the one the cuts act on):
    the histogram splits tokens still possible from tokens top-k/top-p/min-p removed; the cumulative curve
    shows the top-k rank and the top-p level. ``band`` (log₁₀ probabilities, low to high): the band selected
    as the figure opens, as a drag across the histogram selects it (the keyboard's way to select one).

    The chart's structure is built with Altair once per look (``_panels_template``); a call only computes the
    rows it draws (a slider move: a few milliseconds instead of a tenth of a second)."""
    scaled = distribution.stage("temperature")
    kept = distribution.kept[distribution.stages[-1][0]]
    top_k = [{"k": distribution.top_k, "label": f" top-k = {distribution.top_k}", "y": 0.04}]
    top_p = [_top_p_label(scaled, distribution.top_p, look)]
    datasets = {
        "histogram": histogram_rows(scaled, kept),
        "curve": curve_rows(scaled, distribution.tokens),
        "top_k": top_k if distribution.top_k else [],
        "top_p": top_p if distribution.top_p < 1.0 else [],
    }
    # The template depends on the text sizes only: every window size (each student's browser reports its own)
    # shares it, and only the panels' sizes are set here (building one took 80 ms of the one core a class has).
    template = _panels_template(dataclasses.replace(look, width=0, height=0), tuple(_powers_of_ten(len(scaled))))
    chart = filled(template, datasets, **altair_title(info, look))
    width, height = _panel_size(look)
    for panel in chart.spec["hconcat"]:
        panel.update(width=width, height=height)
    if band is not None:
        for param in chart.spec.get("params", []):
            if param["name"] == "band":
                param["value"] = {"x": [float(band[0]), float(band[1])]}
    return chart


def _top_p_label(probabilities: np.ndarray, top_p: float, look: Look) -> dict:
    """The top-p line's label, where the cumulative curve cannot cross it: above the line at the left, unless the
    curve already reaches p under the label (a sharp distribution); then below the line at the right, where the
    curve has passed p. ``place`` names the side, ``x`` the rank the label is anchored to."""
    label = f"top-p = {top_p:g}"
    cumulative = np.cumsum(np.sort(probabilities[probabilities > 0])[::-1])
    count = max(len(cumulative), 2)
    reached = int(np.searchsorted(cumulative, top_p)) + 1  # the rank at which the curve reaches p
    decades = math.ceil(math.log10(count))  # the log axis runs from 1 to this power of ten
    reached_at = math.log10(reached) / decades  # where along the axis, 0 to 1
    label_ends_at = (text_width(label, look.tick_size) + 8) / _panel_size(look)[0]
    above = reached_at > label_ends_at + 0.02
    return {"p": top_p, "label": label, "x": 1 if above else count, "place": "above" if above else "below"}


def _panel_size(look: Look) -> tuple[int, int]:
    # Under the figure's title: each panel's title, the legend's title and row, the ticks and the axis title, all
    # growing with the text (at 1920×1080 a fixed 120 px left the chart 4 px taller than its window).
    around = 120 + 3 * max(look.font_size - 14, 0)
    return max(int((look.width - 2 * 100 - 40) / 2), 200), max(look.height - look.title_band - around, 160)


@functools.lru_cache(maxsize=32)
def _panels_template(look: Look, count_ticks: tuple[int, ...]) -> dict:
    """The two panels' spec at ``look``'s text sizes, their data named (``histogram``, ``curve``, ``top_k``,
    ``top_p``); ``distribution_panels`` sets their width and height."""
    band = alt.selection_interval(encodings=["x"], name="band")
    width, height = _panel_size(look)
    panel_title = {"fontSize": look.font_size, "color": INK, "anchor": "start", "font": FONT}
    histogram = (
        alt.Chart(alt.NamedData("histogram"))
        .mark_bar(binSpacing=1)
        .encode(
            # Whole powers of ten, and Vega drops a label that would touch its neighbour: at projector sizes the
            # half steps ran together ("−8.0−7.5−7.0").
            x=alt.X(
                "log_low:Q",
                bin="binned",
                title="probability (log₁₀)",
                axis=alt.Axis(tickMinStep=1, format="d", labelOverlap=True),
            ),
            x2="log_high:Q",
            # symlog: counts from 1 to tens of thousands stay readable, and stacking from 0 still works.
            y=alt.Y(
                "sum(tokens):Q",
                title="number of tokens",
                scale=alt.Scale(type="symlog"),
                axis=alt.Axis(values=list(count_ticks), format="~s"),
            ),
            color=alt.Color(
                "tokens_are:N",
                scale=alt.Scale(domain=["kept", "removed"], range=[BLUE, "#b9bec7"]),
                # Above the plot, in a row: inside it, the legend covered the tallest bars.
                legend=alt.Legend(title="tokens", orient="top", direction="horizontal"),
            ),
            opacity=alt.condition(band, alt.value(1.0), alt.value(0.45)),
            tooltip=[
                alt.Tooltip("tokens_are:N", title="tokens"),
                alt.Tooltip("tokens:Q", title="how many"),
                alt.Tooltip("p_low:Q", title="p from", format=".2e"),
                alt.Tooltip("p_high:Q", title="p to", format=".2e"),
            ],
        )
        .add_params(band)
        .properties(
            width=width, height=height, title=alt.TitleParams("How many tokens have each probability", **panel_title)
        )
    )
    base = alt.Chart(alt.NamedData("curve")).encode(
        x=alt.X(
            "rank:Q",
            scale=alt.Scale(type="log"),
            title="tokens, most likely first (rank, log scale)",
            # Powers of ten only: Vega's own log ticks (1, 2, 10, 20, 100, 200...) ran together ("100200").
            axis=alt.Axis(values=list(count_ticks), format=",", labelOverlap=True),
        ),
        y=alt.Y("cumulative:Q", title="cumulative probability", scale=alt.Scale(domain=[0, 1])),
    )
    curve = base.mark_line(color=INK, strokeWidth=2)
    points = base.mark_circle(size=40, color=ORANGE).encode(
        tooltip=[
            alt.Tooltip("rank:Q"),
            alt.Tooltip("token:N"),
            alt.Tooltip("p:Q", title="probability", format=".4f"),
            alt.Tooltip("cumulative:Q", format=".4f"),
        ],
        opacity=alt.condition(band, alt.value(1.0), alt.value(0.0), empty=False),
    )
    cumulative = alt.layer(curve, points, *_cut_marks(look)).properties(
        width=width,
        height=height,
        title=alt.TitleParams("Cumulative probability of the most likely tokens", **panel_title),
    )
    chart = alt.hconcat(histogram, cumulative, spacing=40).resolve_scale(color="independent")
    return altair_look(chart, look).to_dict(validate=False)


def _powers_of_ten(limit: int) -> list[int]:
    return [10**i for i in range(int(np.log10(max(limit, 1))) + 1)]


def _cut_marks(look: Look) -> list:
    """The top-k rank (a vertical rule) and the top-p level (a horizontal rule), labelled at the ticks' size; each
    draws nothing when its dataset is empty (the cut is off). The top-p label sits where ``_top_p_label`` put it."""
    k_rule = alt.Chart(alt.NamedData("top_k")).encode(x="k:Q")
    p_rule = alt.Chart(alt.NamedData("top_p")).encode(y="p:Q")
    text = {"color": CATEGORICAL[5], "fontWeight": "bold", "fontSize": look.tick_size}
    # The rules are hidden from screen readers (aria=False): their labels say what they mark ("top-k = 50"), and a
    # cut that is off left an empty, unnamed rule mark (axe-core's svg-img-alt).
    return [
        k_rule.mark_rule(color=GREEN, strokeWidth=2, strokeDash=[6, 3], aria=False),
        k_rule.mark_text(align="left", color=GREEN, fontWeight="bold", fontSize=look.tick_size).encode(
            y="y:Q", text="label:N"
        ),
        p_rule.mark_rule(color=CATEGORICAL[5], strokeWidth=2, strokeDash=[6, 3], aria=False),
        p_rule.transform_filter("datum.place == 'above'")
        .mark_text(align="left", baseline="bottom", dy=-4, **text)
        .encode(x="x:Q", text="label:N"),
        p_rule.transform_filter("datum.place == 'below'")
        .mark_text(align="right", baseline="top", dy=4, **text)
        .encode(x="x:Q", text="label:N"),
    ]


def temperature_figure(
    logits: np.ndarray,
    tokens: tuple[str, ...],
    *,
    temperatures=(0.5, 1.0, 2.0),
    current: float | None = None,
    count: int = 15,
    info: FigureInfo,
    look: Look = SCREEN,
) -> PlotlySpec:
    """The ``count`` most likely tokens (at T = 1) and their probabilities at each temperature, same scale."""
    shown = sorted({*temperatures, *([current] if current else [])})
    order = np.argsort(-logits, kind="stable")[:count]
    labels = [escape(abbreviate(tokens[i], 12)) if tokens else str(i) for i in order]
    draft = subplots_draft(
        rows=1,
        cols=len(shown),
        shared_yaxes=True,
        horizontal_spacing=0.03,
        subplot_titles=[f"T = {t:g}{' (yours)' if t == current else ''}" for t in shown],
    )
    tallest = max(float(softmax(logits / np.float32(t))[order].max()) for t in shown)
    for column, temperature in enumerate(shown, start=1):
        probabilities = softmax(logits / np.float32(temperature))[order]
        draft.add(
            {
                "type": "bar",
                "x": probabilities,
                "y": labels,
                "orientation": "h",
                "marker": {"color": ORANGE if temperature == current else BLUE},
                "hovertemplate": "%{y}: %{x:.4f}<extra>T = " + f"{temperature:g}" + "</extra>",
            },
            col=column,
        )
    finish(draft, info, look)
    relayout(draft, showlegend=False, margin={"l": 110, "r": 20, "t": look.title_band + 20, "b": 60})
    # Categories: token labels such as "1" or "2021" would otherwise put the bars on a number line.
    update_axes(draft, "y", type="category", autorange="reversed", tickfont={"size": look.smaller_ticks(1)})
    # One scale for every panel, to the tallest bar: the temperatures compare at a glance.
    update_axes(
        draft,
        "x",
        range=[0, min(1.0, tallest * 1.1)],
        tickformat=".0%",
        gridcolor=GRID,
        tickfont={"size": look.smaller_ticks(2)},
    )
    annotation_font(draft, {"size": look.font_size, "color": INK})
    return draft.spec()


def stages_figure(
    distribution: TokenDistribution, *, count: int = 12, info: FigureInfo, look: Look = SCREEN
) -> PlotlySpec:
    """The most likely tokens (raw) and their probability after each stage; removed tokens drop to 0."""
    raw = distribution.stages[0][1]
    order = np.argsort(-raw, kind="stable")[:count]
    labels = [escape(abbreviate(distribution.tokens[i], 12)) if distribution.tokens else str(i) for i in order]
    draft = Draft()
    colours = [SEQUENTIAL[i][1] for i in (3, 4, 5, 7, 8)]
    for (name, probabilities), colour in zip(distribution.stages, colours, strict=False):
        removed = distribution.removed_mass[name]
        draft.add(
            {
                "type": "bar",
                "x": labels,
                "y": probabilities[order],
                "name": f"{name} (removed {100 * removed:.1f}%)",
                "marker": {"color": colour},
                "hovertemplate": "%{x}: %{y:.4f}<extra>" + name + "</extra>",
            }
        )
    finish(draft, info, look)
    legend = _legend_rows([entry["name"] for entry in draft.data], look.smaller_ticks(2), look.width - 90)
    top, bottom = look.title_band + legend["height"] + 10, 90
    height = max(look.height, top + bottom + MIN_PLOT_HEIGHT)
    relayout(
        draft,
        barmode="group",
        bargap=0.25,
        # Room above the plot for every row of the legend, under the subtitle (one row was reserved, and a
        # legend that wrapped to two covered the subtitle); a narrow figure grows to keep its bars readable.
        height=height,
        margin={"l": 70, "r": 20, "t": top, "b": bottom},
        legend={
            "orientation": "h",
            # Its top in pixels, just under the subtitle: placed above the plot by a share of the plot's height
            # instead, it rose into the subtitle on a tall page (a PDF's).
            "y": 1 - look.title_band / height,
            "yref": "container",
            "yanchor": "top",
            "x": 0,
            "font": {"size": look.smaller_ticks(2)},
            "entrywidth": legend["entry"],
            "entrywidthmode": "pixels",
        },
    )
    update_axes(
        draft,
        "y",
        title={"text": "probability"},
        gridcolor=GRID,
        tickfont={"size": look.smaller_ticks(1)},
        automargin=True,  # the title clear of the ticks at every text size ("0.06" ran into it on a slide)
    )
    update_axes(
        draft, "x", type="category", tickangle=-45 if count > 8 else 0, tickfont={"size": look.smaller_ticks(1)}
    )
    return draft.spec()


def _legend_rows(names: list[str], size: int, room: float) -> dict:
    """A horizontal legend laid out on a grid whose columns fit its longest entry: the text width to give Plotly
    (``entry`` px; it adds the marker, 40 px) and how tall its rows make it (``height`` px) in ``room`` px."""
    # text_width is generous: Chromium draws these entries at 0.56 em a character, not the 0.46 once assumed.
    entry = int(max(text_width(name, size) for name in names) + 8)
    per_row = max(int(room // (entry + 40)), 1)
    rows = math.ceil(len(names) / per_row)
    return {"entry": entry, "height": int(rows * size * 1.8 + 6)}


def stages_rows(distribution: TokenDistribution) -> list[dict]:
    """One row per stage: tokens still possible, mass removed, the most likely token and its probability."""
    rows = []
    for name, probabilities in distribution.stages:
        top = int(np.argmax(probabilities))
        rows.append(
            {
                "stage": name,
                "tokens kept": int(distribution.kept[name].sum()),
                "mass removed": float(distribution.removed_mass[name]),
                "most likely": visible(distribution.tokens[top]) if distribution.tokens else str(top),
                "its probability": float(probabilities[top]),
            }
        )
    return rows
