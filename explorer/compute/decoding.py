"""Pure functions on decoding traces: the decoding pages' tables, the beam tree's arithmetic, repetition checks.

Everything here reads ``explorer.data.decoding`` records and returns plain Python values; nothing runs a model.

- Tables (lists of row dicts): ``greedy_table``, ``forced_table``, ``sampled_table``, ``pool_table``,
  ``bans_table``; token labels in them go through ``mark_leading_space``.
- The beam tree: ``tree_positions`` (where each node is drawn), ``path_to`` (a node's ids from the first new token,
  also used by ``explorer.models.decoding`` to mark returned paths), ``tree_at`` (the search as it stood after a
  step) and ``status_counts``.
- Repetition and sanity: ``repeated_ngram``, ``repeats``, ``looks_untrained``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from explorer.data.decoding import FINISHED, PRUNED, RETURNED, RUNNING, BeamNode, DecodeTrace
from explorer.labels import visible


def mark_leading_space(token: str) -> str:
    """A token label with its leading space shown (``␣``), so word starts stay visible in tables (not to be confused
    with ``explorer.labels.visible``, which every label has already been through)."""
    return "␣" + token[1:] if token.startswith(" ") else token


def greedy_table(trace: DecodeTrace, tokenizer=None, *, row: int = 0, context_chars: int = 60) -> list[dict]:
    """The chapter's greedy table: one row per step, the input so far, then the top candidates with their
    probabilities (after the processors), the entropy, and the token chosen."""
    rows = []
    for step in trace.steps:
        record = {"step": step.step + 1, "input": _input_text(trace, step, row, tokenizer, context_chars)}
        for rank, (token, prob) in enumerate(
            zip(step.candidate_tokens[row], step.candidate_probs[row], strict=True), start=1
        ):
            record[f"choice {rank}"] = f"{mark_leading_space(token)} ({100 * float(prob):.2f}%)"
        # A forced token may lie outside the candidates: its label then comes from the sequence.
        record["chosen"] = mark_leading_space(_draw_label(trace, step, row, int(step.chosen_ids[row])))
        record["entropy (nats)"] = round(float(step.entropy[row]), 3)
        rows.append(record)
    return rows


def forced_table(trace: DecodeTrace, *, row: int = 0) -> list[dict]:
    """ "The model wanted X, we forced Y": at each forced step, the forced token with its rank and probability
    under the model (rank 1 = the model's favourite), beside the first choice among the candidates."""
    rows = []
    for step in trace.steps[: trace.num_forced]:
        rows.append(
            {
                "step": step.step + 1,
                "forced": mark_leading_space(_draw_label(trace, step, row, int(step.chosen_ids[row]))),
                "model's rank": int(step.forced_rank[row]) + 1,
                "model's probability": float(np.exp(step.forced_logprob[row])),
                "first choice": mark_leading_space(step.candidate_tokens[row][0]),
                "its probability": float(np.exp(step.candidate_logprobs[row, 0])),
            }
        )
    return rows


def _label(trace, ids, tokens, token_id: int) -> str:
    for candidate, token in zip(ids.tolist(), tokens, strict=True):
        if candidate == token_id:
            return token
    return f"<id {token_id}>"


def _input_text(trace: DecodeTrace, step, row: int, tokenizer, limit: int) -> str:
    prefix = step.prefix_ids[row]
    if tokenizer is not None:
        text = tokenizer.decode(prefix[trace.prompt_length :] if trace.is_seq2seq else prefix, skip_special_tokens=True)
        if trace.is_seq2seq:
            text = f"{trace.prompt} → {text}"
    else:
        text = " ".join(str(i) for i in prefix.tolist())
    # One line, as the token columns show it: a line break is "↵" (as in the chosen token), other runs of
    # whitespace one space.
    text = "↵".join(" ".join(line.split()) for line in text.replace("\r\n", "\n").split("\n"))
    text = visible(text)
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def sampled_table(trace: DecodeTrace, *, row: int = 0) -> list[dict]:
    """For a sampled sequence: each draw, its probability after the processors and its rank among the candidates.

    ``rank`` is 1 for the most likely token; a draw outside the recorded top candidates shows its rank as
    "> n" (the trace keeps the top ``n`` only).
    """
    rows = []
    for step in trace.steps:
        chosen = int(step.chosen_ids[row])
        ids = step.candidate_ids[row].tolist()
        if chosen in ids:
            rank = ids.index(chosen)
            prob, logprob, rank_text = (
                float(step.candidate_probs[row, rank]),
                float(step.candidate_logprobs[row, rank]),
                str(rank + 1),
            )
        else:
            prob, logprob, rank_text = float("nan"), float("nan"), f"> {len(ids)}"
        rows.append(
            {
                "step": step.step + 1,
                "drawn": mark_leading_space(_draw_label(trace, step, row, chosen)),
                "rank": rank_text,
                "probability": prob,
                "model's probability": float(np.exp(logprob)) if np.isfinite(logprob) else float("nan"),
                "entropy (nats)": round(float(step.entropy[row]), 3),
                "most likely": mark_leading_space(step.candidate_tokens[row][0]),
            }
        )
    return rows


def _draw_label(trace: DecodeTrace, step, row: int, token_id: int) -> str:
    sequence = trace.sequences[row] if row < len(trace.sequences) else None
    position = len(step.prefix_ids[row])
    if sequence is not None and position < len(sequence) and int(sequence[position]) == token_id:
        generated = position - trace.prompt_length
        if 0 <= generated < len(trace.generated_tokens[row]):
            return trace.generated_tokens[row][generated]
    return _label(trace, step.candidate_ids[row], step.candidate_tokens[row], token_id)


def repeated_ngram(tokens: tuple[str, ...], *, size: int = 2, min_repeats: int = 2) -> tuple[str, ...] | None:
    """The most repeated n-gram of a generated text when it repeats (greedy search's loop), else None."""
    counts: dict[tuple[str, ...], int] = defaultdict(int)
    for i in range(len(tokens) - size + 1):
        counts[tuple(tokens[i : i + size])] += 1
    if not counts:
        return None
    ngram, count = max(counts.items(), key=lambda item: item[1])
    return ngram if count >= min_repeats + 1 else None


def repeats(tokens: tuple[str, ...], *, size: int = 2) -> int:
    """How many of the text's n-grams repeat one that came before (0: no n-gram occurs twice)."""
    grams = [tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1)]
    return len(grams) - len(set(grams))


def looks_untrained(trace: DecodeTrace, vocab_size: int, *, fraction: float = 0.9) -> bool:
    """True when the model's raw next-token distributions are nearly uniform (a random, untrained model)."""
    if not trace.steps or vocab_size < 2:
        return False
    mean_entropy = float(np.mean([step.raw_entropy.mean() for step in trace.steps]))
    return mean_entropy >= fraction * np.log(vocab_size)


# -- the beam tree --------------------------------------------------------------------------------------------


def tree_positions(tree: tuple[BeamNode, ...], upto_step: int | None = None) -> dict[int, tuple[int, float]]:
    """{node id: (x = step, y = position)}: each step's candidates stacked in the order of their parents'
    positions, then their rank, so that branches rarely cross. The prompt (node 0) sits at step -1."""
    positions = {0: (-1, 0.0)}
    by_step: dict[int, list[BeamNode]] = defaultdict(list)
    for node in tree[1:]:
        if upto_step is None or node.step <= upto_step:
            by_step[node.step].append(node)
    for step in sorted(by_step):
        column = sorted(by_step[step], key=lambda n: (positions[n.parent][1], n.rank))
        middle = (len(column) - 1) / 2
        for index, node in enumerate(column):
            positions[node.id] = (step, index - middle)
    return positions


def pool_table(trace: DecodeTrace, upto_step: int, tokenizer=None) -> list[dict]:
    """The finished pool after ``upto_step``, best first: each hypothesis, when it finished, its scores.

    As in generate() given the prompt followed by a branch's forced tokens, the search scores only the tokens
    it chose ("scored tokens", the end token included): "score" is their summed log-probability and the pool
    ranks by "normalised score" = score / scored tokens ** length_penalty. A branch's rows also give the forced
    tokens and the log-probability of the whole continuation, forced tokens included."""
    if not trace.pool_history:
        return []
    nodes = {node.id: node for node in trace.tree}
    forced = trace.num_forced
    rows = []
    for place, node_id in enumerate(trace.pool_history[min(upto_step, len(trace.pool_history) - 1)], start=1):
        node = nodes[node_id]
        path = path_to(nodes, node_id)
        text = "".join(nodes[i].token for i in path)
        row = {
            "place": place,
            "continuation": text if tokenizer is None else tokenizer.decode([nodes[i].token_id for i in path]),
            "finished at step": node.step + 1,
        }
        if forced:
            row["forced tokens"] = forced
        row |= {
            "scored tokens": len(path) - forced,
            "score": round(node.score, 4),
            "normalised score": round(float(node.normalized_score), 4),
        }
        if forced:
            row["log-prob., forced included"] = round(sum(nodes[i].token_logprob for i in path), 4)
        rows.append(row | {"returned": node.status == RETURNED})
    return rows


def comparison_caption(
    greedy: tuple[float, int], beam: tuple[float, int], banned: tuple[float, int], *, ban: int, prompt_counts: bool
) -> str:
    """The chapter's comparison in words, written from its own numbers: (log-probability, repeated ``ban``-grams
    in the generated text) of greedy search, beam search, and beam search banning repeated ``ban``-grams,
    log-probabilities compared as shown (2 decimals). ``prompt_counts``: the ban also forbids the prompt's
    n-grams (a decoder-only model's prompt is part of the text the ban reads)."""
    (g, repeats_g), (b, repeats_b), (n, repeats_n) = [(round(lp, 2), count) for lp, count in (greedy, beam, banned)]
    return " ".join(
        (
            _beam_against_greedy(g, b),
            _loops(repeats_g, repeats_b, ban),
            _ban_effect(b, n, repeats_b, repeats_n, ban, prompt_counts),
            "Greedy search and the first beam search use no ban.",
        )
    )


def _beam_against_greedy(greedy: float, beam: float) -> str:
    if beam > greedy:
        return (
            f"Beam search found a likelier text than greedy search ({beam:.2f} against {greedy:.2f}; the "
            "log-probability is the sum of the text's token log-probabilities)."
        )
    if beam < greedy:
        return f"Here beam search's text is less likely than greedy search's ({beam:.2f} against {greedy:.2f})."
    return f"Beam search and greedy search reach the same log-probability ({beam:.2f})."


def _loops(greedy: int, beam: int, ban: int) -> str:
    if not greedy and not beam:
        return f"Neither repeats a {ban}-gram."
    return f"Without a ban, greedy search repeats {greedy} {ban}-gram{'s' * (greedy != 1)} and beam search {beam}."


def _ban_effect(beam: float, banned: float, repeats: int, left: int, ban: int, prompt_counts: bool) -> str:
    what = f"Banning repeated {ban}-grams (no_repeat_ngram_size={ban})"
    if repeats:
        outcome = f"leaves {left} of beam search's {repeats}"
    else:
        outcome = "has no repeat to stop" + (f" but also forbids the prompt's {ban}-grams" if prompt_counts else "")
    if banned < beam:
        change = f"and costs {beam - banned:.2f} in log-probability ({banned:.2f} against {beam:.2f})"
    elif banned > beam:
        change = (
            f"and even finds a likelier text ({banned:.2f} against {beam:.2f}): beam search is not exhaustive, and "
            "the ban led it down a path it had left"
        )
    else:
        change = f"and the log-probability stays {beam:.2f}"
    return f"{what} {outcome}, {change}."


def pool_caption(trace: DecodeTrace) -> str:
    """What ``pool_table``'s scores count, in words, with this search's length penalty and forced tokens."""
    penalty = trace.settings.length_penalty
    text = (
        "Score: the summed log-probability of the scored tokens (the ones the search chose, the end token "
        f"included). Normalised score: score ÷ scored tokens^{penalty:g} (the length penalty), what the pool is "
        "ranked by and what generate() returns as sequences_scores."
    )
    if trace.num_forced:
        forced = trace.num_forced
        text += (
            f" The branch's {forced} forced token{'s are' if forced > 1 else ' is'} the search's input, as for "
            "generate() given the prompt followed by them, and not scored; the last column adds their "
            "log-probabilities (the branch's log-probability above, for the returned text)."
        )
    return text


def path_to(nodes: Mapping[int, BeamNode] | Sequence[BeamNode], node_id: int) -> list[int]:
    """Node ids from the first generated token down to ``node_id``; ``nodes`` maps an id to its node (a dict, or
    the tree itself: a node's id is its index)."""
    path = []
    while node_id not in (None, 0):
        path.append(node_id)
        node_id = nodes[node_id].parent
    return path[::-1]


def tree_at(tree: tuple[BeamNode, ...], upto_step: int | None = None) -> tuple[BeamNode, ...]:
    """The search as it stood after ``upto_step``: only the candidates of steps 0..upto_step, each with the
    status it had then. Which hypotheses are returned is only known at the end: before it, a returned path's
    nodes were running beams (or, for one that had finished, a hypothesis in the pool)."""
    last = max((node.step for node in tree), default=-1)
    if upto_step is None or upto_step >= last:
        return tree
    shown = []
    for node in tree:
        if node.step > upto_step:
            continue
        if node.status == RETURNED:
            in_pool = node.pool_step is not None and node.pool_step <= upto_step
            node = replace(node, status=FINISHED if in_pool else RUNNING)
        shown.append(node)
    return tuple(shown)


def status_counts(tree: tuple[BeamNode, ...]) -> dict[str, int]:
    counts = {RUNNING: 0, PRUNED: 0, FINISHED: 0, RETURNED: 0}
    for node in tree[1:]:
        counts[node.status] += 1
    return counts


def bans_table(trace: DecodeTrace, upto_step: int | None = None) -> list[dict]:
    """Each token a no-repeat n-gram ban removed (up to ``upto_step``, 0-based, as the replay shows the search),
    with the n-gram it would have repeated and how much the model wanted it (its rank in the model's own
    distribution: 1 = its favourite)."""
    return [
        {
            "step": ban.step + 1,
            "beam": ban.row,
            "banned token": mark_leading_space(ban.token),
            "would repeat": " ".join(mark_leading_space(t) for t in ban.ngram),
            "model's probability": float(np.exp(ban.logprob)),
            "model's rank": ban.would_rank + 1,
        }
        for ban in trace.bans
        if upto_step is None or ban.step <= upto_step
    ]


def prefix_consistent(trace: DecodeTrace) -> bool:
    """Whether ``trace``'s first k steps are, for every k, exactly its decoding run to k new tokens (see
    ``first_steps``): a greedy search that recorded no attention and whose prompt the maximum did not cut."""
    # The only note a decoding makes is that its prompt was cut from the left to leave room for
    # max_new_tokens: a shorter maximum would keep more of it, so the prompt itself would differ.
    return trace.settings.strategy == "greedy" and trace.attention is None and not trace.notes


def first_steps(trace: DecodeTrace, steps: int, tokenizer) -> DecodeTrace:
    """The greedy decoding ``trace`` cut to its first ``steps`` new tokens: field for field what ``decode``
    returns when run to ``max_new_tokens=steps`` with the same settings, without running the model
    (``tokenizer`` writes the shorter texts). One decoding to a slider's maximum serves every shorter setting.

    Why this is exact: greedy search is prefix-consistent. Step t appends the argmax of the processors' output
    for the prefix so far (prompt, forced tokens, the t tokens chosen before), computed by the same forward
    passes whatever the maximum (one over the prompt and forced tokens, then one token at a time), and the only
    processors greedy search runs (repetition penalty, no-repeat n-gram ban) read nothing but the prefix. The
    maximum only decides when the loop stops, as does an end-of-sequence token: a decoding that ended before
    ``steps`` is the same for every longer maximum. Length-aware settings (length penalty, early stopping)
    belong to beam search, whose pruning and finished pool depend on the maximum: it is never cut, nor is
    sampling (several rows pad differently), nor a decoding whose prompt the maximum cut (``prefix_consistent``).
    """
    first = trace.num_forced + 1  # decode needs one step after the forced tokens
    if not prefix_consistent(trace) or not first <= steps <= trace.settings.max_new_tokens:
        raise ValueError(f"cannot cut this decoding to {steps} steps (see prefix_consistent)")
    kept = trace.steps[:steps]
    sequence = trace.sequences[0][: trace.prompt_length + steps]
    return replace(
        trace,
        settings=replace(trace.settings, max_new_tokens=steps),
        sequences=(sequence,),
        texts=(tokenizer.decode(sequence.tolist(), skip_special_tokens=True),),
        continuations=(tokenizer.decode(sequence[trace.prompt_length :].tolist(), skip_special_tokens=True),),
        generated_tokens=(trace.generated_tokens[0][:steps],),
        sequence_logprobs=np.array([_summed_logprob(kept)], dtype=np.float32),
        steps=kept,
        bans=tuple(ban for ban in trace.bans if ban.step < steps),
    )


def step_logprobs(trace: DecodeTrace) -> np.ndarray:
    """[step] float64: the raw log-probability of each generated token given the tokens before it (greedy search
    and forced steps; their sum is the trace's ``sequence_logprobs[0]``: the chain rule, in logs)."""
    return np.array([float(step.forced_logprob[0] if step.forced else _chosen_logprob(step)) for step in trace.steps])


def _summed_logprob(steps) -> float:
    """The raw log-probability of each step's token summed in float64 in step order, as ``decode`` sums it."""
    total = 0.0
    for step in steps:
        total += float(step.forced_logprob[0] if step.forced else _chosen_logprob(step))
    return total


def _chosen_logprob(step) -> float:
    """The greedy choice is the processed argmax: the first candidate (looked up, in case of a tie)."""
    found = np.flatnonzero(step.candidate_ids[0] == step.chosen_ids[0])
    if not len(found):
        raise ValueError(f"step {step.step}'s token is not among its recorded candidates")
    return step.candidate_logprobs[0, found[0]]
