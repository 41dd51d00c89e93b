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
    """The finished pool after ``upto_step``, best first: each hypothesis, when it finished, its scores."""
    if not trace.pool_history:
        return []
    nodes = {node.id: node for node in trace.tree}
    rows = []
    for place, node_id in enumerate(trace.pool_history[min(upto_step, len(trace.pool_history) - 1)], start=1):
        node = nodes[node_id]
        path = path_to(nodes, node_id)
        text = "".join(nodes[i].token for i in path)
        rows.append(
            {
                "place": place,
                "continuation": text if tokenizer is None else tokenizer.decode([nodes[i].token_id for i in path]),
                "finished at step": node.step + 1,
                "tokens": len(path),
                "score (sum of log-probs)": round(node.score, 4),
                "length-normalised score": round(float(node.normalized_score), 4),
                "returned": node.status == RETURNED,
            }
        )
    return rows


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


def bans_table(trace: DecodeTrace) -> list[dict]:
    """Each token a no-repeat n-gram ban removed, with the n-gram it would have repeated and how much the model
    wanted it (its rank in the model's own distribution: 1 = its favourite)."""
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
    ]
