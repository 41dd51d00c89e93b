"""The data contract of decoding: what ``explorer.decode`` and ``explorer.next_token_distribution`` return.

Axis names, stated once and used in every shape below:

- ``step``: generation steps, 0 for the first new token.
- ``row``: the sequences a step works on: one for greedy search, ``num_return_sequences`` for sampling,
  the ``num_beams`` running beams for beam search.
- ``candidate``: the ``top_n`` most likely next tokens of one row, most likely first.
- ``vocab``: every token id of the tokenizer.
- ``sequence``: returned sequences, best first.

Log-probabilities are natural logs. "Raw" means the model's own ``log_softmax(logits)``; "processed"
means after transformers' logits processors (repetition penalty, n-gram ban, temperature, top-k,
top-p, min-p), exactly as ``generate()`` applies them. Every array is read-only and on the CPU.

Forced tokens (``DecodeSettings.force``): the first steps append given tokens instead of choosing; they
are recorded like any step (the model's own candidates, ``forced`` set, the forced token's rank and
log-probability under the model). Raw log-probabilities (``sequence_logprobs``, ``token_logprob``) count
them; beam search's scores do not: for the search the forced tokens are part of the prompt, as for
``generate()`` given the prompt followed by them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from explorer.data._display import Displayed
from explorer.data._freeze import freeze_arrays

STRATEGIES = ("greedy", "beam", "sample")
# Node statuses in a beam search tree.
RUNNING, PRUNED, FINISHED, RETURNED = "running", "pruned", "finished", "returned"


@dataclass(frozen=True)
class DecodeSettings:
    """Every setting that decides a decoding, with transformers' meaning (``seed`` is always set for sampling)."""

    strategy: str
    max_new_tokens: int = 8
    num_beams: int = 1
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    no_repeat_ngram_size: int = 0
    num_return_sequences: int = 1
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    top_n: int = 5
    # Heads zeroed in every forward pass, ((stack, layer, head), ...): generate() has no such setting; its
    # reference is a copy of the model whose output projection ignores those heads.
    ablate: tuple[tuple[str, int, int], ...] = ()
    force: tuple[int, ...] = ()  # token ids appended first (counted in max_new_tokens), then the strategy runs


@dataclass(frozen=True, eq=False)
class DecodeStep:
    """One generation step: what each running row saw and what was chosen.

    prefix_ids          tuple of [position] int arrays, one per row: the row's tokens before this step
                        (the prompt included for decoder-only models; the decoder's ids for seq2seq)
    candidate_ids       [row, candidate] int: the ``top_n`` tokens with the highest processed probability
    candidate_tokens    tuple (per row) of tuples of readable labels
    candidate_logprobs  [row, candidate] float32: the model's raw log-probability of each candidate
    candidate_probs     [row, candidate] float32: its probability after the processors (for beam search,
                        exp of the processed log-probability, which is not renormalised, as in generate())
    chosen_ids          [row] int: the token appended to each row (greedy, sampling); -1 for beam search,
                        where a row's continuations compete with every other row's (see the tree)
    entropy             [row] float32: entropy (nats) of the distribution the row's token is drawn from
    raw_entropy         [row] float32: entropy (nats) of the model's raw distribution
    row_scores          [row] float32 or None: beam search, each running beam's cumulative score before
                        this step
    row_nodes           [row] int or None: beam search, the tree node each row continues
    forced              True when the step appended a forced token (``chosen_ids``) instead of choosing one
    forced_rank         [row] int or None (forced steps): the forced token's rank in the model's raw
                        distribution (0 = the model's own favourite)
    forced_logprob      [row] float32 or None (forced steps): the model's raw log-probability of it
    """

    step: int
    prefix_ids: tuple[np.ndarray, ...]
    candidate_ids: np.ndarray
    candidate_tokens: tuple[tuple[str, ...], ...]
    candidate_logprobs: np.ndarray
    candidate_probs: np.ndarray
    chosen_ids: np.ndarray
    entropy: np.ndarray
    raw_entropy: np.ndarray
    row_scores: np.ndarray | None = None
    row_nodes: np.ndarray | None = None
    forced: bool = False
    forced_rank: np.ndarray | None = None
    forced_logprob: np.ndarray | None = None

    def __post_init__(self):
        freeze_arrays(self)

    @property
    def num_rows(self) -> int:
        return self.candidate_ids.shape[0]


@dataclass(frozen=True)
class BeamNode:
    """One candidate a beam search considered: a token appended to a parent node's sequence.

    ``score`` is the cumulative processed log-probability the search ranked it by; ``token_logprob`` the
    model's raw log-probability of this token. ``normalized_score`` (finished candidates) is
    ``score / generated_length ** length_penalty``, what the finished pool is sorted by. ``pool_step`` is
    the step at which a finished candidate entered the finished pool (None if it never did). Node 0 is the
    prompt (step -1). A ``forced`` node is a forced token: the only node of its step, ``score`` 0 (the
    search's scores start after the forced tokens) and ``rank`` its rank in the model's raw distribution.
    """

    id: int
    parent: int | None
    step: int
    token_id: int
    token: str
    token_logprob: float
    score: float
    status: str
    normalized_score: float | None = None
    pool_step: int | None = None
    rank: int = 0  # its place among the step's top-K candidates (0 = best)
    forced: bool = False


@dataclass(frozen=True)
class NgramBan:
    """A token a no-repeat n-gram ban removed from a row at a step, and the n-gram it would have repeated."""

    step: int
    row: int
    token_id: int
    token: str
    ngram: tuple[str, ...]
    logprob: float  # the model's raw log-probability of the banned token
    would_rank: int  # its rank in the row's raw distribution (0 = the model's favourite)


@dataclass(frozen=True, eq=False)
class DecodeTrace(Displayed):
    """A whole decoding, recorded: the sequences, every step's candidates, and beam search's full tree.

    sequences           tuple of [position] int arrays, best first: the prompt included for decoder-only
                        models; the decoder's ids (start token included) for seq2seq models
    texts               each sequence decoded (special tokens skipped)
    continuations       only the generated part of each sequence, decoded
    sequence_scores     [sequence] float32 (beam search: exactly generate()'s ``sequences_scores``, given the
                        prompt followed by the forced tokens) or None
    sequence_logprobs   [sequence] float32: raw model log-probability of each continuation (the sum over its
                        generated tokens, forced ones and end-of-sequence token included, padding excluded)
    steps               one ``DecodeStep`` per generation step
    tree                beam search: every candidate the search considered (``BeamNode``); () otherwise
    bans                every candidate a no-repeat n-gram ban removed
    pool_history        beam search: the node ids in the finished pool after each step, best first
    attention           with ``record_attention``: {"decoder" | "cross" | "encoder": AttentionStack} of the
                        whole generation stitched into one matrix per head; None otherwise. Its decoder rows are
                        the passes that ran: the prompt's, then each token fed back (not the last one, which
                        generate() never feeds back)
    prompt_length       positions of the prompt in ``attention``'s decoder rows (the rest were generated)
    """

    model_name: str
    prompt: str
    settings: DecodeSettings
    prompt_ids: np.ndarray
    prompt_tokens: tuple[str, ...]
    sequences: tuple[np.ndarray, ...]
    texts: tuple[str, ...]
    continuations: tuple[str, ...]
    sequence_scores: np.ndarray | None
    sequence_logprobs: np.ndarray
    steps: tuple[DecodeStep, ...]
    generated_tokens: tuple[tuple[str, ...], ...] = ()
    tree: tuple[BeamNode, ...] = ()
    bans: tuple[NgramBan, ...] = ()
    pool_history: tuple[tuple[int, ...], ...] = ()
    attention: dict | None = None
    prompt_length: int = 0
    is_seq2seq: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self):
        freeze_arrays(self)
        for array in self.sequences:
            array.flags.writeable = False

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    @property
    def num_forced(self) -> int:
        """How many of the first steps appended forced tokens."""
        return len(self.settings.force)


@dataclass(frozen=True, eq=False)
class NextTokenLogits(Displayed):
    """The model's raw next-token logits after a prompt, cached so that sampling controls never re-run it.

    logits   [vocab] float32
    tokens   readable label of every token id (the same tuple object for every prompt of a tokenizer)
    ablated  the heads whose outputs were zeroed, ((stack, layer, head), ...); () when none
    """

    model_name: str
    prompt: str
    prompt_tokens: tuple[str, ...]
    logits: np.ndarray
    tokens: tuple[str, ...]
    ablated: tuple[tuple[str, int, int], ...] = ()

    def __post_init__(self):
        freeze_arrays(self)


@dataclass(frozen=True, eq=False)
class TokenDistribution(Displayed):
    """The next-token distribution at each stage of transformers' sampling pipeline, over the whole vocabulary.

    stages        ordered ((name, probabilities [vocab]), ...): "raw" (softmax of the logits), then
                  "temperature", "top-k", "top-p", "min-p" as they apply, each renormalised
    final         [vocab]: the distribution a sampler draws from (the last stage)
    kept          {stage name: [vocab] bool}: tokens still possible after that stage
    removed_mass  {stage name: float}: probability mass (of the previous stage) that the stage removed
    tokens        readable label of every token id
    """

    stages: tuple[tuple[str, np.ndarray], ...]
    kept: dict[str, np.ndarray]
    removed_mass: dict[str, float]
    tokens: tuple[str, ...]
    logits: np.ndarray
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0

    def __post_init__(self):
        freeze_arrays(self)
        for _, probabilities in self.stages:
            probabilities.flags.writeable = False
        for mask in self.kept.values():
            mask.flags.writeable = False

    @property
    def final(self) -> np.ndarray:
        return self.stages[-1][1]

    def stage(self, name: str) -> np.ndarray:
        return dict(self.stages)[name]
