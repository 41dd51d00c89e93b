"""What a page draws, measured in the browser: text cut off, text over text, text over marks, tables that scroll.

Every check reads boxes back from the page as Chromium laid them out (``getBoundingClientRect``), so it holds for
Plotly's SVG, Vega's SVG, an exported SVG file opened in a tab, and Streamlit's own widgets alike:

- ``text_boxes(page, root)``: each visible SVG ``text`` under ``root`` (a CSS selector), with its box and the
  class of its nearest classed ancestor (``xtick``, ``ytick``, ``legendtext``, ``role-axis-label``...) and its angle;
  across the text a box spans one em, the height of its letters, not its line box;
- ``assert_inside``: boxes wholly inside a frame (a figure's own box: nothing cut off at its edges);
- ``assert_apart``: no two boxes overlap (tick labels that "run together", a legend over a subtitle);
- ``assert_clear_of``: boxes that touch none of the given obstacles (a legend over bars, a label over a curve);
- ``clipped_texts``: text cut by the clip region it lies in (a plot area's edge), though inside the figure;
- ``truncated_texts(page)``: widget labels and buttons shortened with an ellipsis ("Stretch co…");
- ``scrolls_sideways(page, selector)``: a table or frame whose content is wider than its box.

A tolerance of one pixel absorbs anti-aliasing and sub-pixel rounding, never a visible overlap.
"""

from __future__ import annotations

import itertools

TOLERANCE = 1.0
WORD_GAP = 3.0  # px between two labels on one line: less, and they read as one word

_TEXT_BOXES = """
([root, selector]) => {
  const scope = root ? document.querySelector(root) : document;
  if (!scope) return null;
  const shown = (e) => {
    for (let n = e; n && n.nodeType === 1; n = n.parentElement) {
      const s = getComputedStyle(n);
      if (s.display === "none" || s.visibility === "hidden" || parseFloat(s.opacity) === 0) return false;
    }
    return true;
  };
  const kind = (e) => {
    for (let n = e; n && n !== scope; n = n.parentElement) {
      const c = n.getAttribute && n.getAttribute("class");
      if (c) return c;
    }
    return "";
  };
  return [...scope.querySelectorAll(selector || "text")]
    .filter((t) => t.textContent.trim() && shown(t))
    .map((t) => {
      const r = t.getBoundingClientRect(), m = t.getScreenCTM();
      const angle = Math.round((Math.atan2(m.b, m.a) * 180) / Math.PI);
      // The ink, not the line box: a line box is about 1.35 em tall, so two lines of a legend set 1.15 em apart
      // would "overlap" while their letters never touch. Across the text, one em (ascenders to descenders) is kept.
      const em = parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b);
      let {left, top, right, bottom} = r;
      if (angle % 180 === 0) {
        const c = (top + bottom) / 2;
        [top, bottom] = [Math.max(top, c - em / 2), Math.min(bottom, c + em / 2)];
      } else if (Math.abs(angle) === 90) {
        const c = (left + right) / 2;
        [left, right] = [Math.max(left, c - em / 2), Math.min(right, c + em / 2)];
      }
      return {text: t.textContent.trim(), kind: kind(t), angle, left, top, right, bottom};
    })
    .filter((b) => b.right - b.left > 0 && b.bottom - b.top > 0);
}
"""

_BOXES = """
([root, selector]) => {
  const scope = root ? document.querySelector(root) : document;
  if (!scope) return [];
  return [...scope.querySelectorAll(selector)].map((e) => {
    const r = e.getBoundingClientRect();
    return {text: (e.textContent || "").trim().slice(0, 40), kind: e.getAttribute("class") || e.tagName,
            left: r.left, top: r.top, right: r.right, bottom: r.bottom};
  }).filter((b) => b.right - b.left > 0 && b.bottom - b.top > 0);
}
"""

_TRUNCATED = """
(root) => {
  const scope = root ? document.querySelector(root) : document;
  return [...scope.querySelectorAll("*")].filter((e) => {
    if (!e.textContent.trim() || e.children.length > 1) return false;
    const s = getComputedStyle(e);
    return s.textOverflow === "ellipsis" && s.overflowX !== "visible" && e.scrollWidth > e.clientWidth + 1;
  }).map((e) => e.textContent.trim());
}
"""

_SIDEWAYS = """
(selector) => [...document.querySelectorAll(selector)].map((host) => {
  const scrollers = [host, ...host.querySelectorAll("*")].filter((e) => {
    const s = getComputedStyle(e).overflowX;
    return (s === "auto" || s === "scroll") && e.clientWidth > 0;
  });
  return Math.max(0, ...scrollers.map((e) => e.scrollWidth - e.clientWidth));
})
"""


_CLIPPED = """
(root) => {
  const scope = root ? document.querySelector(root) : document;
  const clipOf = (e) => {
    for (let n = e; n && n !== scope; n = n.parentElement) {
      const ref = n.getAttribute && n.getAttribute("clip-path");
      const id = ref && ref.match(/url\\(['"]?#([^'")]+)/);
      const rect = id && document.getElementById(id[1]) && document.getElementById(id[1]).querySelector("rect");
      if (rect) return [n, rect];
    }
    return null;
  };
  return [...scope.querySelectorAll("text")].filter((t) => t.textContent.trim()).flatMap((t) => {
    const found = clipOf(t);
    if (!found) return [];
    const [clipped, rect] = found, m = clipped.getScreenCTM(), b = rect.getBBox();
    const corners = [[b.x, b.y], [b.x + b.width, b.y + b.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
    const r = t.getBoundingClientRect();
    const [left, right] = [Math.min(corners[0][0], corners[1][0]), Math.max(corners[0][0], corners[1][0])];
    const [top, bottom] = [Math.min(corners[0][1], corners[1][1]), Math.max(corners[0][1], corners[1][1])];
    const out = r.left < left - 1 || r.right > right + 1 || r.top < top - 1 || r.bottom > bottom + 1;
    return out ? [t.textContent.trim()] : [];
  });
}
"""


def clipped_texts(page, root: str | None = None) -> list[str]:
    """Texts drawn partly outside the clip region they are drawn in (a label cut at the plot's edge: "rompt")."""
    return page.evaluate(_CLIPPED, root)


def text_boxes(page, root: str | None = None, selector: str = "text") -> list[dict]:
    """Visible SVG text under ``root`` (``selector`` narrows it: ``.xtick text``), as drawn on the page."""
    boxes = page.evaluate(_TEXT_BOXES, [root, selector])
    assert boxes is not None, f"nothing matches {root!r}"
    return boxes


def boxes(page, selector: str, root: str | None = None) -> list[dict]:
    """The boxes of any elements (bars, legends, plot areas) under ``root``, as drawn."""
    return page.evaluate(_BOXES, [root, selector])


def box(page, selector: str) -> dict:
    found = boxes(page, selector)
    assert found, f"nothing matches {selector!r}"
    return found[0]


def overlap(a: dict, b: dict, tolerance: float = TOLERANCE, gap: float = 0.0) -> bool:
    """Whether two boxes share more than ``tolerance`` pixels both ways, or, side by side on one line, come
    closer than ``gap`` (labels with no space between them read as one: "100200")."""
    across = min(a["right"], b["right"]) - max(a["left"], b["left"])
    down = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
    return down > tolerance and (across > -gap if gap else across > tolerance)


def assert_inside(texts: list[dict], frame: dict, tolerance: float = TOLERANCE) -> None:
    """Every box wholly inside ``frame``: nothing drawn past the figure's edge, where it would be cut off."""
    outside = [
        t["text"]
        for t in texts
        if t["left"] < frame["left"] - tolerance
        or t["right"] > frame["right"] + tolerance
        or t["top"] < frame["top"] - tolerance
        or t["bottom"] > frame["bottom"] + tolerance
    ]
    assert not outside, f"cut off at the figure's edge: {outside}"


def assert_apart(texts: list[dict], tolerance: float = TOLERANCE, gap: float = WORD_GAP) -> None:
    """No two boxes overlap, and two on one line keep ``gap`` pixels between them. Text turned to a slant (45°)
    is left out: its upright box is no measure of its ink (tests/test_browser_slides.py checks turned tick
    labels along their own direction)."""
    level = [t for t in texts if t.get("angle", 0) % 90 == 0]
    clashes = [(a["text"], b["text"]) for a, b in itertools.combinations(level, 2) if overlap(a, b, tolerance, gap)]
    assert not clashes, f"overlapping text: {clashes[:8]}"


def assert_clear_of(texts: list[dict], obstacles: list[dict], tolerance: float = TOLERANCE) -> None:
    """No box touches an obstacle (a bar, a plot area, another panel)."""
    clashes = [(t["text"], o["kind"]) for t in texts for o in obstacles if overlap(t, o, tolerance)]
    assert not clashes, f"text over a mark: {clashes[:8]}"


def truncated_texts(page, root: str | None = "[data-testid='stMain']") -> list[str]:
    """Texts the page shortened with an ellipsis because their box is too narrow (labels, buttons, captions)."""
    return page.evaluate(_TRUNCATED, root)


def scrolls_sideways(page, selector: str) -> list[float]:
    """For each element matching ``selector``: by how many pixels its content overflows sideways (0 = none)."""
    return page.evaluate(_SIDEWAYS, selector)


_PATH_POINTS = """
([root, selector]) => [...document.querySelector(root).querySelectorAll(selector)].flatMap((path) => {
  const m = path.getScreenCTM(), length = path.getTotalLength(), points = [];
  for (let i = 0; i <= 400; i++) {
    const p = path.getPointAtLength((length * i) / 400);
    points.push({left: m.a * p.x + m.c * p.y + m.e, top: m.b * p.x + m.d * p.y + m.f});
  }
  return points.map((p) => ({...p, right: p.left, bottom: p.top, kind: "line", text: ""}));
})
"""


def path_points(page, root: str, selector: str) -> list[dict]:
    """Points along each SVG path matching ``selector`` (a curve), on the page, as zero-size boxes."""
    return page.evaluate(_PATH_POINTS, [root, selector])


def assert_not_crossed(texts: list[dict], points: list[dict]) -> None:
    """No point of a line lies inside a text's box: the line does not run through the words."""
    crossed = [
        t["text"]
        for t in texts
        for p in points
        if t["left"] < p["left"] < t["right"] and t["top"] < p["top"] < t["bottom"]
    ]
    assert not crossed, f"a line crosses {sorted(set(crossed))}"
