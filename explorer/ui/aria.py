"""Names, roles and live regions that Streamlit's own elements cannot be given from Python.

``st.button`` with only an icon is read as its icon's ligature ("arrow_back icon"), ``st.page_link`` marks no
current page, and no element takes ``aria-live``. ``aria_ui`` draws a zero-height ``st.components.v2`` component
whose script (it runs in the app's page itself, not in a frame) sets such attributes on the elements a CSS
selector finds, and again whenever Streamlit redraws them. ``RULES`` holds the app-wide ones; the menu adds the
current page's (``explorer.ui.navigation``).

A rule: ``{"selector": css, "attributes": {name: value}}``; with ``"label"``, only elements whose visible text is
that label get the attributes, and the others matching the selector lose them (the current page moves).
"""

from __future__ import annotations

import streamlit as st

RULES = [
    # The lecture's arrows (explorer/ui/lecture.py): icon-only buttons.
    {"selector": ".st-key-previous button", "attributes": {"aria-label": "Previous slide"}},
    {"selector": ".st-key-next button", "attributes": {"aria-label": "Next slide"}},
    # Announced when it changes: the slide's title and place (a remote moves the deck without focus), and the
    # verdict on an answer.
    {"selector": ".st-key-lecture-title", "attributes": {"aria-live": "polite"}},
    {"selector": ".st-key-lecture-place", "attributes": {"aria-live": "polite", "aria-atomic": "true"}},
    {"selector": ".st-key-lecture-verdict", "attributes": {"role": "status", "aria-live": "polite"}},
    # A Vega-Lite interval selection's brush (the sampling panels' band, explorer/render/sampling.py) is drawn as
    # two unnamed rectangles that Vega-Lite gives no ARIA settings: hidden, as the band's tokens are named by the
    # highlighted curve's points and the keyboard's band control.
    {
        "selector": "[data-testid='stVegaLiteChart'] .role-mark[class*='_brush']",
        "attributes": {"aria-hidden": "true"},
    },
]

_JS = """
export default function(component) {
  const { data } = component;
  function apply() {
    for (const rule of data.rules) {
      for (const element of document.querySelectorAll(rule.selector)) {
        // A page link's or button's own text, without its icon's ligature.
        const text = (element.querySelector("[data-testid='stMarkdownContainer']") || element).textContent.trim();
        const shown = rule.label === undefined || text === rule.label;
        for (const [name, value] of Object.entries(rule.attributes)) {
          if (shown && element.getAttribute(name) !== value) element.setAttribute(name, value);
          if (!shown && element.hasAttribute(name)) element.removeAttribute(name);
        }
      }
    }
  }
  apply();
  // Streamlit redraws elements on reruns: set them again (setting attributes is not a change of the child list,
  // so this does not call itself).
  const observer = new MutationObserver(apply);
  observer.observe(document.querySelector("[data-testid='stApp']") || document.body, {childList: true, subtree: true});
  return () => observer.disconnect();
}
"""
_aria = st.components.v2.component("explorer_aria", js=_JS, html="<span></span>")


def aria_ui(rules: list[dict], *, key: str = "aria") -> None:
    """Apply ``rules`` (``RULES``'s form) to the page, now and after every redraw."""
    _aria(key=key, data={"rules": rules}, height=0)
