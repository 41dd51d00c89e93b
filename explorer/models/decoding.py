"""``decode``: greedy search, beam search and sampling, step by step, exactly as ``generate()`` does them.

How it works: the loop mirrors transformers 5's ``_sample`` and ``_beam_search`` (same logits
processors, built from transformers' own classes in transformers' order; same ``topk``, finished
pool, length penalty and early-stopping heuristic), and records what ``generate()`` throws away: every
step's top candidates with their raw and processed probabilities, every candidate a beam search
considered (the pruned ones too), and the tokens a no-repeat n-gram ban removed. The prompt is run
once and its KV cache reused (for beams, repeated ``num_beams`` times and reordered every step). A cache whose
layers cannot repeat their rows (a hybrid model's linear-attention or state-space layers) is not repeated: the
prompt then runs once per row, as in generate(). A model without a cache runs the whole sequence at every step, and so
does one whose cache cannot count its tokens (linear-attention or state-space layers alone: see ``counts_tokens``).
An encoder-decoder's encoder output is passed on as the encoder returned it (its own class, each tensor repeated
per row), as generate() does.

What it takes from the model's own generation config: only its token ids (end of sequence, padding,
decoder start, and the tokens generate() forces first and last). Every other setting is an explicit argument, so
``generate()`` given the same explicit settings (see ``generation_config_for``) produces the same sequences and
scores.

Sampling draws from its own ``torch.Generator`` seeded with ``seed``, never the global random state,
so many visitors can sample at once; a generator seeded with ``s`` draws what ``torch.manual_seed(s)``
would, so results match ``generate()`` after ``torch.manual_seed(s)``.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import random
from collections.abc import Callable, Sequence
from contextlib import nullcontext

import numpy as np
import torch
from transformers import (
    ForcedBOSTokenLogitsProcessor,
    ForcedEOSTokenLogitsProcessor,
    GenerationConfig,
    LogitsProcessorList,
    MinPLogitsWarper,
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)
from transformers.cache_utils import (
    DYNAMIC_LAYER_TYPE_MAPPING,
    CacheLayerMixin,
    LinearAttentionCacheLayerMixin,
    get_layer_types_and_kwargs,
)
from transformers.generation.utils import ALL_CACHE_NAMES

from explorer.checks import given_seed, given_text
from explorer.compute.decoding import path_to
from explorer.compute.sampling import check_sampling_settings
from explorer.data import STACK_CROSS, STACK_DECODER, STACK_ENCODER
from explorer.data.decoding import (
    RETURNED,
    STRATEGIES,
    BeamNode,
    DecodeSettings,
    DecodeStep,
    DecodeTrace,
    NgramBan,
)
from explorer.errors import InputError, NotApplicable
from explorer.models import ablation, recorder
from explorer.models.architectures import KIND_DECODER, KIND_ENCODER_DECODER, attention_outputs
from explorer.models.beam_search import BeamSearch, BeamTree
from explorer.models.capture import main_stream_rows
from explorer.models.tokens import token_labels

# Bounds a class cannot exceed (a shared server must stay responsive); pages show them on their sliders.
MAX_NEW_TOKENS = 64
MAX_BEAMS = 16
MAX_TOP_N = 20
MAX_RETURN_SEQUENCES = 16
MAX_VARIANTS = 32  # decode_together's
# What the variants decoded together may set. Not the cut-offs (top-k, top-p, min-p): a batch's matrix products
# may round the last bits of a logit differently from one row's, and a cut-off that falls between two tokens that
# close would keep one of them in one case and not in the other; every setting here moves the draw continuously.
VARIES = frozenset({"strategy", "temperature", "seed", "repetition_penalty", "no_repeat_ngram_size"})
CUT_OFFS = ("top_k", "top_p", "min_p")


def decode(
    lm,
    prompt: str,
    *,
    strategy: str,
    max_new_tokens: int = 8,
    force: Sequence[int] = (),
    num_beams: int = 1,
    length_penalty: float = 1.0,
    early_stopping: bool | str = False,
    no_repeat_ngram_size: int = 0,
    num_return_sequences: int = 1,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
    repetition_penalty: float = 1.0,
    seed: int | None = None,
    top_n: int = 5,
    record_attention: bool = False,
    progress: Callable[[int, int], None] | None = None,
    ablate=(),
) -> DecodeTrace:
    """Generate from ``prompt`` with ``strategy`` ("greedy", "beam" or "sample") and record every step.

    Every parameter has transformers' meaning; ``top_k=0`` and ``min_p=0`` mean off. ``top_n`` candidates
    are kept per row and step. ``record_attention`` (greedy, or sampling one sequence) stitches the
    decoder's attention of every step into one causal matrix, each pass's keys at their absolute positions (a
    sliding or chunked window's layer is 0 outside its window); weights only for a model whose attention is not
    recorded, ``InputError`` for a model without attention. ``progress(done, total)`` is called after
    each generated token. ``ablate`` names heads zeroed in every forward pass (see ``explorer.models.ablation``).
    Raises ``InputError`` for settings that cannot be decoded.

    ``force`` (token ids) branches the decoding: the first generated tokens are these, then ``strategy``
    chooses the rest. ``max_new_tokens`` counts them (it is the total number of new tokens, forced ones
    included, and must leave at least one step to choose). Every strategy continues exactly as it would from
    the prompt followed by the forced tokens (``generate()`` given those ids as its input; for seq2seq
    models, as its ``decoder_input_ids`` after the start token): sampling draws nothing at forced steps,
    and every beam starts from the forced tokens. Forced steps are recorded like the others (the model's
    own candidates there, ``DecodeStep.forced`` and the forced token's rank and log-probability).
    ``sequence_logprobs`` include the forced tokens' log-probabilities; beam search's scores (the tree's,
    ``sequence_scores``) count only the tokens the search chose, as generate()'s do for that input.
    Forced ids must be in the vocabulary and not special tokens (end of sequence, padding, ...).
    """
    settings = DecodeSettings(
        strategy=strategy,
        max_new_tokens=max_new_tokens,
        force=force,
        num_beams=num_beams,
        length_penalty=length_penalty,
        early_stopping=early_stopping,
        no_repeat_ngram_size=no_repeat_ngram_size,
        num_return_sequences=num_return_sequences,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        min_p=min_p,
        repetition_penalty=repetition_penalty,
        seed=seed,
        top_n=top_n,
        ablate=ablate,
    )
    settings = _normalized(lm, settings)
    _check(lm, prompt, settings, record_attention)
    _check_force(lm, settings)
    run = _Run(lm, prompt, settings, progress)
    if record_attention and recorder.attention_source(lm) == recorder.RETURNED:
        run.returned = []  # its attention is the weights each pass returns (output_attentions), not recorded calls
    recording = recorder.recording() if record_attention and run.returned is None else nullcontext()
    with torch.inference_mode(), ablation.ablating(lm, settings.ablate), recording as calls:
        # No pass for the last token: generate() never feeds it back, so its query row is never computed.
        result = run.beam_search() if strategy == "beam" else run.sample_or_greedy()
    attention = _stitched_attention(lm, run, calls, result) if record_attention else None
    return run.trace(result, attention)


def decode_together(
    lm, prompt: str, variants: Sequence[dict], *, progress: Callable[[int, int], None] | None = None, **shared
) -> tuple[DecodeTrace, ...]:
    """``decode(lm, prompt, **shared, **variant)`` for every variant, computed in one batched decoding: one or
    more rows per variant in every forward pass (on a CPU, greedy search and ten sampling temperatures together
    cost about two and a half decodings alone). Each trace is the one ``decode`` gives alone, and so equal to
    ``generate()`` with those settings: each variant applies its own processors and draws from its own generator.

    A variant is greedy search or sampling and may set only what ``VARIES``; ``shared`` holds the rest of
    ``decode``'s settings (the prompt, its length and forced tokens run once for all), and no cut-off (top-k, top-p,
    min-p)."""
    if not 1 <= len(variants) <= MAX_VARIANTS:
        raise InputError(f"decode_together takes 1 to {MAX_VARIANTS} variants (got {len(variants)}).")
    runs = []
    for variant in variants:
        unknown = sorted(set(variant) - VARIES)
        if unknown or variant.get("strategy") not in ("greedy", "sample"):
            raise InputError(
                f"Each variant decoded together is greedy search or sampling and sets only {', '.join(sorted(VARIES))}"
                f" (got {variant!r}): beam search and the other settings run alone, with decode."
            )
        settings = _normalized(lm, DecodeSettings(**{**shared, **variant}))
        if any(getattr(settings, name) != getattr(DecodeSettings, name) for name in CUT_OFFS):
            raise InputError("Top-k, top-p and min-p decode alone, with decode: not together (see VARIES).")
        _check(lm, prompt, settings, False)
        _check_force(lm, settings)
        runs.append(_Run(lm, prompt, settings, progress))
    with torch.inference_mode(), ablation.ablating(lm, runs[0].settings.ablate):
        results = _sample_lanes(runs)
    return tuple(run.trace(result, None) for run, result in zip(runs, results, strict=True))


def _normalized(lm, settings: DecodeSettings) -> DecodeSettings:
    """``settings`` as results are keyed and decoded: forced ids and ablated heads as tuples, one beam unless
    beam search, and a seed for sampling (drawn at random when None)."""
    sample = settings.strategy == "sample"
    return dataclasses.replace(
        settings,
        force=_token_ids(settings.force),
        num_beams=settings.num_beams if settings.strategy == "beam" else 1,
        seed=(random.randrange(2**31) if settings.seed is None else given_seed(settings.seed)) if sample else None,
        ablate=ablation.normalize(lm, settings.ablate),
    )


def generation_config_for(lm, settings: DecodeSettings) -> GenerationConfig:
    """The ``GenerationConfig`` with which ``generate()`` decodes exactly as ``decode`` did with ``settings``,
    given the prompt followed by ``settings.force`` (as ``decoder_input_ids`` after the start token for seq2seq
    models): the forced tokens are then part of its input, so its ``max_new_tokens`` leaves them out."""
    ids = special_token_ids(lm)
    sample = settings.strategy == "sample"
    return GenerationConfig(
        max_new_tokens=settings.max_new_tokens - len(settings.force),
        do_sample=sample,
        num_beams=settings.num_beams,
        length_penalty=settings.length_penalty,
        early_stopping=settings.early_stopping,
        no_repeat_ngram_size=settings.no_repeat_ngram_size or None,
        num_return_sequences=settings.num_return_sequences,
        temperature=settings.temperature if sample else None,
        top_k=settings.top_k if sample else None,
        top_p=settings.top_p if sample else None,
        min_p=settings.min_p if sample and settings.min_p > 0 else None,
        repetition_penalty=settings.repetition_penalty,
        eos_token_id=ids["eos"],
        pad_token_id=ids["pad"],
        bos_token_id=ids["bos"],
        decoder_start_token_id=ids["decoder_start"],
        forced_bos_token_id=ids["forced_bos"],
        forced_eos_token_id=ids["forced_eos"],
        return_dict_in_generate=True,
        output_scores=True,
    )


def special_token_ids(lm) -> dict:
    """End-of-sequence (a list), padding, beginning and decoder-start ids, and the tokens generate() forces first and
    last ("forced_bos", "forced_eos": BART-style models end at the length limit with their end token), from the
    model's own configs."""
    generation, config = lm.model.generation_config, lm.model.config

    def first(name: str):
        # A config may not define an id at all (T5's has no bos_token_id): then it is None, as generate() has it.
        value = getattr(generation, name, None)
        return value if value is not None else getattr(config, name, None)

    eos = first("eos_token_id")
    eos = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
    pad = first("pad_token_id")
    if pad is None:
        pad = eos[0] if eos else None
    return {
        "eos": eos,
        "pad": pad,
        "bos": first("bos_token_id"),
        "decoder_start": first("decoder_start_token_id"),
        "forced_bos": first("forced_bos_token_id"),
        "forced_eos": first("forced_eos_token_id"),
    }


def _check(lm, prompt: str, settings: DecodeSettings, record_attention: bool) -> None:
    if lm.kind not in (KIND_DECODER, KIND_ENCODER_DECODER):
        raise NotApplicable(
            f"{lm.name} is an encoder: it has no language-model head, so it cannot generate text. "
            "Load a causal language model (the bundled prose-llama, gpt2, ...) or a seq2seq model (t5-small)."
        )
    if not given_text(prompt, "prompt").strip():
        raise InputError("Type a prompt to generate from.")
    s = settings
    if s.strategy not in STRATEGIES:
        raise InputError(f"Unknown strategy {s.strategy!r}: choose greedy, beam or sample.")
    _bounded("max_new_tokens", s.max_new_tokens, 1, MAX_NEW_TOKENS)
    _bounded("top_n", s.top_n, 1, MAX_TOP_N)
    _bounded("num_return_sequences", s.num_return_sequences, 1, MAX_RETURN_SEQUENCES)
    _bounded("no_repeat_ngram_size", s.no_repeat_ngram_size, 0, 16)
    if s.strategy == "beam":
        _bounded("num_beams", s.num_beams, 1, MAX_BEAMS)
        if s.num_return_sequences > s.num_beams:
            raise InputError(
                f"Beam search can return at most num_beams sequences ({s.num_beams}), not {s.num_return_sequences}."
            )
        if s.early_stopping not in (True, False, "never"):
            raise InputError('early_stopping must be True, False or "never".')
        if not np.isfinite(s.length_penalty):
            raise InputError("length_penalty must be a finite number.")
    if s.strategy == "greedy" and s.num_return_sequences != 1:
        raise InputError("Greedy search returns one sequence; use sampling or beam search for several.")
    if s.strategy == "sample":
        check_sampling_settings(temperature=s.temperature, top_k=s.top_k, top_p=s.top_p, min_p=s.min_p)
    if not (np.isfinite(s.repetition_penalty) and s.repetition_penalty > 0):
        raise InputError("repetition_penalty must be above 0 (1 means none).")
    if record_attention and (s.strategy == "beam" or s.num_return_sequences != 1):
        raise InputError("Attention is recorded for one sequence: greedy search or sampling one sequence.")
    if record_attention:
        _check_recordable(lm)


def _check_recordable(lm) -> None:
    """A model without attention has none to stitch, and says so rather than showing nothing."""
    from explorer.models.capture import no_attention

    if not recorder.attends(lm):
        raise NotApplicable(no_attention(lm))


def _token_ids(force) -> tuple[int, ...]:
    """``force`` as a tuple of Python ints (settings are hashable: results are cached by them)."""
    if isinstance(force, str | bytes) or not all(
        isinstance(token, int | np.integer) and not isinstance(token, bool) for token in force
    ):
        raise InputError(f"force takes token ids (whole numbers), not {force!r}.")
    return tuple(int(token) for token in force)


def _check_force(lm, settings: DecodeSettings) -> None:
    """Forced ids must be ordinary tokens of the vocabulary, and leave the strategy at least one step."""
    force = settings.force
    if len(force) >= settings.max_new_tokens:
        raise InputError(
            f"{len(force)} forced tokens need max_new_tokens of at least {len(force) + 1}: it counts the forced "
            f"tokens and must leave one step to choose (it is {settings.max_new_tokens})."
        )
    size = _vocabulary_size(lm)
    special = _special_ids(lm)
    for token in force:
        if not 0 <= token < size:
            raise InputError(f"Token id {token} is not in {lm.name}'s vocabulary (ids 0 to {size - 1}).")
        if token in special:
            raise InputError(
                f"{token_labels(lm.tokenizer, [token])[0]} (id {token}) is a special token of {lm.name} (end of "
                "sequence, padding, ...): only ordinary tokens can be forced."
            )


def _vocabulary_size(lm) -> int:
    """Ids the model can predict and the tokenizer can name (the output layer may have padding rows)."""
    output = lm.model.get_output_embeddings()
    rows = output.weight.shape[0] if output is not None else lm.model.config.get_text_config().vocab_size
    return min(rows, len(lm.tokenizer))


def _special_ids(lm) -> set[int]:
    ids = special_token_ids(lm)
    named = {*ids["eos"], ids["pad"], ids["bos"], ids["decoder_start"], *lm.tokenizer.all_special_ids}
    return {int(token) for token in named if token is not None}


def _bounded(name: str, value, low: int, high: int) -> None:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or not low <= value <= high:
        raise InputError(f"{name} must be a whole number from {low} to {high} (got {value!r}).")


@dataclasses.dataclass
class _Result:
    """What a search produced, before it is turned into a ``DecodeTrace``."""

    sequences: list[list[int]]
    scores: list[float] | None
    logprobs: list[float]
    steps: list[DecodeStep]
    tree: list[BeamNode] = dataclasses.field(default_factory=list)
    bans: list[NgramBan] = dataclasses.field(default_factory=list)
    pool_history: list[tuple[int, ...]] = dataclasses.field(default_factory=list)


class _Run:
    """One decoding: the model inputs, the processors, the generator, and the forward passes."""

    def __init__(self, lm, prompt: str, settings: DecodeSettings, progress):
        self.lm, self.model, self.settings, self.prompt = lm, lm.model, settings, prompt
        self.progress = progress or (lambda done, total: None)
        self.ids = special_token_ids(lm)
        self.eos = torch.tensor(self.ids["eos"], dtype=torch.long, device=lm.device)
        self.seq2seq = lm.kind == KIND_ENCODER_DECODER
        self.notes: list[str] = []
        # Each pass's attention weights as the model returns them ({stack: [layer] of [row, head, query, key]}),
        # kept when its attention is read that way (``recorder.RETURNED``); None otherwise.
        self.returned: list[dict] | None = None
        self.cacheless = False  # the model returned no cache: every pass ran the whole sequence
        self.prompt_ids = self._prompt_ids()
        self.generator = None
        if settings.strategy == "sample":
            self.generator = torch.Generator(device=lm.device).manual_seed(settings.seed)
        self.processors = _processors(settings, self.ids, self.max_length)
        self.labels = _LabelCache(lm.tokenizer)
        parameters = inspect.signature(self.model.forward).parameters
        self.keeps_logits = "logits_to_keep" in parameters
        self.cache_name = cache_name(self.model)
        self.cache_input = self.cache_name  # the name each step hands it back under (see _start)
        self.use_cache = self.seq2seq or counts_tokens(self.model, self.cache_name)
        if not self.use_cache:
            self.notes.append(
                f"{lm.name}'s layers are all linear-attention or state-space layers, whose cache cannot say how many "
                "tokens it holds (transformers' generate() fails with it): every step ran the whole sequence, as "
                "generate(use_cache=False) does."
            )

    # -- inputs ---------------------------------------------------------------------------------------------

    def _prompt_ids(self) -> torch.Tensor:
        """[1, prompt] ids; a decoder-only prompt is cut from the left so that prompt + new tokens fit."""
        ids = self.lm.tokenizer(self.prompt, return_tensors="pt")["input_ids"]
        if ids.shape[1] == 0:
            raise InputError("The prompt produced no tokens for this model.")
        room = self.lm.max_tokens - (0 if self.seq2seq else self.settings.max_new_tokens)
        if ids.shape[1] > room:
            self.notes.append(
                f"The prompt was longer than the model accepts with {self.settings.max_new_tokens} new tokens: "
                f"its first {ids.shape[1] - room} tokens were left out."
            )
            ids = ids[:, -room:] if not self.seq2seq else ids[:, :room]
        return ids.to(self.lm.device)

    def _start(self, rows: int):
        """(decoder ids [rows, length], logits [rows, forced + 1, vocab] float32, cache, extra model kwargs).

        One forward pass over the prompt followed by the forced tokens, as generate() given both would run:
        its last ``forced + 1`` positions give the model's distribution before each forced token and, last,
        before the first token the strategy chooses."""
        forced = torch.tensor(self.settings.force, dtype=torch.long, device=self.lm.device).reshape(1, -1)
        keep = forced.shape[1] + 1
        if self.seq2seq:
            mask = torch.ones_like(self.prompt_ids)
            encoder = self.model.get_encoder()(
                input_ids=self.prompt_ids, attention_mask=mask, return_dict=True, **self._asked()
            )
            encoded, mask = _rows_repeated(encoder, rows), mask.repeat_interleave(rows, dim=0)
            extra = {"encoder_outputs": encoded, "attention_mask": mask}
            start = self.ids["decoder_start"]
            if start is None:
                raise InputError(f"{self.lm.name} names no decoder start token, so it cannot generate.")
            ids = torch.cat([torch.full((1, 1), start, dtype=torch.long, device=self.lm.device), forced], dim=1)
            ids = ids.repeat_interleave(rows, dim=0)
            outputs = self.model(decoder_input_ids=ids, use_cache=True, return_dict=True, **extra, **self._asked())
            self._keep_returned(outputs, encoder)
            return ids, _final_logits(outputs, keep), getattr(outputs, self.cache_name, None), extra
        # The prompt runs once; its cache is then repeated for every row (generate() runs it once per row). A cache
        # with layers that cannot repeat their rows (a linear-attention or state-space layer's state) is not
        # repeated: the prompt then runs once per row, as in generate().
        ids = torch.cat([self.prompt_ids, forced], dim=1)
        outputs, logits = self._prefill(ids, keep)
        if rows > 1 and not _repeats_rows(getattr(outputs, self.cache_name, None)):
            ids = ids.repeat_interleave(rows, dim=0)
            outputs, logits = self._prefill(ids, keep)
        self._keep_returned(outputs)
        cache = getattr(outputs, self.cache_name, None)
        self.cacheless = cache is None
        # generate() hands the cache back to prepare_inputs_for_generation under its own name for it (XLNet's "mems"
        # go back as past_key_values): what its _update_model_kwargs_for_generation makes of this pass's output.
        handed = self.model._update_model_kwargs_for_generation(outputs, {})
        self.cache_input = next(iter(handed), self.cache_name)
        if ids.shape[0] < rows:
            cache.batch_repeat_interleave(rows)
            logits = logits.repeat_interleave(rows, dim=0)
        return ids.repeat_interleave(rows // ids.shape[0], dim=0), logits, cache, {}

    def _prefill(self, ids: torch.Tensor, keep: int):
        """(outputs, logits [rows, keep, vocab]) of the first pass over ``ids``, prepared by the model's own
        ``prepare_inputs_for_generation`` as generate() prepares it: XLNet's appends a token to predict, hidden
        from the others by its permutation mask, and predicts that one position only. Then the distribution
        before each forced token is that of a first pass over the ids before it, as generate() given them runs."""
        outputs = self._first_pass(ids, keep)
        logits = _final_logits(outputs, keep)
        missing = keep - logits.shape[1]
        if missing:
            ends = range(ids.shape[1] - keep + 1, ids.shape[1] - keep + 1 + missing)
            earlier = [_final_logits(self._first_pass(ids[:, :end], 1), 1) for end in ends]
            logits = torch.cat([*earlier, logits], dim=1)
        return outputs, logits

    def _first_pass(self, ids: torch.Tensor, keep: int):
        inputs = self.model.prepare_inputs_for_generation(
            ids,
            is_first_iteration=True,
            attention_mask=torch.ones_like(ids),
            use_cache=self.use_cache,
            **self._logits_to_keep(keep),
            **self._asked(),
        )
        return self.model(return_dict=True, **inputs)

    def _asked(self) -> dict:
        """What a forward pass is asked for besides its logits: its attention weights, where they are kept."""
        return {} if self.returned is None else {"output_attentions": True}

    def _keep_returned(self, outputs, encoder=None) -> None:
        """This pass's attention weights by stack, where they are kept (a layer without attention returns None)."""
        if self.returned is None:
            return
        if self.seq2seq:
            rows = [None if layer is None else layer.shape[-2] for layer in outputs.decoder_attentions or ()]
            cross = outputs.cross_attentions or ()
            cross = [main_stream_rows(self.model.config, layer, n) for layer, n in zip(cross, rows, strict=False)]
            found = {STACK_DECODER: outputs.decoder_attentions, STACK_CROSS: cross}
            if encoder is not None:
                found[STACK_ENCODER] = encoder.attentions
        else:
            found = {STACK_DECODER: attention_outputs(self.lm.model.config, outputs.attentions)}
        self.returned.append({name: [layer for layer in layers if layer is not None] for name, layers in found.items()})

    def _logits_to_keep(self, count: int) -> dict:
        # As generate() does: only the last positions' logits (the prompt's others would cost a vocabulary-wide
        # matrix product per prompt token).
        return {"logits_to_keep": count} if self.keeps_logits else {}

    def _step(self, ids: torch.Tensor, cache, extra: dict) -> tuple[torch.Tensor, object]:
        """(logits [rows, vocab] for the next token of every row, feeding only each row's last token; the cache
        after the pass: the one the pass returned, as generate() takes it, since some are new objects each pass
        (XLNet's mems), not updated in place)."""
        if self.seq2seq:
            inputs = {"decoder_input_ids": ids[:, -1:], "past_key_values": cache, "use_cache": True, **extra}
            inputs |= self._asked()
        else:
            # The model's own preparation, as generate() feeds each step (some models take no mask with a cache).
            # A model that keeps no cache (OpenAI GPT) runs the whole sequence again: then only this pass's
            # attention is kept, as it covers every position.
            if cache is None and self.returned:
                self.returned.clear()
            inputs = self.model.prepare_inputs_for_generation(
                ids,
                next_sequence_length=None if cache is None else 1,
                attention_mask=torch.ones_like(ids),
                use_cache=self.use_cache,
                **{self.cache_input: cache},
                **self._logits_to_keep(1),
                **self._asked(),
            )
        outputs = self.model(return_dict=True, **inputs)
        self._keep_returned(outputs)
        returned = getattr(outputs, self.cache_name, None)
        return _final_logits(outputs, 1)[:, -1], cache if returned is None else returned

    @property
    def prompt_length(self) -> int:
        """Decoder positions before the first new token: the prompt (decoder-only) or the start token (seq2seq)."""
        return 1 if self.seq2seq else self.prompt_ids.shape[1]

    @property
    def max_length(self) -> int:
        """generate()'s max_length: the decoder's length at which every row stops (forced tokens count)."""
        return self.prompt_length + self.settings.max_new_tokens

    @property
    def num_forced(self) -> int:
        return len(self.settings.force)

    def _processed(self, ids: torch.Tensor, logits: torch.Tensor, raw: torch.Tensor) -> torch.Tensor:
        """Processed log-probabilities [rows, vocab] as the strategy sees them: beam search processes
        log-probabilities (generate() applies log_softmax first), greedy search and sampling the logits."""
        if self.settings.strategy == "beam":
            return self.processors(ids, raw)
        return torch.log_softmax(self.processors(ids, logits), dim=-1)

    def _forced_steps(self, ids: torch.Tensor, logits: torch.Tensor):
        """Yields (step, prefix ids [rows, length], logits and raw log-probs [rows, vocab], forced token [rows]) at
        each forced step, from the first forward pass's logits [rows, forced, vocab]: what the model wanted
        where it was made to take the forced token. Nothing is drawn (the generator stays where generate(),
        given the prompt followed by the forced tokens, starts it)."""
        for step in range(self.num_forced):
            position = ids.shape[1] - self.num_forced + step
            prefix, raw = ids[:, :position], torch.log_softmax(logits[:, step], dim=-1)
            yield step, prefix, logits[:, step], raw, ids[:, position]
            self.progress(step + 1, self.settings.max_new_tokens)

    # -- greedy search and sampling ---------------------------------------------------------------------------

    def sample_or_greedy(self) -> _Result:
        """Mirrors generate()'s ``_sample``: argmax (greedy) or a multinomial draw (sampling) per row."""
        return _sample_lanes([self])[0]

    def _choose(self, scores: torch.Tensor) -> torch.Tensor:
        """[rows] the next token: a draw from softmax(scores) with the run's own generator, or the argmax."""
        if self.generator is not None:
            return torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1, generator=self.generator).squeeze(1)
        return torch.argmax(scores, dim=-1)

    # -- beam search ----------------------------------------------------------------------------------------------

    def beam_search(self) -> _Result:
        """Mirrors generate()'s ``_beam_search`` (batch of one), recording every candidate as a tree node."""
        s = self.settings
        ids, logits, cache, extra = self._start(s.num_beams)
        # For the search, forced tokens are part of the prompt: its scores and lengths start after them.
        search = BeamSearch(ids, eos=self.eos, fill=self._beam_fill(), max_length=self.max_length, settings=s)
        tree = BeamTree(s.num_beams, self.labels)
        steps, bans = self._force_beams(ids, logits[:, :-1], search, tree)
        logits = logits[:, -1]
        for step in range(self.num_forced, s.max_new_tokens):
            rows, raw = search.sequences, torch.log_softmax(logits, dim=-1)
            processed = self._processed(rows, logits, raw)
            steps.append(self._record_step(step, rows, raw, processed, None, search.running_scores[0], tree.running))
            bans += self._bans(step, rows, raw, live=search.live)
            found = search.expand(processed)
            chosen = search.select_running(found)
            update = search.finalize_hypotheses(found)
            tree.grow(step, found, chosen, update, search, raw)
            # The cache follows the beams that run on: row i now continues the candidate's parent beam.
            cache = self._reordered(cache, torch.take_along_dim(found.parents, chosen, dim=1)[0])
            search.advance()
            self.progress(step + 1, s.max_new_tokens)
            if search.should_stop(found):
                break
            logits, cache = self._step(search.sequences, cache, extra)
        return self._beam_result(tree, search, steps, bans)

    def _reordered(self, cache, beams: torch.Tensor):
        """The cache with row i holding beam ``beams[i]``'s, as generate() reorders it: the model's own
        ``_reorder_cache`` where it has one, else the cache's ``reorder_cache`` (a model without one: nothing)."""
        if cache is None:
            return None
        if hasattr(self.model, "_reorder_cache"):
            return self.model._reorder_cache(cache, beams)
        if not hasattr(cache, "reorder_cache"):
            raise InputError(
                f"{self.lm.name}'s cache ({type(cache).__name__}) cannot be reordered, so it cannot run beam search "
                "(generate() refuses it too): use greedy search or sampling."
            )
        cache.reorder_cache(beams)
        return cache

    def _force_beams(self, ids, logits, search: BeamSearch, tree: BeamTree) -> tuple[list, list]:
        """Steps and n-gram bans of the forced steps, whose tokens every beam takes (one tree node each)."""
        steps, bans = [], []
        for step, prefix, step_logits, raw, forced in self._forced_steps(ids, logits):
            processed = self._processed(prefix, step_logits, raw)
            scores = search.running_scores[0]
            steps.append(self._record_step(step, prefix, raw, processed, forced, scores, tree.running))
            bans += self._bans(step, prefix, raw, live=search.live)
            tree.force(step, int(forced[0]), raw[0])
        return steps, bans

    def _beam_fill(self) -> int:
        """What generate() writes past a sequence's end: the padding token, else the first end token."""
        return self.ids["pad"] if self.ids["pad"] is not None else (self.ids["eos"][0] if self.ids["eos"] else -1)

    def _beam_result(self, tree: BeamTree, search: BeamSearch, steps, bans) -> _Result:
        """The best ``num_return_sequences`` finished hypotheses, their paths marked "returned" in the tree."""
        count = self.settings.num_return_sequences
        returned = [node for node in tree.pool[:count] if node is not None]
        nodes = list(tree.nodes)
        sequences, logprobs = [], []
        prefix = self.prompt_ids[0].tolist() if not self.seq2seq else [self.ids["decoder_start"]]
        for node_id in returned:
            path = path_to(nodes, node_id)
            for index in path:
                nodes[index] = dataclasses.replace(nodes[index], status=RETURNED)
            sequences.append(prefix + [nodes[i].token_id for i in path])
            logprobs.append(sum(nodes[i].token_logprob for i in path))
        return _Result(
            sequences=sequences,
            scores=[float(search.pool_scores[0, i]) for i in range(len(returned))],
            logprobs=logprobs,
            steps=steps,
            tree=nodes,
            bans=bans,
            pool_history=tree.history,
        )

    # -- recording --------------------------------------------------------------------------------------------

    def _record_step(self, step, ids, raw, processed_logprobs, chosen, row_scores=None, row_nodes=None) -> DecodeStep:
        """The top candidates of every row by processed probability, with raw log-probabilities and entropies."""
        n = self.settings.top_n
        top_values, top_ids = torch.topk(processed_logprobs, k=min(n, processed_logprobs.shape[-1]), dim=-1)
        renormalised = torch.softmax(processed_logprobs, dim=-1)
        candidate_ids = top_ids.cpu().numpy()
        return DecodeStep(
            step=step,
            prefix_ids=tuple(row.cpu().numpy().copy() for row in ids),
            candidate_ids=candidate_ids,
            candidate_tokens=tuple(tuple(self.labels(t) for t in row) for row in candidate_ids.tolist()),
            candidate_logprobs=raw.gather(1, top_ids).float().cpu().numpy(),
            candidate_probs=top_values.exp().float().cpu().numpy(),
            chosen_ids=(np.full(ids.shape[0], -1) if chosen is None else chosen.cpu().numpy()),
            entropy=_entropy(renormalised),
            raw_entropy=_entropy(raw.exp()),
            row_scores=None if row_scores is None else row_scores.float().cpu().numpy(),
            row_nodes=None if row_nodes is None else np.array(row_nodes),
            **(self._forced_record(raw, chosen) if step < self.num_forced else {}),
        )

    @staticmethod
    def _forced_record(raw: torch.Tensor, forced: torch.Tensor) -> dict:
        """A forced step's extra fields: where the model ranked the forced token, and its log-probability."""
        logprob = raw.gather(1, forced[:, None])
        return {
            "forced": True,
            "forced_rank": (raw > logprob).sum(dim=-1).cpu().numpy(),
            "forced_logprob": logprob[:, 0].float().cpu().numpy(),
        }

    def _bans(self, step: int, ids: torch.Tensor, raw: torch.Tensor, live=None) -> list[NgramBan]:
        """Tokens the no-repeat n-gram rule removes from each row now, with the n-gram each would repeat."""
        size = self.settings.no_repeat_ngram_size
        if size <= 0 or ids.shape[1] < size:
            return []
        found = []
        for row, sequence in enumerate(ids.tolist()):
            if live is not None and not bool(live[row]):
                continue
            prefix = tuple(sequence[len(sequence) - size + 1 :])
            banned = {
                sequence[i + size - 1]
                for i in range(len(sequence) - size + 1)
                if tuple(sequence[i : i + size - 1]) == prefix
            }
            for token in sorted(banned):
                found.append(
                    NgramBan(
                        step=step,
                        row=row,
                        token_id=token,
                        token=self.labels(token),
                        ngram=tuple(self.labels(t) for t in (*prefix, token)),
                        logprob=float(raw[row, token]),
                        would_rank=int((raw[row] > raw[row, token]).sum()),
                    )
                )
        return found

    def trace(self, result: _Result, attention) -> DecodeTrace:
        tokenizer = self.lm.tokenizer
        start = self.prompt_length
        sequences = tuple(np.array(sequence, dtype=np.int64) for sequence in result.sequences)
        return DecodeTrace(
            model_name=self.lm.name,
            prompt=self.prompt,
            settings=self.settings,
            prompt_ids=self.prompt_ids[0].cpu().numpy(),
            prompt_tokens=token_labels(tokenizer, self.prompt_ids[0]),
            sequences=sequences,
            texts=tuple(tokenizer.decode(sequence, skip_special_tokens=True) for sequence in result.sequences),
            continuations=tuple(
                tokenizer.decode(sequence[start:], skip_special_tokens=True) for sequence in result.sequences
            ),
            generated_tokens=tuple(tuple(self.labels(t) for t in sequence[start:]) for sequence in result.sequences),
            sequence_scores=None if result.scores is None else np.array(result.scores, dtype=np.float32),
            sequence_logprobs=np.array(result.logprobs, dtype=np.float32),
            steps=tuple(result.steps),
            tree=tuple(result.tree),
            bans=tuple(result.bans),
            pool_history=tuple(result.pool_history),
            attention=attention,
            prompt_length=start,
            is_seq2seq=self.seq2seq,
            notes=tuple(self.notes),
        )


def _sample_lanes(runs: list[_Run]) -> list[_Result]:
    """Greedy search or sampling for each run, all in one batch: each run (a lane) owns
    ``num_return_sequences`` rows of every forward pass, and applies its own processors and draws from its own
    generator on them, exactly as its run alone would. The runs differ only in their processors and draws (one
    prompt, forced tokens, length and ``top_n``). A lane stops where its run alone stops (when its rows have all
    ended): later passes carry its rows along, padded, but nothing more is drawn or recorded for it."""
    lead = runs[0]
    rows = [run.settings.num_return_sequences if run.settings.strategy == "sample" else 1 for run in runs]
    bounds = np.cumsum([0, *rows])
    lanes = [slice(int(start), int(end)) for start, end in itertools.pairwise(bounds)]
    ids, logits, cache, extra = lead._start(int(bounds[-1]))
    steps, bans = [[] for _ in runs], [[] for _ in runs]
    live = [True] * len(runs)

    def record(step, prefix, raw, processed, chosen) -> None:
        """One step's candidates for every row at once (one top-k, one softmax), then each live lane's rows."""
        recorded = lead._record_step(step, prefix, raw, processed, chosen)
        for index, (run, lane) in enumerate(zip(runs, lanes, strict=True)):
            if live[index]:
                steps[index].append(recorded if len(runs) == 1 else _rows(recorded, lane))
                bans[index].extend(run._bans(step, prefix[lane], raw[lane]))

    logprobs = torch.zeros(int(bounds[-1]), dtype=torch.float64)
    for step, prefix, step_logits, raw, forced in lead._forced_steps(ids, logits[:, :-1]):
        processed = torch.cat(
            [run._processed(prefix[lane], step_logits[lane], raw[lane]) for run, lane in zip(runs, lanes, strict=True)]
        )
        record(step, prefix, raw, processed, forced)
        logprobs += raw.gather(1, forced[:, None]).squeeze(1).double().cpu()
    logits = logits[:, -1]
    unfinished = torch.ones(ids.shape[0], dtype=torch.long, device=ids.device)
    pad = lead.ids["pad"] if lead.ids["pad"] is not None else 0
    total = lead.settings.max_new_tokens
    for step in range(lead.num_forced, total):
        raw = torch.log_softmax(logits, dim=-1)
        chosen = torch.full_like(unfinished, pad)
        processed = raw.clone()  # a lane that stopped keeps its raw rows: nothing is recorded for it
        for index, (run, lane) in enumerate(zip(runs, lanes, strict=True)):
            if live[index]:
                scores = run.processors(ids[lane], logits[lane])
                chosen[lane] = run._choose(scores)
                processed[lane] = torch.log_softmax(scores, dim=-1)
        if len(lead.eos):  # a row that ended is padded, as generate() does
            chosen = chosen * unfinished + pad * (1 - unfinished)
        record(step, ids, raw, processed, chosen)
        picked = raw.gather(1, chosen[:, None]).squeeze(1).double().cpu()
        logprobs += torch.where(unfinished.bool().cpu(), picked, torch.zeros_like(picked))
        ids = torch.cat([ids, chosen[:, None]], dim=-1)
        if len(lead.eos):
            unfinished = unfinished & ~torch.isin(chosen, lead.eos)
        lead.progress(step + 1, total)
        full = ids.shape[1] >= lead.max_length
        live = [alive and not full and bool(unfinished[lane].any()) for alive, lane in zip(live, lanes, strict=True)]
        if not any(live):
            break
        logits, cache = lead._step(ids, cache, extra)
    return [
        _Result(
            sequences=[_trim(row.tolist(), run.prompt_length, run.ids["eos"]) for row in ids[lane]],
            scores=None,
            logprobs=logprobs[lane].tolist(),
            steps=lane_steps,
            bans=lane_bans,
        )
        for run, lane, lane_steps, lane_bans in zip(runs, lanes, steps, bans, strict=True)
    ]


def _rows(recorded: DecodeStep, lane: slice) -> DecodeStep:
    """The rows ``lane`` of a step recorded for a whole batch (copies: a lane's trace holds only its own rows)."""

    def cut(array):
        return None if array is None else array[lane].copy()

    return dataclasses.replace(
        recorded,
        prefix_ids=recorded.prefix_ids[lane],
        candidate_ids=cut(recorded.candidate_ids),
        candidate_tokens=recorded.candidate_tokens[lane],
        candidate_logprobs=cut(recorded.candidate_logprobs),
        candidate_probs=cut(recorded.candidate_probs),
        chosen_ids=cut(recorded.chosen_ids),
        entropy=cut(recorded.entropy),
        raw_entropy=cut(recorded.raw_entropy),
        forced_rank=cut(recorded.forced_rank),
        forced_logprob=cut(recorded.forced_logprob),
    )


def _processors(settings: DecodeSettings, ids: dict, max_length: int) -> LogitsProcessorList:
    """transformers' own processors, in the order generate() builds them (``_get_logits_processor``); ``ids``:
    ``special_token_ids``, whose forced first and last tokens generate() applies from the model's own config."""
    processors = LogitsProcessorList()
    if settings.repetition_penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(settings.repetition_penalty))
    if settings.no_repeat_ngram_size > 0:
        processors.append(NoRepeatNGramLogitsProcessor(settings.no_repeat_ngram_size))
    if ids["forced_bos"] is not None:
        processors.append(ForcedBOSTokenLogitsProcessor(ids["forced_bos"]))
    if ids["forced_eos"] is not None:
        processors.append(ForcedEOSTokenLogitsProcessor(max_length, ids["forced_eos"]))
    if settings.strategy == "sample":
        if settings.temperature != 1.0:
            processors.append(TemperatureLogitsWarper(settings.temperature))
        if settings.top_k > 0:
            processors.append(TopKLogitsWarper(top_k=settings.top_k, min_tokens_to_keep=1))
        if settings.top_p < 1.0:
            processors.append(TopPLogitsWarper(top_p=settings.top_p, min_tokens_to_keep=1))
        if settings.min_p > 0.0:
            processors.append(MinPLogitsWarper(min_p=settings.min_p, min_tokens_to_keep=1))
    return processors


def _rows_repeated(encoded, rows: int):
    """The encoder's own output object with each of its tensors repeated ``rows`` times along the batch, as
    generate() expands it (``_expand_dict_for_generation``): some models read more of it than its first field
    (Switch Transformers its router logits), so it keeps its class and fields."""
    return type(encoded)(
        **{
            name: value.repeat_interleave(rows, dim=0) if isinstance(value, torch.Tensor) else value
            for name, value in encoded.items()
        }
    )


def _repeats_rows(cache) -> bool:
    """Whether every layer of ``cache`` can repeat its rows in place: not a layer with a linear-attention or
    state-space state (it has no ``batch_repeat_interleave``, or one inherited from a KV layer that leaves its
    state alone), and not a model without a cache (None)."""
    layers = getattr(cache, "layers", [cache])  # a cache that is not a list of layers speaks for itself
    return all(
        hasattr(layer, "batch_repeat_interleave") and not isinstance(layer, LinearAttentionCacheLayerMixin)
        for layer in layers
    )


def cache_name(model) -> str:
    """What the model calls its cache, in its inputs and outputs (state-space models: "cache_params")."""
    parameters = inspect.signature(model.forward).parameters
    return next((name for name in ALL_CACHE_NAMES if name in parameters), "past_key_values")


def counts_tokens(model, cache_name: str) -> bool:
    """Whether a decoder's cache can say how many tokens it holds, as generate() and the model's own forward ask it
    (``get_seq_length``) when it is passed as ``past_key_values``: the ``DynamicCache`` they build from its config
    needs one layer of keys and values; one of linear-attention or state-space layers alone raises. A layer kind
    without a dynamic layer class is the model's own cache, which speaks for itself."""
    if cache_name != "past_key_values":
        return True  # Mamba's cache_params: generate() never asks it
    kinds, _ = get_layer_types_and_kwargs(model.config.get_text_config(decoder=True))
    classes = [DYNAMIC_LAYER_TYPE_MAPPING.get(kind) for kind in kinds]
    return not classes or any(layer is None or issubclass(layer, CacheLayerMixin) for layer in classes)


def _final_logits(outputs, count: int) -> torch.Tensor:
    """[rows, count, vocab] float32: the logits of the last ``count`` positions."""
    return outputs.logits[:, -count:, :].to(copy=True, dtype=torch.float32)


def _entropy(probabilities: torch.Tensor) -> np.ndarray:
    p = probabilities.double()
    return (-(p * torch.where(p > 0, p.log(), torch.zeros_like(p))).sum(dim=-1)).float().cpu().numpy()


def _trim(sequence: list[int], prompt_length: int, eos: list[int]) -> list[int]:
    """A greedy/sampled row up to and including its first end-of-sequence token (the rest is padding)."""
    for index in range(prompt_length, len(sequence)):
        if sequence[index] in eos:
            return sequence[: index + 1]
    return sequence


class _LabelCache:
    """Readable token labels, computed once per token id."""

    def __init__(self, tokenizer):
        self.tokenizer, self.cache = tokenizer, {}

    def __call__(self, token_id: int) -> str:
        token_id = int(token_id)
        if token_id not in self.cache:
            self.cache[token_id] = token_labels(self.tokenizer, [token_id])[0]
        return self.cache[token_id]


def _stitched_attention(lm, run: _Run, calls, result: _Result) -> dict:
    """The decoder's attention of every forward pass, stitched into one matrix per layer and head."""
    from explorer.models.generation_attention import stitch, stitch_returned

    if run.returned is not None:
        return stitch_returned(lm, run.returned, result.sequences[0], run.prompt_ids[0].tolist(), run.notes)
    if run.cacheless:  # each pass ran the whole sequence: the last one holds every row
        calls = list({id(call.module): call for call in calls}.values())
    return stitch(lm, calls, result.sequences[0], run.prompt_ids[0].tolist(), run.seq2seq)
