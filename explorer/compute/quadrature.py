"""Integrated gradients' quadrature on the straight path α·x, α from 0 to 1: where its points go and how its
errors are read, on arrays of f(α·x) already computed (``explorer.models.attribution`` runs the model).

``GRID`` is where f is scanned (0, then three points a decade from 10⁻³⁰ to 1); ``along`` is f at ``GRID``.
``smooth_from_zero`` decides, from ``PROBES`` alone, whether one plain Gauss-Legendre rule on [0, 1] fits; where it
does not, ``plan_panels`` and ``quadrature`` place Gauss-Legendre panels where f changes and refine those whose own
completeness is missed most. Where f' jumps (a ReLU's kinks) ``bisected_trapezoid`` splits trapezoid cells where
they miss instead. ``suspect_cells`` and ``sections`` serve the search for jumps of f.
"""

from __future__ import annotations

import itertools

import numpy as np


def quadrature(along: np.ndarray, steps: int, integrate) -> dict:
    """``integrate(panels)`` (for each panel an array whose sum is the panel's part of ∫ df, all panels' points
    read together) for the panels of ``steps`` points in all: three quarters placed by ``plan_panels``, then the
    rest in rounds, each refining together the panels whose own completeness (their sum = f(end) − f(start), read
    off ``along``) is missed most, worst first, while the points last."""
    first = plan_panels(along, steps * FIRST_SHARE // 4)
    done = dict(zip(first, integrate(first), strict=True))
    left = steps - sum(count for _, _, count in first)
    while True:
        error = {p: abs(float(s.sum()) - (along[p[1]] - along[p[0]])) for p, s in done.items()}
        chosen = []
        for panel in sorted(error, key=error.get, reverse=True):
            if error[panel] < ROUND_SHARE * error[chosen[0] if chosen else panel] or 2 * panel[2] > left:
                break
            chosen.append(panel)
            left -= 2 * panel[2]  # either way a refined panel has twice the points
        if not chosen:
            return done
        finer = [half for panel in chosen for half in refine(panel)]
        for panel in chosen:
            del done[panel]
        done.update(zip(finer, integrate(finer), strict=True))


# Where f(α·x) is read before any gradient: α = 0, then three points a decade from 10⁻³⁰ to 1 (a stack of
# RMSNorms without biases, T5's, scales each layer up by 1/√eps while its input is small: f moves over decades).
GRID = np.concatenate([[0.0], np.logspace(-30, 0, 91)])
# The grid's points read first, one batch: 0 and 1, every fourth decade up to 10⁻⁶, every point from 10⁻⁴ to 10⁻²
# (index 85).
PROBES = np.r_[0, 1:74:12, 79:86, len(GRID) - 1]
LINEAR_UP_TO = 85  # α = 10⁻²: below it a smooth f moves in proportion to α
SLACK = 2.0  # how far past its proportional share a probe may move (f levelling off below 10⁻² moves more)
NOISE = 1e-5  # f's float32 rounding, relative to |f(0)| + 1
PANEL_POINTS = 8  # Gauss-Legendre points per panel of the first plan, on average
FIRST_SHARE = 3  # quarters of the points placed first; the rest where panels still miss
ROUND_SHARE = 0.5  # a refining round takes the panels missing at least this share of the worst one's error
MOST_SUSPECTS = 8  # parts the jump search follows in a round
SECTIONS, ROUNDS = 4, 6  # the jump search narrows each suspect cell 4⁶ = 4,096 times
MAX_PANEL_CELLS = 6  # two decades
MOVES = 1e-4  # a grid cell where f moves by less than this share of Σ|Δf| gets no trapezoid node
SPLITS = 16  # cells the trapezoid splits at a time: one batch of points
FLOOR = 1e-3  # share of the whole change every grid cell counts as, however flat f is there


def suspect_cells(alphas, values, slopes, delta: float) -> np.ndarray:
    """The first points of the cells between neighbouring points (α ascending, f, df/dα) where f moves more than
    its slopes allow: with f' monotone in a cell, f's change is the trapezoid's within h·|Δf'|/2, and beyond that
    (and float32's rounding) f may jump. None unless those cells' misses make up at least half of ``delta`` (the
    completeness error: Σ scores − Δf, about −Σ jumps)."""
    widths = np.diff(alphas)
    misses = np.diff(values) - widths * (slopes[1:] + slopes[:-1]) / 2
    allowed = widths * np.abs(np.diff(slopes)) / 2 + NOISE * (1 + np.abs(values).max())
    suspect = np.flatnonzero(np.abs(misses) > allowed)
    return suspect if -misses[suspect].sum() * delta >= delta**2 / 2 else suspect[:0]


def sections(lows: np.ndarray, highs: np.ndarray, count: int) -> np.ndarray:
    """Each cell's ``count`` equal parts' ends, [cell, count + 1]: in log α, or in α from 0."""
    shares = np.linspace(0, 1, count + 1)
    linear = lows[:, None] + (highs - lows)[:, None] * shares
    starts = np.where(lows > 0, lows, highs)[:, None]  # a cell from 0 takes the linear parts, whatever this gives
    logs = np.log(starts) + np.log(highs[:, None] / starts) * shares
    return np.where(lows[:, None] > 0, np.exp(logs), linear)


def smooth_from_zero(along: np.ndarray) -> bool:
    """Whether f, read at ``PROBES`` (``along`` = f at ``GRID``), moves below α = 10⁻² no faster than in
    proportion to α, as a function smooth at 0 does (LayerNorm models: positions and biases keep every norm's
    input away from zero): then a plain rule's points, uniform in α, miss nothing below its first point. A stack of
    bias-free RMSNorms (Llama's, T5's) moves f over decades far below, where those points never land."""
    below = PROBES[(PROBES > 0) & (PROBES < LINEAR_UP_TO)]
    moved = np.abs(along[below] - along[0])
    proportional = GRID[below] / GRID[LINEAR_UP_TO] * abs(along[LINEAR_UP_TO] - along[0])
    return bool((moved <= SLACK * proportional + NOISE * (1 + abs(along[0]))).all())


def plan_panels(along: np.ndarray, steps: int) -> list[tuple[int, int, int]]:
    """Panels (first grid index, last grid index, points): neighbouring grid cells merged while their share of
    how much f changes (``along`` = f at ``GRID``) stays under one panel's and they span at most two decades,
    with points in proportion to each panel's share."""
    cells = np.abs(np.diff(along))
    shares = (cells + FLOOR * max(cells.sum(), 1e-12)) / (cells.sum() + FLOOR * len(cells) * max(cells.sum(), 1e-12))
    most = PANEL_POINTS / steps
    widest = max(MAX_PANEL_CELLS, -(-len(cells) // max(steps // 2 - 1, 1)))  # few steps: wider panels
    edges, share = [0], 0.0
    for cell, cell_share in enumerate(shares):
        if cell > edges[-1] and (share + cell_share > most or cell - edges[-1] >= widest or cell == 1):
            edges.append(cell)  # [0, 10⁻³⁰] is a panel of its own: points uniform in α there miss every decade
            share = 0.0
        share += cell_share
    edges.append(len(cells))
    counts = _counts(np.add.reduceat(shares, edges[:-1]), steps)
    return [(low, high, int(count)) for low, high, count in zip(edges[:-1], edges[1:], counts, strict=True)]


def refine(panel: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """A panel's two halves with as many points each, or, within one grid cell, twice its points."""
    low, high, count = panel
    if high - low >= 2:
        middle = (low + high) // 2
        return [(low, middle, count), (middle, high, count)]
    return [(low, high, 2 * count)]


def panel_points(low: int, high: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre points α and weights on [GRID[low], GRID[high]]: uniform in log α, or in α from 0."""
    nodes, weights = np.polynomial.legendre.leggauss(count)
    start, end = GRID[low], GRID[high]
    if start == 0:
        return end * (nodes + 1) / 2, end * weights / 2
    logs = np.log(start) + (np.log(end) - np.log(start)) * (nodes + 1) / 2
    return np.exp(logs), np.exp(logs) * (np.log(end) - np.log(start)) * weights / 2  # dα = α d(log α)


def _counts(shares: np.ndarray, steps: int) -> np.ndarray:
    """Points per panel: at least one each, the rest in proportion to the panels' shares (largest remainders)."""
    counts = np.ones(len(shares), dtype=int)
    wanted = shares / shares.sum() * (steps - len(shares))
    counts += np.floor(wanted).astype(int)
    rest = steps - counts.sum()
    counts[np.argsort(-(wanted - np.floor(wanted)))[:rest]] += 1
    return counts


def bisected_trapezoid(along: np.ndarray, steps: int, slopes) -> dict | None:
    """Where f' jumps (ReLU kinks, hundreds along T5's path): the trapezoid rule on cells between nodes, in log α
    (in α from 0), with ``slopes(alphas)`` giving at each α (an array whose sum is df/dα, f there). The nodes start
    at 0 and the grid points from where f moves (``along`` = f at ``GRID``); then, while the points last, the cells
    that miss their own completeness (Σ their part = f(end) − f(start)) most are split at their middle, up to
    ``SPLITS`` at a time: a split reads one point and keeps both ends', so the points go where the kinks are and a
    cell's error shrinks with its width. {(first α, last α): its part}; None where ``steps`` cannot cover the grid
    points where f moves."""
    cells = np.abs(np.diff(along))
    first = max(int(np.flatnonzero(cells > MOVES * cells.sum())[0]), 1) if cells.sum() > 0 else len(GRID) - 1
    alphas = [0.0, *GRID[first:].tolist()]
    if len(alphas) > steps:
        return None
    known = dict(zip(alphas, slopes(np.array(alphas)), strict=True))
    left = steps - len(alphas)

    def part(start: float, end: float):
        (low, _), (high, _) = known[start], known[end]
        if start == 0:
            return (low + high) * (end / 2)
        return (start * low + end * high) * (float(np.log(end / start)) / 2)  # dα = α d(log α)

    def missed(cell) -> float:
        return abs(float(part(*cell).sum()) - (known[cell[1]][1] - known[cell[0]][1]))

    done = list(itertools.pairwise(alphas))
    while left:
        worst = sorted(done, key=missed, reverse=True)[: min(SPLITS, left)]
        middles = [end / 2 if start == 0 else float(np.sqrt(start * end)) for start, end in worst]
        known.update(zip(middles, slopes(np.array(middles)), strict=True))
        left -= len(middles)
        done = [cell for cell in done if cell not in worst]
        done += [
            half
            for (start, end), middle in zip(worst, middles, strict=True)
            for half in ((start, middle), (middle, end))
        ]
    return {cell: part(*cell) for cell in done}
