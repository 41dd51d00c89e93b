"""Beam search one step at a time, as transformers 5's ``_beam_search`` does it, and the tree of every candidate.

``BeamSearch`` holds generate()'s state for a batch of one and does its four moves, each a method named
after the helper of ``transformers.generation.utils`` it mirrors:

- ``expand`` (``_get_top_k_continuations``): every running beam's score plus each next token's processed
  log-probability, and the top K = max(2, 1 + number of end tokens) x num_beams of all of them. K is larger
  than num_beams so that num_beams candidates can run on even when some of the best ones end here.
- ``select_running`` (``_get_running_beams_for_next_iteration``): the best num_beams candidates that did not
  end become the running beams.
- ``finalize_hypotheses`` (``_update_finished_beams``): candidates that ended, among the first num_beams,
  enter the finished pool if their length-normalised score beats one already there.
- ``advance`` (``_check_early_stop_heuristic``) and ``should_stop``: can a running beam still beat the worst
  finished hypothesis? If not, or if every slot is filled with ``early_stopping=True``, the search ends.

The tensors keep generate()'s leading batch axis (always 1 here) so that each line can be read against
transformers' source. ``BeamTree`` turns each step into ``BeamNode`` records: generate() keeps only the
returned hypotheses, the tree keeps every candidate with what became of it.
"""

from __future__ import annotations

import dataclasses

import torch

from explorer.data.decoding import FINISHED, PRUNED, RUNNING, BeamNode

LOST = -1.0e9  # the score generate() gives candidates that can no longer win


@dataclasses.dataclass(frozen=True)
class Candidates:
    """One step's top-K continuations, best first (each [1, K]; ``sequences`` [1, K, max_length])."""

    scores: torch.Tensor  # cumulative processed log-probability
    parents: torch.Tensor  # the running beam each extends
    tokens: torch.Tensor  # the token each appends
    sequences: torch.Tensor  # the parent's ids with the token written at the current length
    ended: torch.Tensor  # bool: the token ends the sequence, or the sequence reached max_length


@dataclasses.dataclass(frozen=True)
class PoolUpdate:
    """What ``finalize_hypotheses`` did: which of (old pool + candidates) now fill the pool, and at what score."""

    kept: list[int]  # [beam] indices into old pool slots (< num_beams) followed by the K candidates
    normalized: torch.Tensor  # [1, K] each candidate's length-normalised score (LOST where it could not enter)


class BeamSearch:
    """generate()'s beam search state: the running beams, the finished pool, and the stopping heuristic.

    running          [1, beam, max_length] ids (filled past ``length``)
    running_scores   [1, beam] cumulative processed log-probability of each running beam
    pool_sequences   [1, beam, max_length] finished hypotheses, best first
    pool_scores      [1, beam] their length-normalised scores (LOST for an empty slot)
    finished         [1, beam] bool: the slot holds a finished hypothesis
    improvable       [1, 1] bool: a running beam can still beat the pool (the early-stop heuristic)
    """

    def __init__(self, ids: torch.Tensor, *, eos: torch.Tensor, fill: int, max_length: int, settings):
        beams, self.length = ids.shape
        self.num_beams, self.eos, self.max_length = beams, eos, max_length
        # Generated length is counted after the prompt (the length penalty divides by it).
        self.prompt_length = self.length
        self.length_penalty, self.early_stopping = settings.length_penalty, settings.early_stopping
        self.keep = max(2, 1 + len(eos)) * beams
        device = ids.device
        # Only the first num_beams of the K candidates may enter the pool; the others are spares for running.
        self.top_beams = torch.arange(self.keep, device=device) < beams
        self.running = torch.full((1, beams, max_length), fill, dtype=torch.long, device=device)
        self.running[:, :, : self.length] = ids[None]
        self.pool_sequences = self.running.clone()
        # Every row holds the same prompt: LOST on all but the first, so that the first step expands it once.
        self.running_scores = torch.zeros((1, beams), dtype=torch.float, device=device)
        self.running_scores[:, 1:] = LOST
        self.pool_scores = torch.full((1, beams), LOST, dtype=torch.float, device=device)
        self.finished = torch.zeros((1, beams), dtype=torch.bool, device=device)
        self.improvable = torch.ones((1, 1), dtype=torch.bool, device=device)

    @property
    def sequences(self) -> torch.Tensor:
        """[beam, length] the running beams' ids so far."""
        return self.running[0, :, : self.length]

    @property
    def live(self) -> torch.Tensor:
        """[beam] bool: rows that hold a real beam (not a placeholder scored LOST)."""
        return self.running_scores[0] > LOST / 2

    def expand(self, processed: torch.Tensor) -> Candidates:
        """Score every continuation of every beam ([beam, vocab] processed log-probs) and keep the top K."""
        vocab = processed.shape[-1]
        accumulated = (processed[None] + self.running_scores[:, :, None]).reshape(1, -1)
        scores, indices = torch.topk(accumulated, k=self.keep)
        parents, tokens = indices // vocab, indices % vocab
        sequences = torch.take_along_dim(self.running, parents[:, :, None], dim=1)
        sequences[:, :, self.length] = tokens
        return Candidates(scores, parents, tokens, sequences, self._ended(tokens))

    def _ended(self, tokens: torch.Tensor) -> torch.Tensor:
        """[1, K] bool: the candidate is an end-of-sequence token, or fills the sequence to max_length."""
        hits = torch.isin(tokens, self.eos) if len(self.eos) else torch.zeros_like(tokens, dtype=torch.bool)
        return hits | (self.length + 1 >= self.max_length)

    def select_running(self, found: Candidates) -> torch.Tensor:
        """The best num_beams candidates that did not end run on; returns their indices [1, beam] among the K."""
        alive_scores = found.scores + found.ended.to(torch.float32) * LOST
        chosen = torch.topk(alive_scores, k=self.num_beams)[1]
        self.running = torch.take_along_dim(found.sequences, chosen[:, :, None], dim=1)
        self.running_scores = torch.take_along_dim(alive_scores, chosen, dim=1)
        return chosen

    def finalize_hypotheses(self, found: Candidates) -> PoolUpdate:
        """Merge the candidates that just ended into the finished pool, best num_beams by normalised score."""
        just_finished = found.ended & self.top_beams[None, :]
        normalized = self._entry_scores(found.scores, just_finished)
        merged_sequences = torch.cat([self.pool_sequences, found.sequences], dim=1)
        merged_scores = torch.cat([self.pool_scores, normalized], dim=1)
        merged_finished = torch.cat([self.finished, just_finished], dim=1)
        best = torch.topk(merged_scores, k=self.num_beams)[1]
        self.pool_sequences = torch.take_along_dim(merged_sequences, best[:, :, None], dim=1)
        self.pool_scores = torch.take_along_dim(merged_scores, best, dim=1)
        self.finished = torch.take_along_dim(merged_finished, best, dim=1)
        return PoolUpdate(kept=best[0].tolist(), normalized=normalized)

    def _entry_scores(self, scores: torch.Tensor, just_finished: torch.Tensor) -> torch.Tensor:
        """[1, K] the score each candidate would enter the pool with; LOST where it may not enter: it is still
        running, the pool is full under ``early_stopping=True``, or no running beam can improve on the pool."""
        normalized = scores / ((self.length + 1 - self.prompt_length) ** self.length_penalty)
        full = torch.all(self.finished, dim=-1, keepdim=True) & (self.early_stopping is True)
        normalized = normalized + full.to(torch.float32) * LOST
        normalized = normalized + (~self.improvable).to(torch.float32) * LOST
        return normalized + (~just_finished) * LOST

    def advance(self) -> None:
        """One token longer; then generate()'s early-stop heuristic: can the best running beam, at the best
        length it could reach, still beat the worst finished hypothesis?"""
        self.length += 1
        if self.early_stopping == "never" and self.length_penalty > 0.0:
            best_length = self.max_length - self.prompt_length  # a positive penalty favours longer hypotheses
        else:
            best_length = self.length - self.prompt_length
        best_running = self.running_scores[:, :1] / (best_length**self.length_penalty)
        worst_finished = torch.where(self.finished, torch.min(self.pool_scores, dim=1, keepdim=True)[0], LOST)
        self.improvable = self.improvable & torch.any(best_running > worst_finished, dim=-1, keepdim=True)

    def should_stop(self, found: Candidates) -> bool:
        """No beam can improve, or the pool is full with ``early_stopping=True``, or every candidate ended."""
        pool_full = bool(torch.all(self.finished)) and self.early_stopping is True
        return not bool(torch.any(self.improvable)) or pool_full or bool(torch.all(found.ended))


class BeamTree:
    """Every candidate a beam search considered, as ``BeamNode`` records linked to their parents.

    Node 0 is the prompt. ``running`` names the node each running beam continues; ``pool`` the node in each
    finished-pool slot (None: empty); ``history`` the pool's nodes after each step, best first.
    """

    def __init__(self, num_beams: int, label):
        self.label = label  # token id -> readable label
        self.nodes = [BeamNode(0, None, -1, -1, "", 0.0, 0.0, RUNNING)]
        self.running: list[int] = [0] * num_beams
        self.pool: list[int | None] = [None] * num_beams
        self.history: list[tuple[int, ...]] = []

    def force(self, step: int, token: int, raw: torch.Tensor) -> None:
        """A forced token (``raw`` [vocab]: the model's log-probabilities before it): the only node of its step,
        continued by every beam. Its score is 0, as the search counts scores from after the forced tokens."""
        node = BeamNode(
            id=len(self.nodes),
            parent=self.running[0],
            step=step,
            token_id=token,
            token=self.label(token),
            token_logprob=float(raw[token]),
            score=0.0,
            status=RUNNING,
            rank=int((raw > raw[token]).sum()),
            forced=True,
        )
        self.nodes.append(node)
        self.running = [node.id] * len(self.running)
        self.history.append(())  # nothing can finish at a forced step (forced tokens never end a sequence)

    def grow(self, step: int, found: Candidates, chosen: torch.Tensor, update: PoolUpdate, search: BeamSearch, raw):
        """Record the step's K candidates (``raw`` [beam, vocab]: the model's log-probabilities) with their status:
        running on, entered the finished pool, or pruned."""
        first = len(self.nodes)
        num_beams = len(self.pool)
        # The pool's slots after the update, as node ids: an old slot keeps its node, a candidate brings its own.
        slots = [self.pool[i] if i < num_beams else first + (i - num_beams) for i in update.kept]
        filled = [score > LOST / 2 for score in search.pool_scores[0].tolist()]
        entered = {node for node, full in zip(slots, filled, strict=True) if full} - set(self.pool) - {None}
        runs_on = {int(k) for k in chosen[0].tolist() if not bool(found.ended[0, k])}
        for k in range(len(found.tokens[0])):
            status = RUNNING if k in runs_on else FINISHED if first + k in entered else PRUNED
            self.nodes.append(self._node(step, k, status, first + k in entered, found, update, raw))
        self.pool = [node if full else None for node, full in zip(slots, filled, strict=True)]
        self.history.append(tuple(node for node in self.pool if node is not None))
        self.running = [first + int(k) for k in chosen[0].tolist()]

    def _node(self, step, k, status, entered: bool, found: Candidates, update: PoolUpdate, raw) -> BeamNode:
        parent_row, token = int(found.parents[0, k]), int(found.tokens[0, k])
        return BeamNode(
            id=len(self.nodes),
            parent=self.running[parent_row],
            step=step,
            token_id=token,
            token=self.label(token),
            token_logprob=float(raw[parent_row, token]),
            score=float(found.scores[0, k]),
            status=status,
            normalized_score=float(update.normalized[0, k]) if entered else None,
            pool_step=step if entered else None,
            rank=k,
        )
