"""axe-core in the browser tests: WCAG 2.1 AA over a page as it is drawn, its frames included.

``tests/vendor/axe-core/axe.min.js`` is npm's ``axe-core`` 4.14.1, unchanged (``npm pack axe-core@4.14.1``),
Mozilla Public License 2.0 (its LICENSE beside it). It is vendored rather than installed by tests/run.sh so that
a fresh machine, CI included, needs no node or npm for it, and the tests read it from disk, offline.

``violations(page)`` injects axe into the page and into each of its frames (BertViz's views are srcdoc frames),
runs the WCAG 2.0/2.1 A and AA rules in each, and returns the serious and critical violations of the app's own
parts, one line per rule and element.
"""

from __future__ import annotations

from pathlib import Path

AXE = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
WCAG_21_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
FAILING = ("serious", "critical")

# Parts of a page that are not the app's and that it cannot change, left out of the check. None so far: on
# Streamlit 1.67 its own chrome (header, toolbar, sidebar buttons) passes with the app's theme.
NOT_OURS: list[str] = []

_RUN = """
async ({tags, exclude}) => {
  const context = {exclude: exclude.filter((selector) => document.querySelector(selector))};
  const result = await axe.run(context.exclude.length ? context : document,
                               {runOnly: {type: "tag", values: tags}, iframes: false, resultTypes: ["violations"]});
  return result.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map((n) => ({target: n.target.join(" "), summary: n.failureSummary,
                                html: n.html.slice(0, 160)}))}));
}
"""


def violations(page) -> list[str]:
    """Every serious or critical WCAG 2.1 AA violation on ``page`` and its frames: 'rule (impact): element
    what is wrong'."""
    found = []
    for frame in page.frames:
        if frame.is_detached() or frame.url.startswith("about:blank"):
            continue
        if not frame.evaluate("() => typeof window.axe !== 'undefined'"):
            frame.add_script_tag(path=str(AXE))
        where = "" if frame == page.main_frame else f"frame {frame.name or frame.url[:40]}: "
        for rule in frame.evaluate(_RUN, {"tags": WCAG_21_AA, "exclude": NOT_OURS}):
            if rule["impact"] in FAILING:
                found += [
                    f"{where}{rule['id']} ({rule['impact']}): {node['target']} {node['html']!r} "
                    f"{(node['summary'] or '').splitlines()[-1:]}"
                    for node in rule["nodes"]
                ]
    return found


def assert_accessible(page, where: str) -> None:
    """No serious or critical WCAG 2.1 AA violation on ``page`` (``where`` names it in the failure)."""
    found = violations(page)
    assert not found, f"axe on {where}: {len(found)} serious or critical\n" + "\n".join(found)
