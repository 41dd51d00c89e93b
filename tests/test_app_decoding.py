"""The decoding pages, run headless by AppTest: what they show equals ``explorer.decode`` (itself equal to
generate()), their controls restore from links, and view-only controls never run the model again."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

import explorer
from explorer.compute.decoding import comparison_caption, repeats
from explorer.compute.sampling import distribution_from_logits
from explorer.models.kv_cache import REPEATS
from explorer.ui.caches import results_cache
from explorer.ui.decoding import default_prompt
from explorer.ui.text import literal
from tests.figures import decode_plotly_array

TIMEOUT = 90
DECODER = explorer.DEFAULT_DECODER
PROMPT = default_prompt(DECODER)
PAGES = [
    "pages/greedy_search.py",
    "pages/beam_search.py",
    "pages/sampling.py",
    "pages/compare_strategies.py",
    "pages/generation_attention.py",
]


def open_page(page: str, **params) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=TIMEOUT)
    at.query_params.update(params)
    at.run()
    at.switch_page(page)
    return at.run()


@pytest.fixture(scope="module")
def prose():
    return explorer.load_model(DECODER, device="cpu")


@pytest.fixture
def count_runs(monkeypatch):
    """Counts model runs: every decoding and next-token pass the pages make goes through these three functions."""
    runs = []
    real_decode, real_logits = explorer.decode, explorer.next_token_logits
    real_together = explorer.decode_together

    def decode(*args, **kwargs):
        runs.append(("decode", kwargs.get("strategy")))
        return real_decode(*args, **kwargs)

    def decode_together(*args, **kwargs):
        runs.append(("decode together", tuple(variant["strategy"] for variant in args[2])))
        return real_together(*args, **kwargs)

    def logits(*args, **kwargs):
        runs.append(("logits", args[1]))
        return real_logits(*args, **kwargs)

    monkeypatch.setattr(explorer, "decode", decode)
    monkeypatch.setattr(explorer, "decode_together", decode_together)
    monkeypatch.setattr(explorer, "next_token_logits", logits)
    results_cache().clear()
    return runs


def figure(at: AppTest, index: int = 0) -> dict:
    return json.loads(at.get("plotly_chart")[index].proto.spec)


def texts(elements) -> str:
    return " ".join(element.value for element in elements)


@pytest.mark.parametrize("page", PAGES)
def test_with_an_encoder_loaded_a_decoding_page_runs_the_bundled_decoder(page):
    """No dead end: the page says in one line that the encoder cannot generate and shows the bundled decoder's
    result; the sidebar keeps the encoder for the attention pages."""
    at = open_page(page)  # the app opens on the bundled encoder
    assert not at.exception
    said = texts(at.caption)
    assert "is an encoder" in said and "uses the bundled" in said and literal(explorer.display_name(DECODER)) in said
    assert at.get("plotly_chart") or at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart")
    charts = [c.proto.spec for kind in ("plotly_chart", "vega_lite_chart") for c in at.get(kind)]
    assert DECODER.split("/")[-1] in json.dumps(charts)
    assert at.session_state["model_name"] != DECODER


def test_greedy_table_and_figure_equal_decode(prose):
    at = open_page("pages/greedy_search.py", model=DECODER, steps="6")
    assert not at.exception
    trace = explorer.decode(prose, PROMPT, strategy="greedy", max_new_tokens=6, top_n=5)
    table = at.table[0].value  # a table that wraps (st.table): every column in view at 1280 px
    assert len(table) == 6 and list(table["step"]) == [1, 2, 3, 4, 5, 6]
    expected_first = f"{trace.steps[0].candidate_tokens[0][0].replace(' ', '␣', 1)}"
    assert table["choice 1"][0].startswith(literal(expected_first))  # st.table renders Markdown: cells are escaped
    shown = decode_plotly_array(figure(at)["data"][0]["z"])
    np.testing.assert_allclose(shown, np.array([s.candidate_probs[0] for s in trace.steps]).T, rtol=1e-6)
    assert float(at.metric[0].value) == pytest.approx(float(trace.sequence_logprobs[0]), abs=0.01)


def test_greedy_search_looping_is_shown_as_the_lesson():
    at = open_page("pages/greedy_search.py", model=DECODER, steps="32")  # the bundled decoder loops within 32
    assert "looping" in texts(at.info)
    assert any("beam_search" in link.proto.page for link in at.get("page_link"))


def test_the_chapter_preset_falls_back_to_the_bundled_decoder_offline():
    at = open_page("pages/greedy_search.py", model=DECODER, prompt="something else")
    preset = next(button for button in at.button if "Chapter preset" in button.label)
    preset.click().run()
    assert not at.exception
    assert at.session_state["model_name"] == DECODER  # gpt2 cannot be downloaded in the tests
    assert "could not be downloaded" in texts(at.info)
    assert "Preset applied: " in texts(at.info) and "steps 8" in texts(at.info)  # it says what it set
    assert not at.error  # a planned fallback is a note in the sidebar, not an error box
    assert at.text_area(key="prompt").value == PROMPT
    assert at.slider(key="steps").value == 8


def test_beam_search_restores_from_a_link_and_replays_without_running_the_model(prose, count_runs):
    at = open_page("pages/beam_search.py", model=DECODER, beams="4", ngram="2", returned="2", steps="8")
    assert not at.exception
    assert (at.slider(key="beams").value, at.slider(key="ngram").value, at.slider(key="returned").value) == (4, 2, 2)
    trace = explorer.decode(
        prose,
        PROMPT,
        strategy="beam",
        num_beams=4,
        max_new_tokens=8,
        no_repeat_ngram_size=2,
        num_return_sequences=2,
        top_n=5,
    )
    tree = figure(at)
    shown_nodes = sum(len(trace_["x"]) for trace_ in tree["data"] if trace_.get("mode", "").startswith("markers"))
    assert shown_nodes == len(trace.tree)  # every candidate, the prompt included
    pool = at.dataframe[0].value
    assert list(pool["normalised score"][:2]) == pytest.approx(list(trace.sequence_scores), abs=1e-3)
    assert "n-gram ban" in " ".join(h.value for h in at.subheader)
    runs = len(count_runs)
    at.slider(key="upto").set_value(3).run()  # steps count from 1, as in the title
    assert len(count_runs) == runs  # replaying the search is view-only
    replayed = figure(at)
    assert sum(len(t["x"]) for t in replayed["data"] if t.get("mode", "").startswith("markers")) < shown_nodes
    assert "step 3 of" in replayed["layout"]["title"]["text"]
    # The replay never shows the future: nothing is "returned" before the search has returned, and the caption
    # counts the candidates of steps 1-3 only.
    assert "returned" in {t.get("name") for t in tree["data"]}
    assert "returned" not in {t.get("name") for t in replayed["data"]}
    early = [node for node in trace.tree[1:] if node.step <= 2]
    assert f"{len(early)} candidates considered up to step 3" in texts(at.caption)


@pytest.mark.parametrize("ngram", [0, 3])
def test_beam_search_compares_greedy_beam_and_beam_with_a_ban_and_greedy_is_never_banned(prose, ngram):
    at = open_page("pages/beam_search.py", model=DECODER, beams="3", steps="16", ngram=str(ngram))
    assert not at.exception
    ban = ngram or 2  # the page's ban, or the chapter's 2 when the page has none
    common = dict(max_new_tokens=16, top_n=5)
    beam = dict(strategy="beam", num_beams=3, length_penalty=1.0, early_stopping=False, **common)
    expected = {
        "greedy search, no ban": explorer.decode(prose, PROMPT, strategy="greedy", **common),
        "beam search, 3 beams, no ban": explorer.decode(prose, PROMPT, no_repeat_ngram_size=0, **beam),
        f"beam search, 3 beams, no repeated {ban}-grams": explorer.decode(
            prose, PROMPT, no_repeat_ngram_size=ban, **beam
        ),
    }
    shown = figure(at, -1)
    assert shown["data"][0]["y"] == list(expected)
    logprobs = decode_plotly_array(shown["data"][0]["x"])
    for value, trace in zip(logprobs, expected.values(), strict=True):
        assert value == pytest.approx(float(trace.sequence_logprobs[0]), abs=1e-4)
    # The lesson on this prompt: greedy search repeats itself and the ban removes every repeated n-gram.
    captions = texts(at.caption)
    repeated = [repeats(trace.generated_tokens[0], size=ban) for trace in expected.values()]
    assert repeated[0] > 0 and repeated[2] == 0
    for count in repeated:
        assert f"Repeated {ban}-grams: {count}" in captions


def test_returned_sequences_never_exceed_the_beams():
    at = open_page("pages/beam_search.py", model=DECODER, beams="2", returned="5")
    assert not at.exception
    assert at.slider(key="returned").value <= 2


def test_bad_link_values_give_notices_and_a_valid_view():
    at = open_page("pages/beam_search.py", model=DECODER, beams="abc", lp="99", early="maybe", ngram="-3")
    assert not at.exception
    notices = texts(at.info)
    assert "not a number" in notices and "outside" in notices and "not one of the choices" in notices
    assert at.slider(key="lp").value == 3.0 and at.slider(key="ngram").value == 0


def test_sampling_controls_never_run_the_model_again(prose, count_runs):
    """Four moves on each of the page's views (each drawn only while chosen), one forward pass in all."""
    logits = explorer.next_token_logits(prose, PROMPT)
    count_runs.clear()
    for view in ("panels", "temperatures", "stages"):
        at = open_page("pages/sampling.py", model=DECODER, **({} if view == "panels" else {"view": view}))
        assert not at.exception
        at.slider(key="temperature").set_value(0.5).run()
        at.slider(key="top_k").set_value(20).run()
        at.slider(key="top_p").set_value(0.8).run()
        at.slider(key="min_p").set_value(0.05).run()
        assert not at.exception and at.query_params.get("view", "panels") == view
        shown = {"panels": len(at.get("vega_lite_chart")), "temperatures": len(at.get("plotly_chart"))}
        shown["stages"] = len(at.dataframe)
        assert shown[view] == 1 and len(at.get("plotly_chart")) == (view != "panels")  # the view chosen, alone
        expected = distribution_from_logits(
            logits.logits, logits.tokens, temperature=0.5, top_k=20, top_p=0.8, min_p=0.05
        )
        if view == "stages":
            stages = at.dataframe[0].value
            assert list(stages["tokens kept"]) == [int(expected.kept[name].sum()) for name, _ in expected.stages]
        if view == "panels":
            chart = json.dumps(json.loads(at.get("vega_lite_chart")[0].proto.spec))
            assert "top-k = 20" in chart and "top-p = 0.8" in chart
    assert count_runs == [("logits", PROMPT)]  # the first open's forward pass; every other answer from the cache


def test_an_unknown_view_in_a_link_gets_a_notice_and_a_click_changes_the_view():
    at = open_page("pages/sampling.py", model=DECODER, view="[x](http://example.com)")
    assert not at.exception and len(at.get("vega_lite_chart")) == 1  # the first view
    assert any("is not one of the views" in notice.value and "](" not in notice.value for notice in at.info)
    at.segmented_control(key="view").set_value("stages").run()
    assert not at.get("vega_lite_chart") and len(at.dataframe) == 1 and at.query_params["view"] == "stages"
    at.slider(key="temperature").set_value(0.5).run()  # the view stays through a move
    assert at.query_params["view"] == "stages" and len(at.dataframe) == 1


def test_seeded_sampling_shows_each_draw(prose):
    at = open_page("pages/sampling.py", model=DECODER, draw="true", seed="5", sample_steps="6", temperature="0.9")
    assert not at.exception
    trace = explorer.decode(prose, PROMPT, strategy="sample", max_new_tokens=6, temperature=0.9, seed=5, top_n=20)
    draws = at.dataframe[0].value  # the first view has no table: the draws are the page's only one
    assert len(draws) == len(trace.generated_tokens[0])
    assert list(draws["drawn"]) == [
        t.replace(" ", "␣", 1) if t.startswith(" ") else t for t in trace.generated_tokens[0]
    ]


def test_compare_strategies_shows_each_strategy_with_its_log_probability(prose):
    at = open_page("pages/compare_strategies.py", model=DECODER, steps="6", beams="3", seed="2")
    assert not at.exception
    greedy = explorer.decode(prose, PROMPT, strategy="greedy", max_new_tokens=6, top_n=5)
    beam = explorer.decode(prose, PROMPT, strategy="beam", num_beams=3, max_new_tokens=6, top_n=5)
    assert [h.value for h in at.subheader][:2] == ["Greedy search", "Beam search (3 beams)"]
    shown = [float(metric.value) for metric in at.metric]
    assert shown[0] == pytest.approx(float(greedy.sequence_logprobs[0]), abs=0.01)
    assert shown[1] == pytest.approx(float(beam.sequence_logprobs[0]), abs=0.01)
    assert shown[1] >= shown[0] - 1e-6  # beam search finds a text at least as likely as greedy's


def test_attention_while_generating_shows_the_stitched_matrix(prose, count_runs):
    at = open_page("pages/generation_attention.py", model=DECODER, steps="6", layer="2", head="3")
    assert not at.exception
    trace = explorer.decode(prose, PROMPT, strategy="greedy", max_new_tokens=6, record_attention=True)
    stack = trace.attention["decoder"]
    shown = decode_plotly_array(figure(at)["data"][0]["z"])
    size = trace.prompt_length + 5  # the prompt's rows, then the 5 tokens fed back (the 6th never is)
    expected = np.where(stack.masks_by_layer()[2][:size, :size], stack.attentions[2, 3, :size, :size], np.nan)
    np.testing.assert_allclose(shown, expected, atol=1e-7)
    # One step numbering: the slider at its end reads 6, as does the title ("step 6 of 6").
    assert (at.slider(key="step").value, at.slider(key="step").max) == (6, 6)
    assert "step 6 of 6" in figure(at)["layout"]["title"]["text"]
    runs = len(count_runs)
    at.slider(key="step").set_value(2).run()  # steps count from 1: at 2, the prompt's rows and the first fed back
    at.slider(key="head").set_value(0).run()
    assert len(count_runs) == runs
    assert decode_plotly_array(figure(at)["data"][0]["z"]).shape == (trace.prompt_length + 1,) * 2
    assert "verified" in " ".join(c.value for c in at.caption)


@pytest.mark.parametrize("page", ["pages/greedy_search.py", "pages/beam_search.py", "pages/generation_attention.py"])
def test_a_seq2seq_model_decodes_on_the_pages(tiny_models, page):
    at = open_page(page, model=tiny_models["t5"], prompt="the cat sat on the mat", steps="4")
    assert not at.exception
    assert at.get("plotly_chart")  # a T5 writes its decoder text from the prompt


def test_an_untrained_model_says_so(tiny_models):
    at = open_page("pages/greedy_search.py", model=tiny_models["gpt2"], prompt="the cat sat", steps="4")
    assert not at.exception
    assert any("looks untrained" in warning.value for warning in at.warning)


def test_a_branch_link_forces_its_tokens_and_shows_both_continuations(prose):
    own = explorer.decode(prose, PROMPT, strategy="greedy", max_new_tokens=6, top_n=5)
    cat = int(own.steps[0].candidate_ids[0][3])  # the model's fourth choice at the first step
    at = open_page("pages/greedy_search.py", steps="6", force=str(cat))
    assert not at.exception and not at.error
    branch = explorer.decode(prose, PROMPT, strategy="greedy", max_new_tokens=6, top_n=5, force=(cat,))
    shown = "".join(m.value for m in at.markdown)
    assert "Branch:" in shown and "the model's #4" in shown
    assert [m.value for m in at.metric][:2] == [
        f"{float(own.sequence_logprobs[0]):.2f}",
        f"{float(branch.sequence_logprobs[0]):.2f}",
    ]
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert spec["layout"]["xaxis2"]["ticktext"][0].endswith("forced")


def test_a_click_on_a_candidate_branches_there(prose):
    own = explorer.decode(prose, PROMPT, strategy="greedy", max_new_tokens=6, top_n=5)
    at = open_page("pages/greedy_search.py", steps="6")
    clicked = int(own.steps[2].candidate_ids[0][1])
    at.session_state["greedy-grid-select-0"] = {"selection": {"points": [{"customdata": [2, clicked]}]}}
    at.run()
    assert not at.exception
    expected = [int(own.steps[0].chosen_ids[0]), int(own.steps[1].chosen_ids[0]), clicked]
    assert at.query_params["force"] == ",".join(map(str, expected))
    undo = next(button for button in at.button if button.label == "Undo the last branch")
    undo.click().run()  # the two tokens the model chose stay forced
    assert at.query_params["force"] == ",".join(map(str, expected[:2]))


def test_a_click_on_a_beam_node_branches_every_beam_there(prose):
    at = open_page("pages/beam_search.py", steps="5", beams="3")
    trace = explorer.decode(prose, PROMPT, strategy="beam", num_beams=3, max_new_tokens=5, top_n=5)
    node = next(n for n in trace.tree if n.step == 1 and n.status == "pruned")
    at.session_state["beam-tree-select-0"] = {"selection": {"points": [{"customdata": ["hover", node.id]}]}}
    at.run()
    assert not at.exception and not at.error
    parent = trace.tree[node.parent]
    assert at.query_params["force"] == f"{parent.token_id},{node.token_id}"
    branched = explorer.decode(
        prose, PROMPT, strategy="beam", num_beams=3, max_new_tokens=5, top_n=5, force=(parent.token_id, node.token_id)
    )
    assert any(branched.continuations[0].strip()[:10].replace(",", "\\,") in m.value for m in at.markdown)


def test_a_branched_beam_pool_scores_only_the_chosen_tokens_as_generate_does(prose):
    """Issue 27: after a branch, the pool's normalised score is its score ÷ the tokens the search chose
    (not counting the forced ones) ** length_penalty, and the returned one is generate()'s sequences_scores given
    the prompt followed by the forced tokens; the table says how many were forced, and with them the
    continuation's log-probability is the one the branch shows above."""
    import torch

    from tests.test_decoding import reference_config

    own = explorer.decode(prose, PROMPT, strategy="beam", num_beams=3, max_new_tokens=8, top_n=5)
    nodes = {node.id: node for node in own.tree}
    node = next(n for n in own.tree if n.step == 2 and n.status == "pruned")
    force = (nodes[nodes[node.parent].parent].token_id, nodes[node.parent].token_id, node.token_id)
    at = open_page("pages/beam_search.py", model=DECODER, steps="8", beams="3", lp="2", force=",".join(map(str, force)))
    assert not at.exception
    pool = at.dataframe[0].value
    assert set(pool["forced tokens"]) == {3}
    assert list(pool["normalised score"]) == pytest.approx(list(pool["score"] / pool["scored tokens"] ** 2), abs=1e-3)
    ids = prose.tokenizer(PROMPT, return_tensors="pt")["input_ids"]
    config = reference_config(prose, {"strategy": "beam", "num_beams": 3, "max_new_tokens": 5, "length_penalty": 2.0})
    with torch.inference_mode():
        reference = prose.model.generate(torch.cat([ids, torch.tensor([force])], dim=1), generation_config=config)
    returned = pool[pool["returned"]].iloc[0]
    assert returned["normalised score"] == pytest.approx(float(reference.sequences_scores[0]), abs=1e-4)
    own_metric, branch_metric = [m for m in at.metric if m.label == "Log-probability of the continuation"]
    assert own_metric.value != branch_metric.value
    assert f"{returned['log-prob., forced included']:.2f}" == branch_metric.value
    caption = " ".join(c.value for c in at.caption)
    assert "3 forced tokens are the search's input" in caption and "scored tokens^2" in caption


@pytest.mark.parametrize(
    ("greedy", "beam", "banned", "says", "never"),
    [
        # The default prompt's case (issue 27): no loop to stop, and the ban scores better.
        ((-20.1, 2), (-18.6, 0), (-18.31, 0), ["likelier text than greedy", "has no repeat", "even finds a likelier "
         "text (-18.31 against -18.60)"], ["costs", "some cost"]),
        # The chapter's case: the ban stops a loop and costs log-probability.
        ((-20.1, 3), (-18.6, 2), (-19.0, 0), ["leaves 0 of beam search's 2", "costs 0.40 in log-probability"],
         ["likelier text (", "has no repeat"]),
        # Beam search below greedy, and a ban that changes nothing.
        ((-17.1, 0), (-18.6, 0), (-18.6, 0), ["less likely than greedy search's (-18.60 against -17.10)",
         "stays -18.60", "Neither repeats"], ["found a likelier", "costs"]),
    ],
)  # fmt: skip
def test_the_comparison_caption_follows_its_numbers(greedy, beam, banned, says, never):
    caption = comparison_caption(greedy, beam, banned, ban=2, prompt_counts=True)
    assert all(phrase in caption for phrase in says), caption
    assert not any(phrase in caption for phrase in never), caption


def test_the_beam_pages_comparison_caption_says_what_its_numbers_show(prose):
    """On the default prompt the ban scores better than the unbanned beam and no text repeats a 2-gram (issue
    27): the caption says so, from the numbers the page shows, rather than a fixed "at some cost"."""
    at = open_page("pages/beam_search.py", model=DECODER)
    assert not at.exception
    shown = [float(m.value) for m in at.metric if m.label == "Log-probability"]
    repeated = [c.value for c in at.caption if c.value.startswith("Repeated 2-grams")]
    caption = next(c.value for c in at.caption if "no_repeat_ngram_size=2" in c.value)
    greedy, beam, banned = shown
    assert f"({banned:.2f} against {beam:.2f})" in caption
    assert ("even finds a likelier text" in caption) == (banned > beam)
    assert ("costs" in caption) == (banned < beam)
    assert ("has no repeat" in caption) == (repeated[1] == "Repeated 2-grams: 0")
    assert ("found a likelier text than greedy" in caption) == (beam > greedy)
    assert "some cost" not in caption


def test_the_ngram_ban_table_follows_the_replay_slider(prose):
    """Issue 27: replayed to step 4, the table lists only the bans of steps 1-4, as the tree and the pool; before
    the first ban, it says there is none yet."""

    def bans_shown(at) -> list[int]:
        tables = [d.value for d in at.dataframe if "banned token" in d.value.columns]
        return list(tables[0]["step"]) if tables else []

    at = open_page("pages/beam_search.py", model=DECODER, beams="4", ngram="2", steps="8")
    trace = explorer.decode(prose, PROMPT, strategy="beam", num_beams=4, max_new_tokens=8, no_repeat_ngram_size=2)
    steps = [ban.step + 1 for ban in trace.bans]
    assert min(steps) <= 4 < max(steps)  # bans before and after the replayed step
    assert bans_shown(at) == steps
    at.slider(key="upto").set_value(4).run()
    assert bans_shown(at) == [step for step in steps if step <= 4]
    at.slider(key="upto").set_value(min(steps) - 1).run()
    assert bans_shown(at) == []
    assert any(f"no candidate by step {min(steps) - 1}" in c.value for c in at.caption)


def test_a_branch_link_the_model_cannot_take_says_why():
    at = open_page("pages/greedy_search.py", force="99999999")
    assert not at.exception and not at.error
    assert any("vocabulary" in info.value for info in at.info)
    assert any("own choices" in button.label for button in at.button)


@pytest.fixture
def count_measurements(monkeypatch):
    """The KV cache measurements the pages ask for (the steps of each)."""
    calls = []
    real = explorer.kv_cache
    monkeypatch.setattr(explorer, "kv_cache", lambda *a, **k: calls.append(k["steps"]) or real(*a, **k))
    results_cache().clear()
    return calls


def test_the_kv_cache_section_runs_nothing_while_closed(count_measurements):
    at = open_page("pages/greedy_search.py", model=DECODER, steps="6")
    assert not at.exception
    assert [e.label for e in at.expander if "KV cache" in e.label]  # offered, closed
    assert count_measurements == [] and "kv" not in at.query_params


def test_the_kv_cache_section_shows_the_models_cache_and_steps_moves_never_measure_again(prose, count_measurements):
    at = open_page("pages/greedy_search.py", model=DECODER, steps="6", kv="true")
    assert not at.exception
    assert count_measurements == [32]  # one measurement to the slider's maximum
    # From the model's own config (GPT-2's names map onto these too): layers, query heads, KV heads, head size.
    config = prose.model.config
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    prompt_tokens = len(prose.tokenizer(PROMPT)["input_ids"])
    shape = f"{layers} × 2 × {kv_heads} × {prompt_tokens + 6} × {head_dim}"
    held = at.table[-2].value  # what each cache holds, then the costs
    assert list(held.iloc[0])[1] == shape
    sizes = figure(at, -3)  # the cache's size, what each pass computes, each pass's time
    bars = decode_plotly_array(sizes["data"][0]["y"])
    expected = layers * 2 * kv_heads * (prompt_tokens + np.arange(7)) * head_dim * 4 / 1024
    np.testing.assert_allclose(bars, expected)
    assert sizes["data"][0]["x"] == ["prefill", *(f"step {i}" for i in range(1, 7))]
    # Counted: each layer's heads score queries fed × keys; with the cache one query a step, without the prefix.
    prefix = prompt_tokens + np.arange(7)
    per_head = layers * heads  # every query head scores its queries, whichever KV head it reads
    with_cache = per_head * np.array([prompt_tokens] + [1] * 6) * prefix
    work = figure(at, -2)
    np.testing.assert_array_equal(decode_plotly_array(work["data"][0]["y"]), with_cache)
    np.testing.assert_array_equal(decode_plotly_array(work["data"][1]["y"]), per_head * prefix**2)
    total = (int(with_cache.sum()), int((per_head * prefix**2).sum()))
    assert f"compute {total[1]:,} attention scores instead of {total[0]:,}" in texts(at.caption)
    costs = at.table[-1].value
    assert list(costs["positions run"]) == [prompt_tokens + 6, sum(prompt_tokens + i for i in range(7))]
    assert list(costs["attention scores"]) == [literal(f"{count:,}") for count in total]  # st.table: Markdown
    assert "Verified: at every pass the logits with the cache and without it are equal" in texts(at.caption)
    assert f"Measured here over {REPEATS} runs: the whole decoding took" in texts(at.caption)
    grouped = f"Grouped KV heads: {kv_heads} KV heads serve {heads} query heads, so the cache is {heads // kv_heads}×"
    assert (grouped in texts(at.markdown)) == (kv_heads < heads)
    assert ("no grouped KV heads" in texts(at.markdown)) == (kv_heads == heads)
    at.slider(key="steps").set_value(3).run()
    assert not at.exception and count_measurements == [32]
    assert figure(at, -3)["data"][0]["x"] == ["prefill", "step 1", "step 2", "step 3"]


def test_beam_search_says_its_cache_is_one_row_per_beam(count_measurements):
    at = open_page("pages/beam_search.py", model=DECODER, beams="4", steps="5", kv="true")
    assert not at.exception
    assert "Beam search keeps one cache row per beam: 4 ×" in texts(at.markdown)
    assert count_measurements == [32]  # the greedy page's measurement: one for both pages


def test_an_encoder_decoder_shows_both_caches_on_the_greedy_page(tiny_models):
    at = open_page("pages/greedy_search.py", model=tiny_models["t5"], steps="4", kv="true")
    assert not at.exception
    caches = list(at.table[-2].value["cache"])
    assert caches == [literal("Decoder self-attention"), literal("Cross-attention")]  # st.table: Markdown
    assert "cross-attention cache holds the encoder's" in texts(at.markdown)


def test_grouped_kv_heads_are_named_with_their_saving(tiny_models):
    at = open_page("pages/greedy_search.py", model=tiny_models["llama"], steps="4", kv="true")
    assert not at.exception
    assert "Grouped KV heads: 2 KV heads serve 4 query heads, so the cache is 2× smaller" in texts(at.markdown)
    sizes = figure(at, -3)
    bars, ungrouped = (decode_plotly_array(sizes["data"][i]["y"]) for i in (0, 1))
    np.testing.assert_allclose(ungrouped, 2 * bars)  # the dashed line: a key and a value per query head
