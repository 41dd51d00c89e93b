"""No link reaches the server or sends students elsewhere (issue 13): in a real browser, every page opened with
every URL parameter set to a phishing sentence shows it as text. Streamlit's Markdown turns bare web addresses
into links even when escaped, so the test looks for any ``<a>`` pointing at the address, inside frames too."""

from __future__ import annotations

from urllib.parse import urlencode, urlparse

import pytest

import explorer
from tests.browser import needs_chromium, open_tab, wait_until_idle, wait_until_settled

pytestmark = needs_chromium

PHISHING = "Visit https://evil.invalid/login or www.evil.invalid or admin@evil.invalid"
PAGES = [
    "",
    "tokens_embeddings",
    "model_anatomy",
    "attention_step_by_step",
    "neuron_view",
    "heads_overview",
    "bertviz_views",
    "head_statistics",
    "compare_attention",
    "greedy_search",
    "beam_search",
    "sampling",
    "compare_strategies",
    "generation_attention",
    "head_ablation",
    "logit_lens",
    "patching",
    "why_this_token",
    "head_types",
    "lecture",
]
PAGES_WITHOUT_TEXT = {"model_anatomy", "head_types"}  # read no text; notices of malformed values go with a rerun
# Every parameter a page reads (the widgets' keys), plus presentation mode.
PARAMETERS = (
    "ablate beams bv_head bv_layer bv_view causal compare context ctx_a ctx_b draw early generation "
    "greedy head hide_special layer logprobs lp min_p model_b ngram pair prompt query returned rollout "
    "rollout_layer sample_steps seed show source skip_first step steps strategy stretch target "
    "temperature text text_b tokens top_k top_p upto word position probe probe_n force present class key kv "
    "deck slide answers presenter s_layer s_head s_query s_temperature s_top_k s_top_p s_min_p s_step s_upto_step "
    "clean corrupted answer counterfactual method candidate view"
).split()

FIND_LINKS = """
() => {
  const hrefs = [];
  const collect = (doc) => {
    for (const a of doc.querySelectorAll("a[href]")) hrefs.push(a.getAttribute("href"));
    for (const frame of doc.querySelectorAll("iframe")) {
      try { if (frame.contentDocument) collect(frame.contentDocument); } catch (e) {}
    }
  };
  collect(document);
  return hrefs;
}
"""


def _links_to_evil(tab) -> list[str]:
    """Links that lead off to the address (links to the app's own pages may carry the text in their query)."""
    hrefs = tab.page.evaluate(FIND_LINKS)
    return [h for h in hrefs if "evil" in (urlparse(h).hostname or "") or h.lower().startswith("mailto:")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p or "attention_heatmaps")
def test_every_parameter_shows_literally(browser, app_url, page):
    query = urlencode({"model": explorer.DEFAULT_DECODER, **dict.fromkeys(PARAMETERS, PHISHING)})
    tab = open_tab(browser, width=1400, height=1000)
    tab.page.goto(f"{app_url}/{page}?{query}")
    tab.page.wait_for_selector("[data-testid='stMainBlockContainer']", timeout=60_000)
    wait_until_settled(tab.page)
    if page not in PAGES_WITHOUT_TEXT:  # the text is there, as text (a timeout fails the test)
        tab.page.wait_for_function("() => document.body.innerText.includes('evil.invalid')", timeout=60_000)
    assert _links_to_evil(tab) == []
    assert tab.page.locator("[data-testid='stException']").count() == 0
    assert tab.external == []
    tab.context.close()


def test_a_phishing_model_name_shows_literally(browser, app_url):
    tab = open_tab(browser, width=1400, height=1000)
    tab.page.goto(f"{app_url}/?{urlencode({'model': PHISHING})}")
    tab.page.wait_for_selector("[data-testid='stPlotlyChart']", timeout=120_000)
    wait_until_idle(tab.page)
    assert "evil.invalid" in tab.page.inner_text("body")
    assert _links_to_evil(tab) == []
    tab.context.close()
