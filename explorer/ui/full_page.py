"""Where a slide's view lives in the app: its page, and the values of that page's widgets that show the same view.

Leaving a lecture slide (Esc) opens this page with these values set (``widgets.set_value``) and the slide's
model loaded, so the full page shows what the slide showed, with all of the page's other controls around it.
A table keyed by view class (a subclass not listed has its parent's entry); each entry reads the view's fields
into the page's widget keys, in the units those widgets keep (steps counted from 1, as their sliders show).
"""

from __future__ import annotations

from collections.abc import Callable

from explorer import views


def _texts(view) -> dict:
    return {"text": view.text, "pair": getattr(view, "text_pair", None) or "", "target": view.target or ""}


def _settings(view) -> dict:
    return dict(view.settings)


def _head(view) -> dict:
    return {
        **_texts(view),
        "stack": view.stack,
        "layer": view.layer,
        "head": view.head,
        "show": view.show,
        "stretch": view.stretch,
        "skip_first": view.skip_first_row,
    }


def _one_query(view) -> dict:
    return {**_texts(view), "source": "model", "layer": view.layer, "head": view.head, "query": view.query}


def _toy(view) -> dict:
    return {"text": view.text, "source": "toy", "causal": view.causal, "query": view.query}


def _distribution(view) -> dict:
    cut_offs = {"top_k": view.top_k, "top_p": view.top_p, "min_p": view.min_p} if hasattr(view, "top_k") else {}
    return {"prompt": view.prompt, "temperature": view.temperature, **cut_offs}


def _sampled(view) -> dict:
    settings = _settings(view)
    chosen = {key: settings[key] for key in ("temperature", "top_k", "top_p", "min_p", "seed") if key in settings}
    return {"prompt": view.prompt, **chosen, "draw": True, "sample_steps": settings["max_new_tokens"]}


def _beam_tree(view) -> dict:
    settings = _settings(view)
    upto = {} if view.upto_step is None else {"upto": view.upto_step + 1}
    return {
        "prompt": view.prompt,
        "beams": settings["num_beams"],
        "steps": settings["max_new_tokens"],
        "ngram": settings.get("no_repeat_ngram_size", 0),
        **upto,
    }


def _comparison(view) -> dict:
    # The compare page runs greedy, beam and sampling with shared steps and beams: the slide's, where it has them.
    settings = [dict(decoding) for _, decoding in view.decodings]
    beams = next((s["num_beams"] for s in settings if s.get("strategy") == "beam"), 4)
    return {"prompt": view.prompt, "steps": settings[0]["max_new_tokens"], "beams": beams}


def _generation_attention(view) -> dict:
    settings = _settings(view)
    return {
        "prompt": view.prompt,
        "strategy": settings.get("strategy", "greedy"),
        "steps": settings["max_new_tokens"],
        "layer": view.layer,
        "head": view.head,
        "step": view.step + 1,
    }


def _patching(view) -> dict:
    return {
        "clean": view.clean,
        "corrupted": view.corrupted,
        "answer": view.answer or "",
        "counterfactual": view.counterfactual or "",
    }


# view class -> (its page, view -> that page's widget values)
FULL_PAGES: dict[type, tuple[str, Callable[[object], dict]]] = {
    views.tokens.Embeddings: ("pages/tokens_embeddings.py", lambda v: {"text": v.text, "pair": v.text_pair or ""}),
    views.attention.Toy: ("pages/attention_step_by_step.py", _toy),
    views.attention.StepByStep: ("pages/attention_step_by_step.py", _one_query),
    views.attention.Neuron: ("pages/neuron_view.py", _one_query),
    views.attention.AllHeads: ("pages/heads_overview.py", lambda v: _texts(v)),
    views.attention.BertViz: (
        "pages/bertviz_views.py",
        lambda v: {**_texts(v), "bv_view": v.which, "bv_head": v.head},
    ),
    views.attention.Head: ("pages/attention_heatmaps.py", _head),
    views.anatomy.Parameters: ("pages/model_anatomy.py", lambda v: {}),
    views.decoding.Greedy: (
        "pages/greedy_search.py",
        lambda v: {"prompt": v.prompt, "steps": _settings(v)["max_new_tokens"]},
    ),
    views.decoding.Sampled: ("pages/sampling.py", _sampled),
    views.decoding.BeamTree: ("pages/beam_search.py", _beam_tree),
    views.decoding.Comparison: ("pages/compare_strategies.py", _comparison),
    views.decoding.GenerationAttention: ("pages/generation_attention.py", _generation_attention),
    views.kv_cache.CacheSize: ("pages/greedy_search.py", lambda v: {"prompt": v.prompt, "steps": v.steps, "kv": True}),
    views.patching.Residual: ("pages/patching.py", _patching),
    views.attribution.Scores: (
        "pages/why_this_token.py",
        lambda v: {"text": v.text, "method": v.method, "steps": v.steps},
    ),
    views.sampling.Distribution: ("pages/sampling.py", _distribution),
    # The page draws one of its views at a time (``view``): the slide's.
    views.sampling.Temperatures: ("pages/sampling.py", lambda v: {**_distribution(v), "view": "temperatures"}),
    views.sampling.Stages: ("pages/sampling.py", lambda v: {**_distribution(v), "view": "stages"}),
}


def full_page(view) -> tuple[str, dict]:
    """(the page's path, its widget values) showing ``view``."""
    for cls in type(view).__mro__:
        if cls in FULL_PAGES:
            page, values = FULL_PAGES[cls]
            return page, values(view)
    raise KeyError(f"no page shows {type(view).__name__}")
