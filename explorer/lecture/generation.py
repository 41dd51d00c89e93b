"""The text generation deck: the chain rule, greedy search, beam search, temperature, top-k and top-p, sampling,
and the KV cache, each on the bundled decoder with the sources' numbers beside its own."""

from __future__ import annotations

import math

import numpy as np

from explorer import DEFAULT_DECODER, views
from explorer.compute.decoding import mark_leading_space, repeated_ngram, repeats, step_logprobs
from explorer.compute.sampling import distribution_from_logits, softmax
from explorer.lecture.deck import Deck, Question, Slide

CHAPTER_PROMPT = "Transformers are the"  # artifact 18 (gpt2-xl in the chapter)
PROMPT = "It is a truth universally acknowledged, that"  # the bundled decoder learnt from 19th-century novels
FLAT = "The dress color was"  # artifact 26, the lecture's flat example
# The lecture's peaky example, "The light was", is flat for the bundled decoder (its top token 4%); this prompt is
# peaky for it (“ the” 41%), so the slide shows a peaky distribution and prints the lecture's beside it.
LECTURE_PEAKY_PROMPT, PEAKY = "The light was", "she burst into"
# The chapter's greedy table, step 0 (gpt2-xl, "Transformers are the"): token and probability in %.
CHAPTER_STEP_0 = ((" most", 8.53), (" only", 4.96), (" best", 4.65), (" Transformers", 4.37), (" ultimate", 2.16))
LECTURE_FLAT = (("red", 0.03), ("white", 0.03), ("black", 0.02), ("pink", 0.02), ("blue", 0.02))
LECTURE_PEAKY = (("on", 0.45), ("off", 0.44), ("in", 0.01), ("at", 0.01), ("too", 0.01))


def _greedy(steps: int) -> tuple:
    return (("strategy", "greedy"), ("max_new_tokens", steps), ("top_n", 5))


def _beam(beams: int, steps: int, ngram: int = 0) -> tuple:
    return (("strategy", "beam"), ("num_beams", beams), ("max_new_tokens", steps), ("no_repeat_ngram_size", ngram))


def _candidates(step) -> list[tuple[str, float]]:
    return [
        (mark_leading_space(token), float(prob))
        for token, prob in zip(step.candidate_tokens[0], step.candidate_probs[0], strict=True)
    ]


def _listed(pairs, *, percent: bool) -> str:
    return ", ".join(f"{token} {value:.2f}{'%' if percent else ''}" for token, value in pairs)


# -- greedy search ---------------------------------------------------------------------------------------------


def _greedy_table_against(trace) -> tuple[str, ...]:
    chapter = [(mark_leading_space(token), prob) for token, prob in CHAPTER_STEP_0]
    ours = [(token, 100 * prob) for token, prob in _candidates(trace.steps[0])]
    return (
        f"Chapter (gpt2-xl), step 1: {_listed(chapter, percent=True)}",
        f"This model, step 1: {_listed(ours, percent=True)}",
    )


def _first_choices(trace) -> tuple[str, ...]:
    return tuple(token for token, _ in _candidates(trace.steps[0]))


def _first_chosen(trace) -> str:
    return mark_leading_space(trace.generated_tokens[0][0])


def _first_why(trace) -> str:
    token, prob = _candidates(trace.steps[0])[0]
    return f"Greedy search takes the likeliest candidate: {token}, at {100 * prob:.2f}%."


def _chosen_logprobs(trace) -> np.ndarray:
    """The raw log-probability of each token greedy search took."""
    return step_logprobs(trace)


def _products_told(trace) -> tuple[str, ...]:
    logprobs = _chosen_logprobs(trace)
    first, product = math.exp(logprobs[0]), math.exp(logprobs.sum())
    return (
        f"Here the product falls from {first:.3g} after one token to {product:.3g} after {len(logprobs)}; "
        f"the sum of logs reads {logprobs.sum():.2f}.",
    )


def _loop_told(trace) -> tuple[str, ...]:
    """The phrase that comes back, with its count, or that none does."""
    tokens = trace.generated_tokens[0]
    loop = repeated_ngram(tokens, size=2)
    if loop is None:
        return (f"No pair of tokens comes back three times in these {len(tokens)} tokens.",)
    count = sum(tuple(tokens[i : i + 2]) == loop for i in range(len(tokens) - 1))
    phrase = "".join(loop).replace("\n", " ").strip()
    return (f"Here “{phrase}” comes back {count} times in {len(tokens)} tokens.",)


def _chain_rule_against(trace) -> tuple[str, ...]:
    logprobs = _chosen_logprobs(trace)
    terms = " + ".join(f"({value:.2f})" for value in logprobs[:4])
    return (
        f"log p(continuation) = Σ log p(token | tokens before): {terms} + … = {logprobs.sum():.2f}",
        f"As the trace sums it: {float(trace.sequence_logprobs[0]):.2f}, over {len(logprobs)} forward passes",
    )


def _loop_against(trace) -> tuple[str, ...]:
    tokens = trace.generated_tokens[0]
    return (
        "Chapter (gpt2-xl, the unicorn prompt, 128 tokens): greedy search repeats itself, log-probability −87.43",
        f"This model, {len(tokens)} tokens: log-probability {float(trace.sequence_logprobs[0]):.2f}, "
        f"{repeats(tokens, size=2)} repeated 2-grams",
    )


def _log_against(trace) -> tuple[str, ...]:
    logprobs = _chosen_logprobs(trace)
    return (
        f"0.5 ** 1024 = {0.5**1024:.6g}; sum([log(0.5)] * 1024) = {sum([math.log(0.5)] * 1024):.4f}",
        f"This continuation: product of probabilities {math.exp(logprobs.sum()):.3g}, sum of logs {logprobs.sum():.2f}",
    )


# -- beam search --------------------------------------------------------------------------------------------------


def _comparison_against(traces) -> tuple[str, ...]:
    values = [float(trace.sequence_logprobs[0]) for trace in traces.values()]
    shown = " · ".join(f"{label} {value:.2f}" for label, value in zip(traces, values, strict=True))
    chapter = "Chapter (gpt2-xl): greedy −87.43 · beam 5 −55.23 · beam 5 with a 2-gram ban −93.12"
    return (chapter, f"This model: {shown}")


def _logprobs(traces) -> list[float]:
    return [round(float(trace.sequence_logprobs[0]), 2) for trace in traces.values()]  # as the bars print them


def _likelier(traces) -> str:
    greedy, beam = _logprobs(traces)[:2]
    return "beam search" if beam > greedy else "greedy search" if greedy > beam else "the same"


def _likelier_why(traces) -> str:
    greedy, beam = _logprobs(traces)[:2]
    beams = list(traces.values())[1].settings.num_beams
    if beam > greedy:
        return (
            f"Beam search kept {beams} partial texts at every step and found {beam:.2f} against greedy search's "
            f"{greedy:.2f}: a less likely token early led to a likelier text."
        )
    if greedy > beam:
        return (
            f"Here greedy search's text is likelier ({greedy:.2f} against {beam:.2f}): beam search keeps only "
            f"{beams} partial texts, and it pruned the start of greedy's path."
        )
    return f"Both reach {beam:.2f}: the best of beam search's {beams} paths is greedy search's."


def _ban_told(traces) -> tuple[str, ...]:
    """What the n-gram ban changed: repeats left and log-probability, in the direction the numbers go."""
    (_, beam), (_, banned) = list(traces.items())[1:3]
    ban = banned.settings.no_repeat_ngram_size
    before, after = (repeats(trace.generated_tokens[0], size=ban) for trace in (beam, banned))
    cost = round(float(beam.sequence_logprobs[0]), 2) - round(float(banned.sequence_logprobs[0]), 2)
    loops = f"repeats {after} {ban}-grams where beam search alone repeats {before}"
    if cost > 0:
        return (f"The {ban}-gram ban {loops}, and costs {cost:.2f} in log-probability.",)
    if cost < 0:
        return (f"The {ban}-gram ban {loops}, and even finds a likelier text ({-cost:.2f} higher).",)
    return (f"The {ban}-gram ban {loops}, at the same log-probability.",)


def _likeliest(traces) -> str:
    return max(traces, key=lambda label: float(traces[label].sequence_logprobs[0]))


def _likeliest_why(traces) -> str:
    best = _likeliest(traces)
    others = ", ".join(f"{label} {value:.2f}" for label, value in zip(traces, _logprobs(traces), strict=True))
    reason = {
        "sample": "this draw happened to be likely",
        "greedy": "greedy search happened to find the likeliest of the three here",
        "beam": "beam search searches for likelihood; sampling draws less likely tokens on purpose",
    }[traces[best].settings.strategy]
    return f"Log-probabilities: {others}. {best}: {reason}."


# -- temperature, top-k, top-p --------------------------------------------------------------------------------


def _likeliest_at(logits, temperature: float) -> float:
    return float(softmax(logits.logits / temperature).max())


def _temperature_answer(logits) -> str:
    hot, plain = _likeliest_at(logits, 2.0), _likeliest_at(logits, 1.0)
    return "it falls" if hot < plain else "it rises" if hot > plain else "it stays"


def _temperature_why(logits) -> str:
    hot, plain = _likeliest_at(logits, 2.0), _likeliest_at(logits, 1.0)
    return (
        f"Halving every gap between the logits flattens the distribution: the likeliest token goes from "
        f"{100 * plain:.1f}% at T = 1 to {100 * hot:.1f}% at T = 2."
    )


def _temperature_told(logits) -> tuple[str, ...]:
    """T < 1 sharpens and T > 1 flattens, said only as far as this distribution's likeliest token shows it."""
    cold, plain, hot = (_likeliest_at(logits, t) for t in (0.5, 1.0, 2.0))
    said = []
    if cold > plain:
        said.append(f"T = 0.5 sharpens (the likeliest token {100 * plain:.1f}% → {100 * cold:.1f}%)")
    if hot < plain:
        said.append(f"T = 2 flattens ({100 * plain:.1f}% → {100 * hot:.1f}%)")
    return (f"Here {' and '.join(said)}.",) if said else ()


def _temperature_against(logits) -> tuple[str, ...]:
    probabilities = {t: softmax(logits.logits / t).max() for t in (0.5, 1.0, 2.0)}
    shown = ", ".join(f"T = {t:g}: {100 * p:.1f}%" for t, p in probabilities.items())
    return (
        "Chapter: T = 0.5 stays coherent, T = 2 gives gibberish (no probabilities printed)",
        f"This model's likeliest next token: {shown}",
    )


def _raw(distribution) -> np.ndarray:
    return distribution.stages[0][1]


def _histogram_against(distribution) -> tuple[str, ...]:
    p = np.sort(_raw(distribution))[::-1]
    top = min(1000, len(p))
    return (
        "Chapter (gpt2, 50,257 tokens): the top token about 1 in 10; the top 1,000 hold about 96%",
        f"This model ({len(p):,} tokens): the top token {100 * p[0]:.1f}%; the top {top:,} hold "
        f"{100 * p[:top].sum():.1f}%",
    )


def _held_told(distribution) -> tuple[str, ...]:
    p = np.sort(_raw(distribution))[::-1]
    most = int(np.searchsorted(np.cumsum(p), 0.99)) + 1
    return (f"Here {most:,} of {len(p):,} tokens hold 99% of the probability; the other {len(p) - most:,} share 1%.",)


def _kept(distribution) -> int:
    return int(distribution.kept[distribution.stages[-1][0]].sum())


def _top_p_why(distribution) -> str:
    """The nucleus in numbers: what the kept tokens add up to, and what one fewer would."""
    names = [name for name, _ in distribution.stages]
    if "top-p" not in names:
        return "Top-p keeps the likeliest tokens until their probabilities add up to p."
    before = distribution.stages[names.index("top-p") - 1][1]  # the distribution top-p cut (after top-k)
    sums = np.cumsum(np.sort(before)[::-1])
    kept = int(distribution.kept["top-p"].sum())
    fewer = f"; the likeliest {kept - 1} only {100 * sums[kept - 2]:.1f}%" if kept > 1 else ""
    return f"After top-k, the likeliest {kept} add up to {100 * sums[kept - 1]:.1f}%{fewer}."


def _kept_choices(distribution) -> tuple[str, ...]:
    kept = _kept(distribution)
    return tuple(str(n) for n in sorted({max(1, kept // 4), kept, min(50, kept * 3 + 1), 50}))


def _top_p_against(distribution) -> tuple[str, ...]:
    return (
        "Chapter: top_k = 50; top_p = 0.90; both combined (samples printed, not counts)",
        f"This model: top-k 50 keeps 50 tokens, then top-p 0.9 keeps {_kept(distribution)}",
    )


def _top_five(distribution) -> list[tuple[str, float]]:
    p = _raw(distribution)
    order = np.argsort(p)[::-1][:5]
    return [(mark_leading_space(distribution.tokens[i]), float(p[i])) for i in order]


def _flat_against(distribution) -> tuple[str, ...]:
    return (
        f"Lecture (“{FLAT}”): {_listed(LECTURE_FLAT, percent=False)}",
        f"This model (“{FLAT}”): {_listed(_top_five(distribution), percent=False)}",
    )


def _peaky_against(distribution) -> tuple[str, ...]:
    return (
        f"Lecture (“{LECTURE_PEAKY_PROMPT}”): {_listed(LECTURE_PEAKY, percent=False)}",
        f"This model (“{PEAKY}”): {_listed(_top_five(distribution), percent=False)}",
    )


def _nucleus(distribution) -> int:
    """How many tokens top-p alone (no top-k) keeps of the distribution the cuts act on."""
    alone = distribution_from_logits(
        distribution.logits, distribution.tokens, temperature=distribution.temperature, top_p=distribution.top_p
    )
    return int(alone.kept[alone.stages[-1][0]].sum())


def _fixed_k(distribution) -> tuple[int, float, np.ndarray] | None:
    """(k, p, the probabilities the cuts act on, likeliest first) when both top-k and top-p are on, else None."""
    if not distribution.top_k or distribution.top_p >= 1.0:
        return None
    scaled = np.sort(distribution.stage("temperature"))[::-1]
    return distribution.top_k, distribution.top_p, scaled


def _flat_told(distribution) -> tuple[str, ...]:
    """On a flat distribution a fixed k cuts tokens that top-p keeps: how many, and how much probability."""
    fixed = _fixed_k(distribution)
    if fixed is None:
        return ()
    k, p, scaled = fixed
    nucleus, cut = _nucleus(distribution), float(scaled[k:].sum())
    if nucleus > k:
        return (
            f"Top-k = {k} cuts {100 * cut:.1f}% of the probability here: {nucleus - k:,} of the {nucleus:,} tokens "
            f"top-p = {p:g} keeps lie past rank {k}.",
        )
    return (f"Here top-p = {p:g} keeps {nucleus:,} tokens, no more than top-k = {k}: the fixed k cuts none of them.",)


def _peaky_told(distribution) -> tuple[str, ...]:
    """On a peaky distribution a fixed k keeps tokens far less likely than the likeliest: how many, how unlikely."""
    fixed = _fixed_k(distribution)
    if fixed is None:
        return ()
    k, _, scaled = fixed
    floor = scaled[0] * JUNK  # what min-p = JUNK would cut
    junk = scaled[:k][scaled[:k] < floor]
    if len(junk):
        return (
            f"Top-k = {k} keeps {len(junk)} tokens here under 1/{1 / JUNK:.0f} of the likeliest's "
            f"{100 * float(scaled[0]):.1f}% (each under {100 * float(floor):.2f}%, {100 * float(junk.sum()):.1f}% "
            "together).",
        )
    return (f"Here each of the {k} tokens top-k = {k} keeps has at least 1/{1 / JUNK:.0f} of the likeliest's share.",)


def _sampling_against(trace) -> tuple[str, ...]:
    return (
        "Lecture: max_new_tokens 40 with top_k 50; then top_p 0.92 with top_k 0",
        f"This model, seed {trace.settings.seed}: log-probability {float(trace.sequence_logprobs[0]):.2f} over "
        f"{len(trace.generated_tokens[0])} tokens",
    )


def _cache_against(trace) -> tuple[str, ...]:
    """The passes counted from the rows the slide draws (the decoder's query rows at the last step)."""
    prompt, fed = trace.prompt_length, len(trace.attention["decoder"].query_tokens) - trace.prompt_length
    generated = len(trace.generated_tokens[0])
    return (
        "Primer: attention is computed incrementally, the previous keys and values cached",
        f"Here: the prompt's {prompt} tokens in one pass (the {prompt} rows above the line) chose the first of "
        f"{generated} new tokens; then one pass of one token for each of the {fed} fed back (the {fed} rows below "
        f"the line). The last new token is never fed back.",
    )


def _cache_size_against(trace) -> tuple[str, ...]:
    stack = trace.decoder
    layers, heads, size = stack.num_layers, int(stack.kv_heads.max()), int(stack.head_dim.max())
    return (
        "Primer: the keys and values of earlier tokens are kept, so each step only adds the new token's",
        f"Here: {layers} layers × 2 × {heads} KV heads × {size} numbers × "
        f"{trace.bytes_per_token / (layers * 2 * heads * size):.0f} bytes ({trace.dtype}) = "
        f"{trace.bytes_per_token:,.0f} bytes per token, {int(trace.total_bytes[-1]):,} after {trace.steps} steps",
    )


GREEDY_TABLE = views.decoding.Greedy(DEFAULT_DECODER, CHAPTER_PROMPT, _greedy(8))
STRATEGIES = (
    ("Greedy search", _greedy(32)),
    ("Beam search (5 beams)", _beam(5, 32)),
    ("Beam search, 2-gram ban", _beam(5, 32, ngram=2)),
)
SAMPLE_16 = (("strategy", "sample"), ("temperature", 0.8), ("seed", 0), ("max_new_tokens", 16), ("top_n", 5))
SAMPLE = (("strategy", "sample"), ("temperature", 0.8), ("top_k", 50), ("seed", 0), ("max_new_tokens", 32))
TOP_K, TOP_P = 50, 0.9  # the fixed k the flat and peaky slides weigh against top-p
JUNK = 0.01  # a token under this share of the likeliest's probability is junk (what min-p = 0.01 cuts)

GENERATION = Deck(
    "generation",
    "Text generation",
    (
        Slide(
            "One token at a time",
            GREEDY_TABLE,
            ("Each step: a distribution over the whole vocabulary.", "The boxed token is the one taken."),
            "A language model gives p(next token | tokens so far). Generating is a loop: pick a token, append "
            "it, run again. Greedy search always picks the likeliest.",
            (18,),
            against=_greedy_table_against,
            question=Question(
                "Which token will greedy search take first after “Transformers are the”?",
                _first_choices,
                _first_chosen,
                _first_why,
                shares=lambda trace: [prob for _, prob in _candidates(trace.steps[0])],
            ),
            chapter_model="gpt2-xl",
        ),
        Slide(
            "The chain rule",
            views.decoding.ChainRule(DEFAULT_DECODER, CHAPTER_PROMPT, _greedy(8)),
            ("p(text) is the product of each token's probability.", "In logs: a sum, one term per step."),
            "p(y | x) = Π p(y_t | y_<t, x): one forward pass per generated token, and the sequence's "
            "log-probability sums the generated tokens' log-probabilities only (not the prompt's).",
            (27,),
            against=_chain_rule_against,
        ),
        Slide(
            "Why log-probabilities",
            views.decoding.Products(DEFAULT_DECODER, CHAPTER_PROMPT, _greedy(8)),
            ("Left: the product of the probabilities so far.", "Right: the sum of their logs."),
            "Multiply a thousand probabilities of one half and you are near the smallest float64; add their logs "
            "and you get −709.78, a plain number.",
            (21,),
            against=_log_against,
            after_reveal=_products_told,
        ),
        Slide(
            "Greedy search repeats itself",
            # 32 steps: the bundled decoder's loop ("is a" three times) shows only by then; the cells' labels still
            # fit on a projector (tests/test_lecture_claims_generation.py checks them at 32 steps).
            views.decoding.Greedy(DEFAULT_DECODER, PROMPT, _greedy(32)),
            ("Look for a phrase that comes back.", "The boxed token is the one taken."),
            "Taking the likeliest token at each step is short-sighted: once a phrase has appeared, a model often "
            "finds it likelier to appear again, and greedy search has no way out.",
            (19,),
            against=_loop_against,
            after_reveal=_loop_told,
        ),
        Slide(
            "Beam search keeps several candidates",
            views.decoding.BeamTree(DEFAULT_DECODER, PROMPT, _beam(3, 8)),
            ("Each step keeps the best few partial texts.", "Pruned branches are grey."),
            "Beam search keeps num_beams partial texts, extends each by every token, and keeps the best by total "
            "log-probability: it can take a less likely token now for a likelier text later.",
            (22,),
        ),
        Slide(
            "Greedy, beam, and a ban",
            views.decoding.Comparison(DEFAULT_DECODER, PROMPT, STRATEGIES, where=("32 steps",)),
            ("Nearer 0 is likelier, not better.", "Three decodings of one prompt, 32 tokens each."),
            "Beam search looks for a likelier text than greedy search; banning repeated 2-grams stops the loops, "
            "usually at a cost in log-probability. The lines under the question give this model's numbers.",
            (20,),
            against=_comparison_against,
            question=Question(
                "Which finds the likelier continuation: greedy search or beam search with 5 beams?",
                lambda traces: ("greedy search", "beam search", "the same"),
                _likelier,
                _likelier_why,
            ),
            chapter_model="gpt2-xl",
            after_reveal=_ban_told,
        ),
        Slide(
            "Temperature",
            views.sampling.Temperatures(DEFAULT_DECODER, PROMPT, temperature=2.0),
            ("Divide the logits by T before the softmax.", "The bars: the likeliest tokens at each T."),
            "Temperature rescales the logits: at low T the likeliest tokens take nearly everything; at high T "
            "unlikely tokens get drawn and the text falls apart.",
            (23,),
            against=_temperature_against,
            question=Question(
                "At T = 2, what happens to the likeliest token's probability?",
                lambda logits: ("it rises", "it falls", "it stays"),
                _temperature_answer,
                _temperature_why,
            ),
            after_reveal=_temperature_told,
        ),
        Slide(
            "Most tokens are very unlikely",
            views.sampling.Distribution(DEFAULT_DECODER, PROMPT, top_k=50, top_p=0.9),
            ("Left: how many tokens have each probability (log scale).", "Right: the cumulative probability."),
            "In a trained model a small share of the vocabulary holds nearly all the probability; the long tail of "
            "tiny probabilities adds up, which is why pure sampling sometimes draws nonsense.",
            (24,),
            against=_histogram_against,
            after_reveal=_held_told,
        ),
        Slide(
            "Top-k and top-p",
            views.sampling.Stages(DEFAULT_DECODER, PROMPT, top_k=50, top_p=0.9),
            ("Top-k keeps the k likeliest tokens.", "Top-p keeps the fewest whose probabilities sum to p."),
            "Both cut the tail before sampling. A fixed k is too many for a confident model and too few for an "
            "unsure one; top-p adapts to the shape of the distribution.",
            (25,),
            against=_top_p_against,
            question=Question(
                "After top-k = 50, how many tokens will top-p = 0.9 keep?",
                _kept_choices,
                lambda distribution: str(_kept(distribution)),
                _top_p_why,
            ),
        ),
        Slide(
            "A flat distribution",
            views.sampling.Distribution(DEFAULT_DECODER, FLAT, top_k=TOP_K, top_p=TOP_P),
            (f"The upright line: top-k = {TOP_K}; the level line: top-p = {TOP_P:g}.", "Which cut keeps more here?"),
            "When many continuations are plausible (any colour), the probability spreads thinly over many tokens, "
            "and a fixed k can cut tokens as likely as those it keeps: the line under the figure says how much.",
            (26,),
            against=_flat_against,
            after_reveal=_flat_told,
        ),
        Slide(
            "A peaky distribution",
            views.sampling.Distribution(DEFAULT_DECODER, PEAKY, top_k=TOP_K, top_p=TOP_P),
            (f"The upright line: top-k = {TOP_K}; the level line: top-p = {TOP_P:g}.", "Which cut keeps more here?"),
            "When few continuations fit (the lecture's light was on, or off), the probability piles onto them, and a "
            "fixed k keeps tokens far less likely beside them: the line under the figure counts them for this model.",
            (26,),
            against=_peaky_against,
            after_reveal=_peaky_told,
        ),
        Slide(
            "Sampling, seeded",
            views.decoding.Sampled(DEFAULT_DECODER, PROMPT, SAMPLE),
            ("Each step draws a token at random from the cut distribution.", "A seed makes the draw repeatable."),
            "Sampling trades likelihood for variety. Seeded, every draw is repeatable: the same seed gives the "
            "same text, here and in generate().",
            (25,),
            against=_sampling_against,
        ),
        Slide(
            "Which strategy is best?",
            views.decoding.Comparison(
                DEFAULT_DECODER,
                PROMPT,
                (
                    ("Greedy search", _greedy(16)),
                    ("Beam search (4 beams)", _beam(4, 16)),
                    ("Sampling (T = 0.8, seed 0)", SAMPLE_16),
                ),
                where=("16 steps",),
            ),
            ("Compare the texts, not only the numbers.", "There is no single best method."),
            "Greedy and beam search suit tasks with one right answer (translation, summaries); sampling suits open "
            "writing. The likeliest text is often not the best one.",
            ("which decoding method is best",),
            question=Question(
                "Which of the three will give the likeliest continuation?",
                lambda traces: tuple(traces),
                _likeliest,
                _likeliest_why,
            ),
        ),
        Slide(
            "The KV cache",
            views.decoding.GenerationAttention(DEFAULT_DECODER, PROMPT, _greedy(8), step=7),
            ("Each new row attends to every earlier token.", "Earlier keys and values are kept, not recomputed."),
            "At each step only the newest token runs through the model; its query meets the cached keys and "
            "values of every token before it. That is why generation costs one small pass per token.",
            ("the KV cache",),
            against=_cache_against,
        ),
        Slide(
            "What the cache holds",
            views.kv_cache.CacheSize(DEFAULT_DECODER, PROMPT, 8),
            ("Per layer: one key and one value per KV head, per token.", "Each new token adds the same bytes."),
            "The cache grows linearly with the text: layers × 2 × KV heads × head size × bytes per number, for "
            "every token. Models with grouped KV heads let several query heads share one key and value, and keep "
            "less. Without the cache every step would run the whole prefix again.",
            ("the KV cache",),
            against=_cache_size_against,
        ),
    ),
)
