"""The one way the app runs a model: ``run(kind, model_name, *inputs, progress=None, **settings)``.

Every model run the pages ask for (a capture and its check, a decoding, next-token logits, the logit lens, the
head probes, ablation effects, activation patching, input attribution and its targets, the anatomy, a text's
tokens and embeddings) goes through ``run``:

- **One key scheme**: ``(kind, model name, the job's arguments)``, the arguments bound to the job's own
  signature with its defaults filled in, so ``run("capture", m, "a text")`` and
  ``run("capture", m, "a text", None, None)`` are one result, never two.
- **One shared results cache** (``results_cache()``, bounded in bytes, see ``explorer.caching``): one object
  per result for every session of the server; concurrent requests for one key run the model once. A result
  evicted by another session is computed again, never returned as None: ``run`` never checks then reads.
- **The forward gate** (``serving.FORWARD_GATE``): at most a few model runs at once on the whole server.
- **One progress path**: a caller's ``progress(label, waiting, unit)`` is entered only when this call has to
  compute (a cache hit draws nothing); it says what runs and how many requests wait first, and, for the jobs
  that count their steps (``unit``, e.g. tokens generated), returns a ``step(done, total)`` for the job.

Models are loaded here too (``model(name)``), once per name for the whole server, under the hosted-mode policy.
No Streamlit here: ``explorer.ui.results`` supplies the pages' progress (a spinner, a progress bar).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import numpy as np

import explorer
from explorer import settings
from explorer.caching import MIB, ByteBudgetCache
from explorer.compute.inputs import reconcile
from explorer.data._freeze import freeze_arrays
from explorer.data.anatomy import Embeddings, TokenRow
from explorer.hosting import POLICY
from explorer.serving import FORWARD_GATE, freeze_long_lived

__all__ = ["JOBS", "InputVectors", "model", "models_cache", "needs_download", "results_cache", "run"]


def __getattr__(name: str):
    # The capture layer imports torch (seconds): the app draws its loading line before anything asks for it.
    if name == "BUNDLED_MODELS":
        from explorer.models.loading import BUNDLED_MODELS

        return BUNDLED_MODELS
    raise AttributeError(f"module 'explorer.gateway' has no attribute {name!r}")


DEFAULT_BUDGET_MB = 1024
HOSTED_BUDGET_MB = 512
MAX_MODELS = 3  # loaded models kept at once (each is hundreds of MB)

# What a caller shows while its run is computed: entered with the job's label, how many requests wait first,
# and the job's step unit (None for jobs that do not count steps); gives back the job's step(done, total).
Progress = Callable[[str, int, str | None], AbstractContextManager]


# The server's shared caches. A sentence-length MiniLM capture is about 0.2 MB and a 128-token one about 6 MB,
# so a class of 40 with a few texts each stays far below the budget (``EXPLORER_CACHE_MB``, default 1024 MiB,
# 512 MB in hosted mode) and their slider moves never run the model again; five or ten 500-token captures
# (90 MB each) fill it, and the least recently used are then run again when asked for. Hosted mode keeps less
# because a class server's memory is shared by forty sessions that each hold the result they are drawing: with
# forty 500-token texts at once, 1024 MB of kept results took the server past 3 GB (issue 13).
# Process-wide singletons, not ``st.cache_resource``: any visitor can send Streamlit's clear-cache request (a
# menu item, or one websocket message), which empties every ``st.cache_*`` for the whole class. These survive it.
@functools.cache
def results_cache() -> ByteBudgetCache:
    default = HOSTED_BUDGET_MB if POLICY.hosted else DEFAULT_BUDGET_MB
    return ByteBudgetCache(settings.number("EXPLORER_CACHE_MB", default) * MIB)


@functools.cache
def models_cache() -> ByteBudgetCache:
    """Loaded models by name, least recently used dropped beyond ``MAX_MODELS`` (each entry and key counts 1)."""
    return ByteBudgetCache(2 * MAX_MODELS, size_of=lambda value: 1)


def model(name: str, progress: Callable[[str], None] | None = None) -> explorer.LoadedModel:
    """One loaded model per name, shared by every session and thread (capture records into a ContextVar).

    ``progress`` receives each loading stage for the caller that loads it. In hosted mode the server's Hub token
    is never used and models over the parameter cap are refused before download."""
    return models_cache().get(name, lambda: _load(name, progress))


def _load(name: str, progress) -> explorer.LoadedModel:
    lm = explorer.load_model(
        name,
        # The server's device (EXPLORER_DEVICE, default: a GPU if there is one). The app loads in float32 on one
        # device: no page or link chooses a dtype or a device map.
        device=os.environ.get("EXPLORER_DEVICE") or "auto",
        progress=progress,
        token=False if POLICY.hosted else None,
        max_parameters=POLICY.max_parameters,
        hub_only=POLICY.hosted,  # a visitor's id resolves through the Hub cache, never a folder here
    )
    _LOADED.add(name)
    freeze_long_lived()
    return lm


_LOADED: set[str] = set()  # names this server process has loaded


def needs_download(name: str) -> bool:
    """Whether loading ``name`` may download it: not loaded before here, not bundled, not in the Hub cache."""
    from explorer.models.loading import BUNDLED_MODELS, in_hub_cache  # at first use: torch (see explorer's _LAZY)

    return name not in _LOADED and name not in BUNDLED_MODELS and not in_hub_cache(name)


# --- The jobs: each a function of (the model, *inputs, **settings), or of another job's result. -----------------
# Wrappers, not explorer's functions themselves: their signatures make the keys (positional inputs with their
# defaults), and they look explorer's function up when they run (a test may count its calls).


def _capture(lm, text: str, text_pair: str | None = None, target: str | None = None) -> explorer.AttentionCapture:
    return explorer.capture(lm, text, text_pair=text_pair, target=target)


def _verification(capture: explorer.AttentionCapture) -> dict[str, float]:
    """{stack: max |recomputed - captured|} (about 1 s at 512 tokens)."""
    return {name: stack.verify(capture.device) for name, stack in capture.stacks.items()}


def _decode(lm, prompt: str, *, progress=None, **settings) -> explorer.DecodeTrace:
    return explorer.decode(lm, prompt, progress=progress, **settings)


def _decode_together(lm, prompt: str, variants: tuple, *, progress=None, **settings) -> tuple:
    return explorer.decode_together(lm, prompt, [dict(variant) for variant in variants], progress=progress, **settings)


def _each_variant(inputs: tuple, settings: dict, traces: tuple):
    """Each of ``decode together``'s traces is the one a ``decode`` run with its variant's settings would give."""
    prompt, variants = inputs
    for variant, trace in zip(variants, traces, strict=True):
        yield "decode", (prompt,), {**settings, **dict(variant)}, trace


def _kv_cache(lm, prompt: str, steps: int = 8):
    return explorer.kv_cache(lm, prompt, steps=steps)


def _logits(lm, prompt: str, ablate: tuple = ()) -> explorer.NextTokenLogits:
    return explorer.next_token_logits(lm, prompt, ablate=ablate)


def _lens(lm, text: str, target: str | None = None) -> explorer.LogitLens:
    return explorer.logit_lens(lm, text, target=target)


def _probes(lm, n: int, seed: int) -> explorer.HeadProbes:
    return explorer.head_probes(lm, n=n, seed=seed)


def _ablation_effects(lm, prompt: str, *, progress=None) -> explorer.HeadAblationEffects:
    return explorer.head_ablation_effects(lm, prompt, progress=progress)


def _patching(
    lm, clean: str, corrupted: str, answer: str | None = None, counterfactual: str | None = None, *, progress=None
) -> explorer.Patching:
    return explorer.patch(lm, clean, corrupted, answer=answer, counterfactual=counterfactual, progress=progress)


def _attribution(
    lm, prompt: str, target: str | int | None = None, method: str = "integrated_gradients", steps: int = 64
) -> explorer.Attribution:
    return explorer.attribute(lm, prompt, target=target, method=method, steps=steps)


def _attribution_targets(lm, prompt: str, k: int = 10):
    from explorer.models.attribution import top_targets  # at first use: torch (see explorer's _LAZY)

    return top_targets(lm, prompt, k)


def _unexplained(lm) -> str | None:
    from explorer.models.attribution import unexplained  # at first use: torch (see explorer's _LAZY)

    return unexplained(lm)  # an encoder's masked-LM head, read from its checkpoint once per model


def _anatomy(lm):
    return explorer.model_anatomy(lm)


def _longest_n(lm) -> int:
    from explorer.models.probes import longest_n  # at first use: torch (see explorer's _LAZY)

    return longest_n(lm)  # a scan of the whole vocabulary: once per model


def _embeddings(lm, token_ids: tuple[int, ...]) -> Embeddings:
    return explorer.embeddings(lm, token_ids)


@dataclass(frozen=True, eq=False)
class InputVectors:
    """A text as the model's first layer receives it.

    rows          the tokenization table (``explorer.tokenize``)
    embeddings    token, position and token-type embeddings (at least 32 positions, for the position chart)
    summed        [token, hidden]: their sum, normalised as the model does (``explorer.summed_embeddings``); in
                  ``first_layer``'s shape where that layer reads copies of it (``explorer.compute.inputs``)
    norm          the name of the norm applied to the sum, or None
    first_layer   [token, hidden]: what the model's first layer receives, from a forward pass (the check); with a
                  stream axis, or the model's own rows first, where it reads those (``embeddings.note`` says so)
    """

    rows: tuple[TokenRow, ...]
    embeddings: Embeddings
    summed: np.ndarray
    norm: str | None
    first_layer: np.ndarray

    def __post_init__(self):
        freeze_arrays(self)

    @property
    def largest_difference(self) -> float:
        """max |summed - first layer's input|: 0 up to rounding when the sum is all the model does before it."""
        if self.summed.shape != self.first_layer.shape:  # a model whose rows do not add up (``embeddings.note``)
            return float("inf")
        return float(np.abs(self.summed - self.first_layer).max())


def _input_vectors(lm, text: str, text_pair: str | None = None) -> InputVectors:
    rows = explorer.tokenize(lm, text, text_pair or None)
    ids = [row.token_id for row in rows]
    types = [0 if row.segment != "B" else 1 for row in rows]
    found = explorer.embeddings(lm, ids, types, positions=max(len(ids), 32))
    summed, norm = explorer.summed_embeddings(lm, found)
    first_layer = explorer.first_layer_input(lm, ids, types)
    summed, note = (summed, found.note) if found.note else reconcile(summed, first_layer)
    return InputVectors(rows, dataclasses.replace(found, note=note), summed, norm, first_layer)


@dataclass(frozen=True)
class Job:
    """One kind of result: ``compute`` takes the model (or, with ``source``, that kind's result for the same
    inputs), then the inputs and settings.

    label   what the progress says while it runs
    unit    for jobs that report steps: what the progress bar says ("{done} of {total} tokens"), else None
    source  a kind whose result this job reads instead of the model (a capture's check reads the capture)
    also    kinds read from this job's result, computed in the same gate slot: a session must not hold a long
            capture while it queues a second time behind the class for its check (forty would pile up)
    gated   through ``FORWARD_GATE``: everything that runs the model or holds a run's worth of memory
    spread  results of other jobs this one's result holds: ``spread(inputs, settings, result)`` yields
            (kind, inputs, settings, value), each kept under that kind's key, so that its run finds it
    """

    compute: Callable
    label: str
    unit: str | None = None
    source: str | None = None
    also: tuple[str, ...] = ()
    gated: bool = True
    spread: Callable | None = None


JOBS: dict[str, Job] = {
    "capture": Job(_capture, "Running the model…", also=("verification",)),
    "verification": Job(_verification, "Checking the captured weights…", source="capture"),
    "decode": Job(_decode, "Generating…", unit="Generating: {done} of {total} tokens"),
    # Greedy search and sampling variants of one prompt in one batch (variants: tuples of (name, value) pairs);
    # each trace is also kept as the "decode" its settings ask for.
    "decode together": Job(
        _decode_together,
        "Generating…",
        unit="Generating every variant at once: {done} of {total} tokens",
        spread=_each_variant,
    ),
    "logits": Job(_logits, "Running the model…"),
    "kv cache": Job(_kv_cache, "Timing every pass with the KV cache and without it…"),
    "lens": Job(_lens, "Reading every layer through the lens…"),
    "probes": Job(_probes, "Running the model on the probe…"),
    "ablation effects": Job(
        _ablation_effects, "Ablating each head…", unit="Ablating each head in turn: {done} of {total} heads"
    ),
    "patching": Job(
        _patching,
        "Patching the clean run into the corrupted one…",
        unit="Patching one activation at a time: {done} of {total} runs",
    ),
    "attribution": Job(_attribution, "Attributing the prediction to each input token…"),
    "attribution targets": Job(_attribution_targets, "Running the model…"),
    "unexplained": Job(_unexplained, "Looking for the model's masked-LM head…"),
    "anatomy": Job(_anatomy, "Counting parameters…", gated=False),
    "longest n": Job(_longest_n, "Reading the vocabulary…", gated=False),
    "embeddings": Job(_embeddings, "Reading the embeddings…"),
    "input vectors": Job(_input_vectors, "Running the model…"),
}


def run(kind: str, model_name: str, *inputs, progress: Progress | None = None, **settings):
    """The result of job ``kind`` on the model ``model_name``, computed once for the whole server (see above)."""
    job = JOBS[kind]
    key = key_of(kind, model_name, inputs, settings)
    if job.source is None:
        source = None  # the model, loaded only if this is computed
    else:  # first, before this job's own flight: the source's run may compute this result too (``Job.also``)
        settings, theirs = _split(job, settings)
        source = run(job.source, model_name, *inputs, progress=progress, **theirs)
        inputs = ()
    cache = results_cache()
    if progress is None or key in cache:
        # A hit draws nothing. Evicted since the check? ``get`` computes it again (quietly): never None.
        return cache.get(key, lambda: _compute(job, key, model_name, source, inputs, settings, None))
    waiting = FORWARD_GATE.waiting + (1 if FORWARD_GATE.busy else 0)
    with progress(job.label, waiting, job.unit) as step:
        return cache.get(key, lambda: _compute(job, key, model_name, source, inputs, settings, step))


def key_of(kind: str, model_name: str, inputs: tuple, settings: dict) -> tuple:
    """(kind, model name, every argument of the job by name, its defaults filled in, sorted)."""
    job = JOBS[kind]
    if job.source is not None:  # the source's arguments, then the job's own
        own, theirs = _split(job, settings)
        return (kind, *key_of(job.source, model_name, inputs, theirs)[1:], tuple(sorted(own.items())))
    bound = _signature(job.compute).bind(None, *inputs, **settings)
    bound.apply_defaults()
    arguments = dict(list(bound.arguments.items())[1:])  # not the model
    arguments.pop("progress", None)
    for name, parameter in bound.signature.parameters.items():  # **settings: each setting by its own name
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            arguments.update(arguments.pop(name, {}))
    return (kind, model_name, tuple(sorted(arguments.items())))


def _split(job: Job, settings: dict) -> tuple[dict, dict]:
    """A sourced job's settings: (its own, by its signature; the rest, its source's)."""
    own = list(_signature(job.compute).parameters)[1:]
    return {k: v for k, v in settings.items() if k in own}, {k: v for k, v in settings.items() if k not in own}


@functools.cache
def _signature(compute: Callable) -> inspect.Signature:
    return inspect.signature(compute)


def _compute(job: Job, key: tuple, model_name: str, source, inputs: tuple, settings: dict, step):
    source = model(model_name) if source is None else source
    if job.unit is not None:
        settings = {**settings, "progress": step}

    def compute():
        result = job.compute(source, *inputs, **settings)
        for kind in job.also:  # in this slot (see Job.also); never waiting on another session's run of it
            results_cache().offer((kind, *key[1:], ()), functools.partial(JOBS[kind].compute, result))
        for kind, its_inputs, its_settings, value in job.spread(inputs, settings, result) if job.spread else ():
            its_settings = {name: setting for name, setting in its_settings.items() if name != "progress"}
            results_cache().offer(key_of(kind, model_name, its_inputs, its_settings), lambda value=value: value)
        return result

    return FORWARD_GATE.run(compute) if job.gated else compute()
