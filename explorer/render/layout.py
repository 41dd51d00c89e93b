"""Layout changes to a Plotly figure without Plotly's update machinery: the same result, a tenth of the time.

``figure.update_layout``, ``update_xaxes`` and ``update_yaxes`` go through Plotly's relayout path (property
paths parsed one key at a time, change messages for widgets that a server never has): about 9 ms for the house
title and fonts alone, where building the same layout from a dict takes 0.6 ms. Under a class every figure of
every run paid it, on the one core the GIL allows: it was the largest single cost of the decoding pages (issue
13). These helpers merge the changes into the layout's plain dict and assign it once; Plotly still validates
every value when the layout is assigned, so a wrong property fails exactly as before.

Semantics follow Plotly's: nested dicts merge, anything else (numbers, strings, lists) replaces. Keys are
property names (``paper_bgcolor``, ``tickfont``), never Plotly's underscore paths (``xaxis_title_text``).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass

import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots


def subplots(**grid) -> go.Figure:
    """``plotly.subplots.make_subplots(**grid)``, fast: its grid is laid out by Plotly itself, then assigned
    as one layout instead of through ``update_layout`` (which was four fifths of its 9 ms)."""
    catcher = _LayoutCatcher()
    make_subplots(figure=catcher, **grid)
    figure = go.Figure(layout=catcher.layout)
    # What make_subplots attaches to its figure, so that add_trace(row=..., col=...) finds the grid.
    figure.__dict__["_grid_ref"] = catcher.__dict__["_grid_ref"]
    figure.__dict__["_grid_str"] = catcher.__dict__["_grid_str"]
    return figure


class Draft:
    """A figure built as plain dicts and validated once, by ``figure()``, or never, by ``spec()`` (what the page
    sends; see ``PlotlySpec``): traces are added as dicts and
    ``relayout``, ``update_axes`` (without ``row``/``col``), ``annotation_font`` and ``style.finish`` change its
    layout as they would a figure's inside ``batched``. A figure whose every trace and layout change would
    otherwise be validated one at a time (each ``add_trace`` about a millisecond) is built in a third of the time:
    the sampling page's figures, rebuilt at every slider move of every student (issue 13)."""

    def __init__(self, layout: dict | None = None, axes: list | None = None):
        self._pending_layout = layout if layout is not None else {}
        self.data: list[dict] = []
        self._axes = axes  # per subplot column (a one-row grid): the trace's axis references

    def add(self, trace: dict, *, col: int | None = None) -> None:
        """A trace dict (``type`` first, as Plotly writes it), placed in subplot column ``col`` of the grid."""
        self.data.append({**trace, **(self._axes[col - 1] if col is not None else {})})

    def figure(self) -> go.Figure:
        return go.Figure({"data": self.data, "layout": self._pending_layout})

    def spec(self) -> PlotlySpec:
        """The finished figure as plain dicts, not validated (see ``PlotlySpec``)."""
        return PlotlySpec({"data": self.data, "layout": self._pending_layout})


@dataclass(frozen=True, eq=False)
class PlotlySpec:
    """A finished Plotly figure as the plain dicts plotly.js reads (``data`` and ``layout``), what a ``Draft``
    builder returns. The page sends ``sent()`` as it is: validating it into a ``go.Figure`` took more of a
    sampling-page slider move than anything else (about 2 ms a figure, then a deep copy in ``to_dict``), for
    every student of a class at every move (issue 13). ``figure()`` validates it, for exports, notebooks and the
    tests, which check for every builder that the two send plotly.js the same figure."""

    spec: dict

    def figure(self) -> go.Figure:
        return go.Figure(self.spec)

    def sent(self) -> dict:
        """The spec with a named template resolved, as Plotly's validation resolves it."""
        layout = self.spec.get("layout", {})
        template = layout.get("template")
        if isinstance(template, str):
            layout = {**layout, "template": _template(template)}
        return {**self.spec, "layout": layout}

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self.figure()._repr_mimebundle_(include, exclude)


@functools.lru_cache(maxsize=8)
def _template(name: str) -> dict:
    # Read, never changed: every figure sent with this template shares it.
    return pio.templates[name].to_plotly_json()


def subplots_draft(**grid) -> Draft:
    """``subplots(**grid)`` as a ``Draft`` (one row of columns): the grid laid out by Plotly itself, once per
    grid (titles are filled in afterwards: their places do not depend on their text)."""
    titles = list(grid.pop("subplot_titles", None) or [])
    layout, axes = _grid_layout(json.dumps(grid, sort_keys=True), len(titles))
    layout = copy.deepcopy(layout)
    placed = layout.get("annotations", [])
    # Plotly adds one annotation per non-empty title, in order: as it would for these titles.
    named = [dict(note, text=title) for note, title in zip(placed, titles, strict=False) if title]
    if placed:
        layout["annotations"] = named + placed[len(titles) :]
    return Draft(layout, [dict(refs) for refs in axes])


@functools.lru_cache(maxsize=64)
def _grid_layout(grid_json: str, titles: int) -> tuple[dict, tuple]:
    catcher = _LayoutCatcher()
    placeholders = [f"title {i}" for i in range(titles)] or None
    make_subplots(figure=catcher, subplot_titles=placeholders, **json.loads(grid_json))
    axes = tuple(dict(column[0].trace_kwargs) for column in catcher.__dict__["_grid_ref"][0])
    return catcher.layout.to_plotly_json(), axes


class _LayoutCatcher:
    """Stands in for the figure make_subplots fills: keeps the layout it is given."""

    def update_layout(self, layout) -> None:
        self.layout = layout


@contextmanager
def batched(figure):
    """Inside the block, ``relayout`` and ``update_axes`` change one plain copy of the layout, assigned (and
    validated) once when the block ends: a figure with many subplots re-validates its large layout only once.
    Nothing else may touch the figure's layout inside the block (``add_shape``, ``add_annotation``)."""
    figure._pending_layout = figure.layout.to_plotly_json()
    try:
        yield figure
    finally:
        layout, figure._pending_layout = figure._pending_layout, None
        figure.layout = layout


def relayout(figure, updates: dict | None = None, **more):
    """``figure.update_layout(updates, **more)``, fast; returns the figure."""
    layout = _editable(figure)
    merge(layout, {**(updates or {}), **more})
    _commit(figure, layout)
    return figure


def update_axes(
    figure, axis: str, updates: dict | None = None, *, row: int | None = None, col: int | None = None, **more
):
    """``figure.update_xaxes``/``update_yaxes`` (``axis`` "x" or "y"), fast: every axis of that kind, or those of
    the subplot at ``row``/``col`` (figures from ``make_subplots``); returns the figure."""
    changes = {**(updates or {}), **more}
    layout = _editable(figure)
    for name in _axis_names(figure, layout, axis, row, col):
        merge(layout.setdefault(name, {}), changes)
    _commit(figure, layout)
    return figure


def annotation_font(figure, font: dict):
    """Every annotation's font set to ``font`` (subplot titles, for one), as ``annotation.font = font`` would."""
    layout = _editable(figure)
    for annotation in layout.get("annotations", []):
        annotation["font"] = dict(font)
    _commit(figure, layout)
    return figure


def labels_clear(figure, gap: int = 8, smallest: int | None = None):
    """Every axis's margin grown where its tick labels or title need more room than the figure gave them, so
    that a title clears its axis's tick labels by ``gap`` pixels and no label is cut at the figure's edge
    (Plotly's ``automargin``; a title placed without a ``standoff`` is squeezed into the margin, over the tick
    labels). A figure whose labels fit keeps its layout. A vertical colour bar with its title on top (and no
    trailing line break keeping them apart, as ``explorer.render.heatmap``'s) writes each tick label under its
    tick: the top one clear of the title. ``smallest``: no text set smaller than that many pixels (subplot
    titles, tick labels, legends, numbers on marks). Returns the figure."""
    layout = _editable(figure)
    names = [key for key in layout if re.fullmatch(r"[xy]axis\d*", key)] or ["xaxis", "yaxis"]
    for name in names:
        axis = layout.setdefault(name, {})
        axis["automargin"] = True
        if isinstance(axis.get("title"), dict) and axis["title"].get("text"):
            axis["title"].setdefault("standoff", gap)
        _at_least(axis.get("tickfont"), smallest)
    for annotation in layout.get("annotations", []):
        _at_least(annotation.get("font"), smallest)
    _at_least(layout.get("legend", {}).get("font"), smallest)
    _commit(figure, layout)
    for trace in figure.data:
        if smallest and "textfont" in trace and (trace.textfont.size or smallest) < smallest:
            trace.textfont.size = smallest
        bar = getattr(trace, "colorbar", None) if "colorbar" in trace else None
        if bar is None:
            continue
        if smallest and (bar.tickfont.size or smallest) < smallest:
            bar.tickfont.size = smallest
        title = bar.title.text
        if title and bar.orientation != "h" and bar.title.side in (None, "top") and not title.endswith("<br>"):
            bar.ticklabelposition = "outside bottom"  # the top label under its tick, not half over the title
    return figure


def _at_least(font: dict | None, smallest: int | None) -> None:
    if font and smallest and font.get("size", smallest) < smallest:
        font["size"] = smallest


def merge(target: dict, changes: dict) -> dict:
    """``changes`` merged into ``target`` in place, nested dicts recursively (Plotly's update rule)."""
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = _plain(value)
    return target


def _editable(figure) -> dict:
    # The pending layout inside ``batched``, else a copy of the figure's.
    pending = getattr(figure, "_pending_layout", None)
    return pending if pending is not None else figure.layout.to_plotly_json()


def _commit(figure, layout: dict) -> None:
    if getattr(figure, "_pending_layout", None) is None:
        figure.layout = layout


def _plain(value):
    # A Plotly object (a font, an axis) as its dict, so the layout stays one plain tree until it is assigned.
    return value.to_plotly_json() if hasattr(value, "to_plotly_json") else value


def _axis_names(figure, layout: dict, axis: str, row: int | None, col: int | None) -> list[str]:
    if row is not None or col is not None:
        select = figure.select_xaxes if axis == "x" else figure.select_yaxes
        return [found.plotly_name for found in select(row=row, col=col)]
    pattern = re.compile(rf"{axis}axis\d*")
    return [key for key in layout if pattern.fullmatch(key)] or [f"{axis}axis"]
