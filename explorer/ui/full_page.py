"""Where a slide's view lives in the app: its page, and the values of that page's widgets that show the same view.

Leaving a lecture slide (Esc) opens this page with these values set (``widgets.set_value``) and the slide's
model loaded, so the full page shows what the slide showed, with all of the page's other controls around it.
A table keyed by view class (a subclass not listed has its parent's entry); each entry reads the view's fields
into the page's widget keys, in the units those widgets keep (steps counted from 1, as their sliders show).
Each entry sets every widget that decides what its page draws, its defaults included: a value left from an
earlier visit (a top-p of 0.9, another view of the page, a branch) would draw something else than the slide.
"""

from __future__ import annotations

from collections.abc import Callable

from explorer import views


def _texts(view) -> dict:
    return {"text": view.text, "pair": getattr(view, "text_pair", None) or "", "target": view.target or ""}


def _settings(view) -> dict:
    return dict(view.settings)


def _embeddings(view, *, id_figure: bool) -> dict:
    return {"text": view.text, "pair": view.text_pair or "", "id_figure": id_figure}


def _greedy(view, *, chain: bool) -> dict:
    settings = _settings(view)  # its branch, if any (none: the model's own choices); ``chain``: that section
    steps, force = settings["max_new_tokens"], settings.get("force", ())
    return {"prompt": view.prompt, "steps": steps, "force": force, "chain": chain}


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
    return {
        "text": view.text,
        "source": "toy",
        "causal": view.causal,
        "query": view.query,
        "toy_embeddings": view.embeddings,
        "toy_words": not view.specials,
    }


# The sampling page's settings when off (its sliders' defaults), and its first view.
SAMPLING_OFF = {"top_k": 0, "top_p": 1.0, "min_p": 0.0}


def _distribution(view) -> dict:
    cut_offs = {"top_k": view.top_k, "top_p": view.top_p, "min_p": view.min_p} if hasattr(view, "top_k") else {}
    return {
        "prompt": view.prompt,
        "temperature": view.temperature,
        **SAMPLING_OFF,
        **cut_offs,
        "view": "panels",
        "draw": False,
        "steps_figure": False,
    }


def _sampled(view) -> dict:
    settings = _settings(view)
    chosen = {key: settings[key] for key in ("top_k", "top_p", "min_p") if key in settings}
    return {
        "prompt": view.prompt,
        "temperature": settings.get("temperature", 1.0),
        **SAMPLING_OFF,
        **chosen,
        "seed": settings.get("seed", 0),
        "view": "panels",
        "draw": True,
        "sample_steps": settings["max_new_tokens"],
        "steps_figure": True,  # the lecture's figure of the draw, under the page's table
    }


def _beam_tree(view) -> dict:
    settings = _settings(view)
    return _beam_page(view.prompt, settings, upto=None if view.upto_step is None else view.upto_step + 1)


def _beam_page(prompt: str, settings: dict, *, upto: int | None = None, ngram: int | None = None) -> dict:
    early = settings.get("early_stopping", False)
    return {
        "prompt": prompt,
        "beams": settings["num_beams"],
        "steps": settings["max_new_tokens"],
        "ngram": settings.get("no_repeat_ngram_size", 0) if ngram is None else ngram,
        "lp": settings.get("length_penalty", 1.0),
        "early": early if early == "never" else str(bool(early)),
        "returned": settings.get("num_return_sequences", 1),
        "upto": upto,  # None: the search's last step, as the page opens
        "force": (),  # no branch: the search's own choices
    }


def _comparison(view) -> dict:
    settings = [dict(decoding) for _, decoding in view.decodings]
    if _greedy_beam_and_ban(settings):  # the beam search page's own comparison: its tree is the unbanned search
        ban = settings[2]["no_repeat_ngram_size"]
        return _beam_page(view.prompt, settings[1], ngram=0 if ban == 2 else ban)  # the page bans 2 when it has 0
    # The compare page runs greedy, beam and seeded sampling with shared steps and n-gram ban: the slide's.
    beams = next((s["num_beams"] for s in settings if s.get("strategy") == "beam"), 4)
    sampling = next((s for s in settings if s.get("strategy") == "sample"), {})
    return {
        "prompt": view.prompt,
        "steps": settings[0]["max_new_tokens"],
        "beams": beams,
        "ngram": settings[0].get("no_repeat_ngram_size", 0),
        "temperature": sampling.get("temperature", 1.0),
        "seed": sampling.get("seed", 0),
    }


def _greedy_beam_and_ban(settings: list[dict]) -> bool:
    strategies = [s.get("strategy") for s in settings]
    return (
        strategies == ["greedy", "beam", "beam"]
        and not settings[1].get("no_repeat_ngram_size")
        and settings[2].get("no_repeat_ngram_size", 0) > 0
        and {**settings[1], "no_repeat_ngram_size": 0} == {**settings[2], "no_repeat_ngram_size": 0}
    )


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
    views.tokens.Embeddings: ("pages/tokens_embeddings.py", lambda v: _embeddings(v, id_figure=False)),
    views.anatomy.TokenIds: ("pages/tokens_embeddings.py", lambda v: _embeddings(v, id_figure=True)),
    views.attention.Toy: ("pages/attention_step_by_step.py", _toy),
    views.attention.StepByStep: ("pages/attention_step_by_step.py", _one_query),
    views.attention.Neuron: ("pages/neuron_view.py", _one_query),
    views.attention.AllHeads: ("pages/heads_overview.py", lambda v: _texts(v)),
    views.attention.BertViz: (
        "pages/bertviz_views.py",
        lambda v: {**_texts(v), "bv_view": v.which, "bv_head": v.head},
    ),
    views.attention.Head: ("pages/attention_heatmaps.py", _head),
    views.anatomy.Parameters: ("pages/model_anatomy.py", lambda v: {"lecture_figures": False}),
    # The lecture's figures of the model's sizes: the page's section that draws them, opened.
    views.anatomy.FeedForward: ("pages/model_anatomy.py", lambda v: {"lecture_figures": True}),
    views.anatomy.LectureCount: ("pages/model_anatomy.py", lambda v: {"lecture_figures": True}),
    views.anatomy.Sizes: ("pages/model_anatomy.py", lambda v: {"lecture_figures": True}),
    views.decoding.Greedy: ("pages/greedy_search.py", lambda v: _greedy(v, chain=False)),
    views.decoding.ChainRule: ("pages/greedy_search.py", lambda v: _greedy(v, chain=True)),
    views.decoding.Products: ("pages/greedy_search.py", lambda v: _greedy(v, chain=True)),
    views.decoding.Sampled: ("pages/sampling.py", _sampled),
    views.decoding.BeamTree: ("pages/beam_search.py", _beam_tree),
    views.decoding.Comparison: ("pages/compare_strategies.py", _comparison),  # or beam search's: ``full_page``
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
    if isinstance(view, views.decoding.Comparison) and _greedy_beam_and_ban([dict(d) for _, d in view.decodings]):
        return "pages/beam_search.py", _comparison(view)
    for cls in type(view).__mro__:
        if cls in FULL_PAGES:
            page, values = FULL_PAGES[cls]
            return page, values(view)
    raise KeyError(f"no page shows {type(view).__name__}")
