"""The text generation deck: the chain rule, greedy search, beam search, temperature, top-k and top-p, sampling,
and the KV cache, each on the bundled decoder with the sources' numbers beside its own."""

from __future__ import annotations

import math

import numpy as np

from explorer import DEFAULT_DECODER, views
from explorer.compute.decoding import mark_leading_space, repeats
from explorer.compute.sampling import softmax
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


def _chosen_logprobs(trace) -> np.ndarray:
    """The raw log-probability of each token greedy search took (its first candidate)."""
    return np.array([float(step.candidate_logprobs[0, 0]) for step in trace.steps])


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


def _likelier(traces) -> str:
    greedy, beam = (float(trace.sequence_logprobs[0]) for trace in list(traces.values())[:2])
    return "beam search" if beam > greedy + 5e-3 else "greedy search" if greedy > beam + 5e-3 else "the same"


def _likeliest(traces) -> str:
    return max(traces, key=lambda label: float(traces[label].sequence_logprobs[0]))


# -- temperature, top-k, top-p --------------------------------------------------------------------------------


def _temperature_answer(logits) -> str:
    hot, plain = softmax(logits.logits / 2.0).max(), softmax(logits.logits).max()
    return "it falls" if hot < plain else "it rises"


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


def _kept(distribution) -> int:
    return int(distribution.kept[distribution.stages[-1][0]].sum())


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


def _sampling_against(trace) -> tuple[str, ...]:
    return (
        "Lecture: max_new_tokens 40 with top_k 50; then top_p 0.92 with top_k 0",
        f"This model, seed {trace.settings.seed}: log-probability {float(trace.sequence_logprobs[0]):.2f} over "
        f"{len(trace.generated_tokens[0])} tokens",
    )


def _cache_against(trace) -> tuple[str, ...]:
    generated = len(trace.generated_tokens[0])
    return (
        "Primer: attention is computed incrementally, the previous keys and values cached",
        f"Here: the prompt's {len(trace.prompt_ids)} tokens in one pass, then one pass of one token for each of the "
        f"{generated - 1} new tokens after the first",
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
                "Greedy search takes the first candidate, the one with the highest probability.",
                shares=lambda trace: [prob for _, prob in _candidates(trace.steps[0])],
            ),
            chapter_model="gpt2-xl",
        ),
        Slide(
            "The chain rule",
            GREEDY_TABLE,
            ("p(text) is the product of each token's probability.", "In logs: a sum, one term per step."),
            "p(y | x) = Π p(y_t | y_<t, x): one forward pass per generated token, and the sequence's "
            "log-probability sums the generated tokens' log-probabilities only (not the prompt's).",
            (27,),
            against=_chain_rule_against,
        ),
        Slide(
            "Why log-probabilities",
            GREEDY_TABLE,
            ("Products of probabilities shrink towards 0 fast.", "Sums of logs stay readable."),
            "Multiply a thousand probabilities of one half and you are near the smallest float64; add their logs "
            "and you get −709.78, a plain number.",
            (21,),
            against=_log_against,
        ),
        Slide(
            "Greedy search repeats itself",
            # 16 steps: two turns of the bundled decoder's loop, in cells wide enough to read on a projector.
            views.decoding.Greedy(DEFAULT_DECODER, PROMPT, _greedy(16)),
            ("Look for a phrase that comes back.", "Once a loop starts, it only gets likelier."),
            "Taking the likeliest token at each step is short-sighted: a phrase that has appeared becomes more "
            "likely to appear again, and greedy search has no way out.",
            (19,),
            against=_loop_against,
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
            ("Nearer 0 is likelier, not better.", "The n-gram ban costs likelihood, and stops the loops."),
            "Beam search finds a likelier text than greedy search; banning repeated 2-grams removes the loops at "
            "a cost in log-probability.",
            (20,),
            against=_comparison_against,
            question=Question(
                "Which finds the likelier continuation: greedy search or beam search with 5 beams?",
                lambda traces: ("greedy search", "beam search", "the same"),
                _likelier,
                "Beam search explores several paths, so it can find a text whose total log-probability is higher.",
            ),
            chapter_model="gpt2-xl",
        ),
        Slide(
            "Temperature",
            views.sampling.Temperatures(DEFAULT_DECODER, PROMPT, temperature=2.0),
            ("Divide the logits by T before the softmax.", "T < 1 sharpens, T > 1 flattens."),
            "Temperature rescales the logits: at low T the likeliest tokens take nearly everything; at high T "
            "unlikely tokens get drawn and the text falls apart.",
            (23,),
            against=_temperature_against,
            question=Question(
                "At T = 2, what happens to the likeliest token's probability?",
                lambda logits: ("it rises", "it falls"),
                _temperature_answer,
                "Dividing the logits by 2 halves the gaps between them, so the distribution flattens.",
            ),
        ),
        Slide(
            "Most tokens are very unlikely",
            views.sampling.Distribution(DEFAULT_DECODER, PROMPT, top_k=50, top_p=0.9),
            ("Left: how many tokens have each probability (log scale).", "Right: the cumulative probability."),
            "A few thousand tokens hold nearly all the probability; the long tail of tiny probabilities adds up, "
            "which is why pure sampling sometimes draws nonsense.",
            (24,),
            against=_histogram_against,
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
                "Top-p keeps the likeliest tokens until their probabilities add up to 0.9: few when one dominates.",
            ),
        ),
        Slide(
            "A flat distribution",
            views.sampling.Distribution(DEFAULT_DECODER, FLAT),
            ("Many tokens, each a little likely.", "A fixed k cuts good choices here."),
            "When many continuations are plausible (any colour), the probability spreads thinly over many tokens.",
            (26,),
            against=_flat_against,
        ),
        Slide(
            "A peaky distribution",
            views.sampling.Distribution(DEFAULT_DECODER, PEAKY),
            ("One token takes a large share.", "A fixed k keeps junk here."),
            "When few continuations fit (the lecture's light was on, or off), the probability piles onto them; "
            "top-p keeps just those.",
            (26,),
            against=_peaky_against,
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
                "Beam search searches for likelihood; sampling draws less likely tokens on purpose.",
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
