"""``patch``: activation patching, the clean run's activations copied one at a time into the corrupted run.

The clean prompt runs once with every activation patched later recorded: the residual stream at the input of
each layer and at the output of the last, each head's output before the output projection, each MLP's output.
The corrupted prompt then runs in batches of identical rows, each row with one activation replaced by the clean
one (a residual-stream cell at one position, or a head or an MLP at every position), and the logit difference
read at the metric's position. No padding, so each row is the single patched run up to the rounding of batched
matrix products; three extra rows (the whole stream at layer 0 and at layer L, and nothing) measure that
rounding (``Patching.verification``).

Where the layers and MLPs are is found in the module graph (``explorer.models.sites``), with the shapes those
modules see: OPT's ``fc2`` reads positions flattened into rows, GPT-OSS's MLP returns a tuple, XLNet's layers see
the stream time-first ([position, row, hidden]; patched as [row, position, hidden], turned there and back). The
heads are patched where head ablation zeroes them (``recorder.editing``): in the output of the recording
attention, or, for attention computed in the model's own code, in the input of its output projection
(``ablation.layout``). The hooks live only while a call runs (removed in ``finally``) and act only on the forward
passes of the call that registered them, named in a context variable: another thread's run of the shared model
passes through them unchanged. A module that runs several layers (ALBERT's shared layer, its MLP and attention) is
hooked once and acts as layer k on its k-th call of the pass.

Not every layer has every site: a hybrid's Mamba or linear-attention layer has no heads (its row of ``heads`` is
NaN), a state-space model has neither heads nor an MLP apart from its mixer, and a stack whose heads no hook reaches
(XLNet's, combined in its own code) is patched in its residual stream and MLPs only. ``Patching.headless`` says why,
in the visitor's words. Where a layer's attention runs its output projection more than once (Pegasus-X's encoder: on
its global tokens, then on the text's), a head is patched in every call with the clean run's of the same call, and
``Patching.streams`` says so.
"""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np
import torch

from explorer.checks import given_text
from explorer.data import STACK_DECODER, STACK_ENCODER
from explorer.data.patching import Patching
from explorer.errors import InputError
from explorer.models import ablation, recorder
from explorer.models.architectures import KIND_DECODER, KIND_ENCODER, KIND_ENCODER_DECODER
from explorer.models.capture import dtype_name
from explorer.models.decoding import special_token_ids
from explorer.models.distribution import appended_positions, prediction_inputs
from explorer.models.head_effects import last_position_only
from explorer.models.lens import masked_lm_head
from explorer.models.sites import first_tensor, probe_ids, record_calls, rows_view, stack_sites
from explorer.models.tokens import token_labels

ROWS_PER_PASS = 32  # patched runs per forward pass
TOKENS_PER_PASS = 2048  # and at most this many tokens in one pass (rows × prompt length): bounds the memory


# The stack each kind patches: a decoder's own, an encoder's, an encoder-decoder's encoder.
STACK_OF_KIND = {KIND_DECODER: STACK_DECODER, KIND_ENCODER: STACK_ENCODER, KIND_ENCODER_DECODER: STACK_ENCODER}

# Each row of a patched batch is one cell: (site, layer, position or head or None).
RESIDUAL, HEAD, MLP, STREAM, NOTHING = "residual", "head", "mlp", "stream", "nothing"

# The call whose hooks act on this context's forward pass, and what they do there (a ``_Run``).
_active: ContextVar = ContextVar("explorer_patching", default=None)


def patch(lm, clean: str, corrupted: str, *, answer=None, counterfactual=None, progress=None) -> Patching:
    """Activation patching of ``clean`` into ``corrupted`` (see ``explorer.data.patching``). ``answer`` and
    ``counterfactual`` are tokens (text of one token, or an id); by default the model's top next token on the
    clean and on the corrupted prompt. ``progress(done, total)`` is called as batches of patched runs finish."""
    if lm.kind == KIND_ENCODER:  # read through its masked-LM head: where it has none, that is the reason, said first
        masked_lm_head(lm)
    model = _Model.of(lm)
    clean_inputs, corrupted_inputs = _inputs(lm, clean, "clean"), _inputs(lm, corrupted, "corrupted")
    _check_lengths(clean_inputs, corrupted_inputs)
    metric = _metric_position(lm, clean_inputs, corrupted_inputs)
    clean_inputs, corrupted_inputs = (
        prediction_inputs(lm, i["input_ids"]) or i for i in (clean_inputs, corrupted_inputs)
    )
    with _hooked(model) as call:
        recorded = _Recorded()
        clean_logits = call.run(clean_inputs, recorded, 1, metric)[0]
        corrupted_logits = call.run(corrupted_inputs, None, 1, metric)[0]
        answer_id = _token_id(lm, answer, int(clean_logits.argmax()), "answer", clean_logits.shape[0])
        against = _token_id(lm, counterfactual, int(corrupted_logits.argmax()), "counterfactual", clean_logits.shape[0])
        ld_clean, ld_corrupted = (float(x[answer_id] - x[against]) for x in (clean_logits, corrupted_logits))
        _check_metric(lm, answer_id, against, ld_clean, ld_corrupted)
        columns = model.columns(clean_inputs["input_ids"].shape[1], recorded)
        cells = _cells(model, columns)
        patched = _patched_lds(call, model, corrupted_inputs, recorded, cells, metric, (answer_id, against), progress)
    recovered = dict(zip(cells, (patched - ld_corrupted) / (ld_clean - ld_corrupted), strict=True))
    tokens, lds = (answer_id, against), (ld_clean, ld_corrupted)
    result = _result(lm, model, (clean_inputs, corrupted_inputs), columns, tokens, lds, metric, recovered)
    return replace(result, streams=" ".join(filter(None, (result.streams, _head_calls_note(model, recorded)))))


# -- the model's parts ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Model:
    """The loaded model with the modules patched: its layers, their MLPs, each layer's attention module (by id;
    None for a layer without attention, a hybrid's Mamba or linear-attention layer, which has no heads)."""

    lm: object
    stack: str
    layers: tuple[torch.nn.Module, ...]
    mlps: tuple[torch.nn.Module, ...]
    attentions: tuple[int | None, ...]
    num_heads: int
    unreached: str = ""  # why no head of the stack can be patched, where the model has heads but no hook reaches them
    time_first: bool = False  # its layers see the stream as [position, row, hidden] (XLNet's)
    # Where the model predicts at positions its generation appends after the text (XLNet): how many, the streams
    # its layers carry in that pass (XLNet's content and query streams) and how often each layer calls its MLP.
    appended: int = 0
    streams: int = 1
    mlp_calls: int = 1
    # How often each layer's attention runs its output projection: a head's output in each call is patched with the
    # clean run's of the same call (Pegasus-X's encoder: on its global tokens, then on the text's tokens).
    head_calls: int = 1

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @classmethod
    def _parts(cls, lm) -> _Model:
        stack = STACK_OF_KIND[lm.kind]
        sites = stack_sites(lm, stack)
        layers, mlps, layout = sites.layers, sites.mlps, {"time_first": sites.time_first}
        if not recorder.attends(
            lm
        ):  # Mamba: a residual stream, and in each layer a mixer that is neither heads nor MLP
            return cls(lm, stack, layers, mlps, (None,) * len(layers), 0, **layout)
        if None in mlps:
            missing = f"no call in its layer {mlps.index(None)} adds a feed-forward output to the residual stream"
            raise InputError(_not_applicable(lm, missing))
        try:
            found = ablation.layout(lm, shared=True, stacks=(stack,), edits=True)
        except ablation.Unsupported as error:  # heads out of reach: the residual stream and the MLPs are still patched
            return cls(lm, stack, layers, mlps, (None,) * len(layers), 0, unreached=error.why, **layout)
        modules, heads = found.modules.get(stack, ()), found.heads.get(stack, ())
        if not modules:  # attention in its own code beside a recorded stack, its heads out of reach: the probe's why
            unreached = found.unreached.get(stack, f"no attention module of its {stack} was found")
            return cls(lm, stack, layers, mlps, (None,) * len(layers), 0, unreached=unreached, **layout)
        attentions = _attention_of_layers(lm, stack, layers, modules)
        if len(set(heads)) != 1:
            raise InputError(_not_applicable(lm, f"its {stack}'s layers have different numbers of heads ({heads})"))
        calls = found.projection_calls.get(stack, (1,))
        if len(set(calls)) != 1:
            raise InputError(_not_applicable(lm, f"its {stack}'s layers run their output projections {calls} times"))
        return cls(lm, stack, layers, mlps, attentions, heads[0], head_calls=calls[0], **layout)

    @classmethod
    def of(cls, lm) -> _Model:
        """The model's parts, and where its generation's first pass appends positions to predict at (XLNet), the
        streams its layers carry there and its MLPs' calls per layer, counted once per model in one such pass
        (hooks of this context only: ``sites.record_calls``)."""
        model = cls._parts(lm)
        if not appended_positions(lm):
            return model
        with _layouts_lock:
            if lm.model not in _first_pass_layouts:
                _first_pass_layouts[lm.model] = _first_pass_layout(lm, model)
        return replace(model, **_first_pass_layouts[lm.model])

    def columns(self, positions: int, recorded: _Recorded) -> list[int]:
        """The cells of the residual map, as rows of the streams laid end to end (``edit_streams``): the text's
        positions in the first stream (not the appended ones: no text, and no position reads them; nor Longformer's
        padding), then every row of the further streams (XLNet's query stream: the position it predicts at)."""
        text = positions - self.appended
        if self.streams == 1:  # one stream: its rows past the text are padding (Longformer's window multiple)
            return list(range(text))
        return [*range(text), *range(positions, recorded.residual[0].shape[0])]

    def edit_streams(self, streams, edit: Callable[[torch.Tensor], torch.Tensor]) -> list[torch.Tensor]:
        """``edit`` applied to the layer's streams as one [row, position, hidden] tensor, each stream's positions
        after the one before's, and the streams returned in the layout the layer saw them."""
        if len(streams) == 1:
            return [self.as_rows(streams[0], edit)]
        rows = [stream.transpose(0, 1) if self.time_first else stream for stream in streams]
        edited = edit(torch.cat(rows, dim=1)).split([row.shape[1] for row in rows], dim=1)
        return [stream.transpose(0, 1) if self.time_first else stream for stream in edited]

    def as_rows(self, tensor: torch.Tensor, edit: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """``edit`` applied to ``tensor`` as [row, position, ...] and returned in the layout the module saw: XLNet's
        layers see [position, row, ...], turned there and back."""
        if not self.time_first:
            return edit(tensor)
        return edit(tensor.transpose(0, 1)).transpose(0, 1)

    def headless(self) -> list[int]:
        """The layers with no attention module: no head sites there."""
        return [layer for layer, attention in enumerate(self.attentions) if attention is None]

    def without_mlp(self) -> list[int]:
        """The layers with no feed-forward (Mamba's, whose one branch is its mixer): no MLP site there."""
        return [layer for layer, mlp in enumerate(self.mlps) if mlp is None]


# The first pass's layout of a model that predicts after the text, probed once per model and kept with it.
_first_pass_layouts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_layouts_lock = threading.Lock()


def _first_pass_layout(lm, model: _Model) -> dict:
    """How many positions the first pass appends, the streams its layers carry and how often a layer calls its MLP
    there, counted in one such pass over a probe text."""
    with torch.inference_mode(), record_calls(lm.model) as calls:
        lm.model(**prediction_inputs(lm, probe_ids(lm)), use_cache=False)
    first = next(c for c in calls if c.module is model.layers[0])
    mlp_calls = sum(c.module is model.mlps[0] and first.contains(c) for c in calls) if model.mlps[0] else 1
    return {"appended": appended_positions(lm), "streams": _streams(first), "mlp_calls": max(mlp_calls, 1)}


def _streams(layer_call) -> int:
    """How many streams a layer carries: its hidden states and each further tensor it returns after them of their
    width, [position, row, hidden] (XLNet's query stream; a tensor of attention weights is 4-D)."""
    width = layer_call.input.shape[-1]
    returned = layer_call.returned or (layer_call.output,)
    count = 0
    while count < len(returned) and returned[count].dim() == 3 and returned[count].shape[-1] == width:
        count += 1
    return max(count, 1)


def _attention_of_layers(lm, stack: str, layers, modules: tuple[int, ...]) -> tuple[int | None, ...]:
    """Each layer's attention module (by id): the one of ``modules`` inside it, None where none is (a hybrid's
    Mamba layer). Every attention module must be one layer's, and a layer has at most one."""
    inside = [[a for a in dict.fromkeys(modules) if a in {id(m) for m in layer.modules()}] for layer in layers]
    placed = {a for found in inside for a in found}
    if any(len(found) > 1 for found in inside) or placed != set(modules):
        mismatch = f"its {len(layers)} layers do not match its {stack}'s attention modules ({len(set(modules))})"
        raise InputError(_not_applicable(lm, mismatch))
    return tuple(found[0] if found else None for found in inside)


def _not_applicable(lm, why: str) -> str:
    return f"Activation patching does not apply to {lm.name} ({type(lm.model).__name__}): {why}."


# -- inputs and the metric --------------------------------------------------------------------------------------


def _inputs(lm, text: str, which: str) -> dict[str, torch.Tensor]:
    """The prompt's [1, position] tensors on the model's device, as its kind takes them."""
    if not given_text(text, f"{which} prompt").strip():
        raise InputError(f"Type the {which} prompt.")
    encoded = lm.tokenizer(text, return_tensors="pt")
    names = ("input_ids", "attention_mask", "token_type_ids") if lm.kind == KIND_ENCODER else ("input_ids",)
    inputs = {name: encoded[name].to(lm.device) for name in names if name in encoded}
    length = inputs["input_ids"].shape[1]
    if not 0 < length <= lm.max_tokens:
        raise InputError(f"The {which} prompt is {length} tokens; {lm.name} takes 1 to {lm.max_tokens}.")
    return inputs


def _check_lengths(clean: dict, corrupted: dict) -> None:
    clean_length, corrupted_length = clean["input_ids"].shape[1], corrupted["input_ids"].shape[1]
    if clean_length != corrupted_length:
        raise InputError(
            f"The clean prompt is {clean_length} tokens and the corrupted prompt {corrupted_length}: patching copies "
            "activations position by position, so the two must tokenize to the same length. Change the corrupted "
            "prompt by words of the same token length."
        )


def _metric_position(lm, clean: dict, corrupted: dict) -> int | None:
    """Where the logits are read: a decoder's last position, an encoder's one [MASK] (the same in both prompts),
    None for an encoder-decoder (its decoder's first token)."""
    if lm.kind == KIND_DECODER:
        return clean["input_ids"].shape[1] - 1
    if lm.kind == KIND_ENCODER_DECODER:
        return None
    mask_id = lm.tokenizer.mask_token_id
    if mask_id is None:
        raise InputError(f"{lm.name}'s tokenizer has no mask token, so it predicts no token to patch for.")
    found = [torch.nonzero(inputs["input_ids"][0] == mask_id).flatten().tolist() for inputs in (clean, corrupted)]
    if any(len(positions) != 1 for positions in found) or found[0] != found[1]:
        raise InputError(
            f"An encoder predicts a masked token: put one {lm.tokenizer.mask_token} in each prompt, at the same "
            f"position (found at {found[0]} in the clean prompt and {found[1]} in the corrupted one)."
        )
    return found[0][0]


def _token_id(lm, token, default: int, which: str, vocab: int) -> int:
    """The id of a typed token (text that is one token, or an id); ``default`` for None."""
    if token is None:
        return default
    if isinstance(token, str):
        ids = lm.tokenizer(token, add_special_tokens=False)["input_ids"]
        if len(ids) != 1:
            pieces = ", ".join(repr(label) for label in token_labels(lm.tokenizer, ids))
            raise InputError(
                f"The {which} must be one token of {lm.name}; {token!r} is {len(ids)} tokens ({pieces or 'none'})."
            )
        return int(ids[0])
    if isinstance(token, bool) or not hasattr(token, "__index__") or not 0 <= int(token) < vocab:
        raise InputError(f"The {which} must be a token's text or an id from 0 to {vocab - 1} (got {token!r}).")
    return int(token)


def _check_metric(lm, answer: int, against: int, ld_clean: float, ld_corrupted: float) -> None:
    if answer == against:
        label = token_labels(lm.tokenizer, [answer])[0]
        raise InputError(
            f"The answer and the counterfactual are both {label!r} (by default, the top next token of the clean and "
            "of the corrupted prompt), so the logit difference is 0 on both prompts and nothing can be recovered. "
            "Change the corrupted prompt so that the model predicts something else, or type a counterfactual."
        )
    if ld_clean == ld_corrupted:
        raise InputError(
            f"The logit difference is {ld_clean:.4f} on both prompts, so nothing can be recovered: make the "
            "prompts differ where it changes the prediction."
        )


# -- the runs ---------------------------------------------------------------------------------------------------


@dataclass
class _Recorded:
    """The clean run's activations by layer: residual (L + 1) [position, hidden] (the streams' positions end to
    end, ``_Model.edit_streams``), heads (L, each call of the layer's output projection: Pegasus-X's encoder's two)
    [position, head, head_dim], mlp (L, each call of the layer's MLP: one per stream in XLNet's) [position, hidden]."""

    residual: dict[int, torch.Tensor] = field(default_factory=dict)
    heads: dict[int, torch.Tensor] = field(default_factory=dict)
    mlp: dict[int, torch.Tensor] = field(default_factory=dict)

    def at_residual(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        self.residual[layer] = hidden[0].clone()
        return hidden

    def at_heads(self, layer: int, output: torch.Tensor, call: int = 0) -> torch.Tensor:
        self.heads[layer, call] = output[0].clone()
        return output

    def at_mlp(self, layer: int, output: torch.Tensor, call: int = 0) -> torch.Tensor:
        self.mlp[layer, call] = output[0].clone()
        return output


@dataclass
class _Patches:
    """One batch's replacements, row by row: the clean activations where each row's cells say."""

    clean: _Recorded
    residual: dict[int, tuple[torch.Tensor, torch.Tensor]]  # layer -> (rows, positions)
    heads: dict[int, torch.Tensor]  # layer -> [row, head] bool, True: the clean head
    mlp: dict[int, torch.Tensor]  # layer -> rows

    def at_residual(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        if layer not in self.residual:
            return hidden
        rows, positions = self.residual[layer]
        hidden = hidden.clone()
        hidden[rows, positions] = self.clean.residual[layer][positions]
        return hidden

    def at_heads(self, layer: int, output: torch.Tensor, call: int = 0) -> torch.Tensor:
        if layer not in self.heads:
            return output
        return torch.where(self.heads[layer][:, None, :, None], self.clean.heads[layer, call][None], output)

    def at_mlp(self, layer: int, output: torch.Tensor, call: int = 0) -> torch.Tensor:
        if layer not in self.mlp:
            return output
        output = output.clone()
        output[self.mlp[layer]] = self.clean.mlp[layer, call]
        return output


def _patches(clean: _Recorded, cells: list[tuple], columns: list[int], num_heads: int, device) -> _Patches:
    residual, heads, mlp = defaultdict(list), {}, defaultdict(list)
    for row, (site, layer, index) in enumerate(cells):
        if site == RESIDUAL:
            residual[layer].append((row, index))
        elif site == STREAM:
            residual[layer].extend((row, position) for position in columns)
        elif site == HEAD:
            heads.setdefault(layer, torch.zeros((len(cells), num_heads), dtype=torch.bool))[row, index] = True
        elif site == MLP:
            mlp[layer].append(row)
    return _Patches(
        clean,
        {
            layer: tuple(torch.tensor(axis, device=device) for axis in zip(*pairs, strict=True))
            for layer, pairs in residual.items()
        },
        {layer: mask.to(device) for layer, mask in heads.items()},
        {layer: torch.tensor(rows, device=device) for layer, rows in mlp.items()},
    )


def _cells(model: _Model, columns: list[int]) -> list[tuple]:
    """Every cell of the three maps (no head cell in a layer without attention), then the three checks."""
    layers, headless = model.num_layers, model.headless()
    return [
        *((RESIDUAL, layer, position) for layer in range(layers + 1) for position in columns),
        *((HEAD, layer, head) for layer in range(layers) if layer not in headless for head in range(model.num_heads)),
        *((MLP, layer, None) for layer in range(layers) if layer not in model.without_mlp()),
        (STREAM, 0, None),
        (STREAM, layers, None),
        (NOTHING, None, None),
    ]


def _patched_lds(call, model: _Model, inputs, recorded, cells, metric, tokens, progress) -> np.ndarray:
    """[cell] float64: the logit difference with each cell patched, a batch of cells per forward pass."""
    positions = inputs["input_ids"].shape[1]
    columns = model.columns(positions, recorded)
    per_pass = max(1, min(ROWS_PER_PASS, TOKENS_PER_PASS // positions))
    lds = np.empty(len(cells))
    for start in range(0, len(cells), per_pass):
        chunk = cells[start : start + per_pass]
        patches = _patches(recorded, chunk, columns, model.num_heads, model.lm.device)
        logits = call.run(inputs, patches, len(chunk), metric)
        lds[start : start + len(chunk)] = (logits[:, tokens[0]] - logits[:, tokens[1]]).double().numpy()
        if progress is not None:
            progress(start + len(chunk), len(cells))
    return lds


@dataclass(frozen=True)
class _Call:
    """One ``patch`` call's hooks: ``run`` makes them act (record or patch) on one forward pass of this thread."""

    model: _Model

    def run(self, inputs: dict, plan, rows: int, metric: int | None) -> torch.Tensor:
        """[row, vocab] float32 logits on the CPU at the metric's position, ``plan`` recording or patching."""
        batch = {name: tensor.expand(rows, *tensor.shape[1:]) for name, tensor in inputs.items()}
        attentions = dict.fromkeys(a for a in self.model.attentions if a is not None)
        edits = {module: partial(_edit_heads, self, module) for module in attentions}
        token = _active.set(_Run(self, plan, rows, inputs["input_ids"].shape[1]))
        try:
            with torch.inference_mode(), recorder.editing(edits):
                logits = LOGITS_OF_KIND[self.model.lm.kind](self.model.lm, batch, metric)
        finally:
            _active.reset(token)
        return logits.to(device="cpu", dtype=torch.float32)


@dataclass
class _Run:
    """One forward pass of a ``patch`` call: its plan (recording or patching), the batch's shape, and how often
    each hooked module has been called so far. A module called once per layer with shared weights (ALBERT's layer,
    its MLP, its attention) is layer k on its k-th call; a call past the layers it runs (Pegasus-X's encoder runs
    its MLP on the positions, then on its global tokens) is no site and passes unchanged."""

    call: _Call
    plan: object
    rows: int
    positions: int
    calls: dict = field(default_factory=lambda: defaultdict(int))

    def next_layer(self, site: str, module, modules: tuple, per_layer: int = 1) -> int | None:
        """The layer of the call of ``module`` starting now, as the ``site`` list ``modules`` orders them; a module
        a layer calls ``per_layer`` times (XLNet's MLP, once per stream) serves it on each."""
        self.calls[site, id(module)] += 1
        return self.layer(site, module, modules, per_layer)

    def layer(self, site: str, module, modules: tuple, per_layer: int = 1) -> int | None:
        """The layer of the last call of ``module`` that started; None past the layers (another stack's use)."""
        layers = [layer for layer, other in enumerate(modules) if other == module]
        made = (self.calls[site, id(module)] + per_layer - 1) // per_layer
        return layers[made - 1] if 0 < made <= len(layers) else None

    def call_in_layer(self, site: str, module, per_layer: int) -> int:
        """Which of its layer's calls of ``module`` the last one started was (0 for a module called once)."""
        return (self.calls[site, id(module)] - 1) % per_layer


def _run_of(call: _Call) -> _Run | None:
    """This context's forward pass, where it is ``call``'s and has a plan; None for another call's run, or a run
    that is no patching's at all."""
    active = _active.get()
    return active if active is not None and active.call is call and active.plan is not None else None


def _edit_heads(call: _Call, attention: int, output: torch.Tensor) -> torch.Tensor:
    run = _run_of(call)
    per_layer = call.model.head_calls
    layer = None if run is None else run.next_layer(HEAD, attention, call.model.attentions, per_layer)
    if layer is None:
        return output
    return run.plan.at_heads(layer, output, call=run.call_in_layer(HEAD, attention, per_layer))


def _layer_input(call: _Call, module, args, kwargs):
    run = _run_of(call)
    layer = None if run is None else run.next_layer(RESIDUAL, module, call.model.layers)
    if layer is None:
        return None

    def at_residual(hidden):
        return call.model.as_rows(hidden, partial(run.plan.at_residual, layer))

    streams = call.model.streams
    if streams > 1:  # XLNet's content and query streams, its first arguments
        return (*call.model.edit_streams(args[:streams], partial(run.plan.at_residual, layer)), *args[streams:]), kwargs
    if args:
        return (at_residual(args[0]), *args[1:]), kwargs
    return args, {**kwargs, "hidden_states": at_residual(kwargs["hidden_states"])}


def _layer_output(call: _Call, module, args, output):
    """Layer L: the last layer's output (a tensor, or a tuple or list whose first item is the hidden states)."""
    run = _run_of(call)
    last = call.model.num_layers
    if run is None or run.layer(RESIDUAL, module, call.model.layers) != last - 1:
        return None
    at_residual = partial(call.model.as_rows, edit=partial(run.plan.at_residual, last))
    streams = call.model.streams
    if streams > 1:
        return type(output)(
            [*call.model.edit_streams(output[:streams], partial(run.plan.at_residual, last)), *output[streams:]]
        )
    if isinstance(output, tuple | list):
        return type(output)([at_residual(output[0]), *output[1:]])
    return at_residual(output)


def _mlp_output(call: _Call, module, args, output):
    """The MLP's output as [row, position, hidden] whatever shape the module returns it in (OPT's ``fc2``:
    [row × position, hidden]), put back in that shape (and in its tuple, as GPT-OSS's MLP returns it)."""
    run = _run_of(call)
    per_layer = call.model.mlp_calls
    layer = None if run is None else run.next_layer(MLP, module, call.model.mlps, per_layer)
    if layer is None:
        return None
    tensor = first_tensor(output)
    at_mlp = partial(run.plan.at_mlp, layer, call=run.call_in_layer(MLP, module, per_layer))
    if call.model.time_first:
        patched = call.model.as_rows(tensor, at_mlp)
    else:
        patched = at_mlp(rows_view(tensor, run.rows, run.positions)).reshape(tensor.shape)
    return patched if isinstance(output, torch.Tensor) else type(output)([patched, *output[1:]])


_hooks_lock = threading.Lock()


@contextmanager
def _hooked(model: _Model) -> Iterator[_Call]:
    """This call's hooks on the layers and MLPs (once on a module that serves several layers), removed when the
    block ends, however it ends."""
    call, handles = _Call(model), []
    try:
        with _hooks_lock:  # registering changes the modules' hook dicts: one thread at a time
            for module in dict.fromkeys(model.layers):
                handles.append(module.register_forward_pre_hook(partial(_layer_input, call), with_kwargs=True))
            handles.append(model.layers[-1].register_forward_hook(partial(_layer_output, call)))
            for module in dict.fromkeys(mlp for mlp in model.mlps if mlp is not None):
                handles.append(module.register_forward_hook(partial(_mlp_output, call)))
        yield call
    finally:
        with _hooks_lock:
            for handle in handles:
                handle.remove()


def _decoder_logits(lm, batch: dict, metric: int | None) -> torch.Tensor:
    return lm.model(**batch, use_cache=False, **last_position_only(lm.model)).logits[:, -1]


def _encoder_logits(lm, batch: dict, metric: int | None) -> torch.Tensor:
    """The masked-LM head of the checkpoint on the [MASK] position's last hidden state."""
    head = masked_lm_head(lm)
    return head(lm.model(**batch).last_hidden_state[:, metric])


def _encoder_decoder_logits(lm, batch: dict, metric: int | None) -> torch.Tensor:
    rows = batch["input_ids"].shape[0]
    start = torch.full((rows, 1), special_token_ids(lm)["decoder_start"], device=batch["input_ids"].device)
    return lm.model(**batch, decoder_input_ids=start, use_cache=False).logits[:, -1]


LOGITS_OF_KIND: dict[str, Callable] = {
    KIND_DECODER: _decoder_logits,
    KIND_ENCODER: _encoder_logits,
    KIND_ENCODER_DECODER: _encoder_decoder_logits,
}


# -- the result -------------------------------------------------------------------------------------------------


def _result(lm, model: _Model, prompts, columns: list[int], tokens, lds, metric, recovered: dict) -> Patching:
    layers, text = model.num_layers, prompts[0]["input_ids"].shape[1] - model.appended
    clean, corrupted = (prompt["input_ids"][0, :text].tolist() for prompt in prompts)
    answer, against = tokens
    residual = [[recovered[RESIDUAL, layer, p] for p in columns] for layer in range(layers + 1)]
    predicted = (PREDICTED,) * (len(columns) - text)
    heads = [[recovered.get((HEAD, layer, head), np.nan) for head in range(model.num_heads)] for layer in range(layers)]
    return Patching(
        model_name=lm.name,
        clean_tokens=token_labels(lm.tokenizer, clean),
        corrupted_tokens=token_labels(lm.tokenizer, corrupted),
        answer_id=answer,
        answer_token=token_labels(lm.tokenizer, [answer])[0],
        counterfactual_id=against,
        counterfactual_token=token_labels(lm.tokenizer, [against])[0],
        ld_clean=lds[0],
        ld_corrupted=lds[1],
        stack=model.stack,
        metric_position=text if predicted else metric,  # XLNet reads its logits at the predicted column
        residual=np.array(residual, dtype=np.float32),
        heads=np.array(heads, dtype=np.float32),
        mlp=np.array([recovered.get((MLP, layer, None), np.nan) for layer in range(layers)], dtype=np.float32),
        whole_first=float(recovered[STREAM, 0, None]),
        whole_last=float(recovered[STREAM, layers, None]),
        nothing=float(recovered[NOTHING, None, None]),
        dtype=dtype_name(lm.model),
        headless=_headless_note(model),
        predicted=predicted,
        streams=_streams_note(model),
    )


PREDICTED = "(next token)"  # the label of a column where the model predicts, after the text (XLNet's)


def _streams_note(model: _Model) -> str:
    """What a cell patches where the layers carry more than one stream (XLNet's), in the visitor's words."""
    if model.streams == 1:
        return ""
    return (
        f"{model.lm.name}'s layers carry {model.streams} streams: a content stream, with a row for each token (and "
        f"for the {model.appended} its generation appends after the text to predict at), and a query stream, with a "
        f"row only where it predicts, which its head reads. A cell under a token patches the content stream at that "
        f"token; a cell under {PREDICTED!r} patches the query stream where it predicts; an MLP cell patches its "
        "output in both streams. The appended token's content row is not patched: it is no text, and no position "
        "reads it."
    )


def _head_calls_note(model: _Model, recorded: _Recorded) -> str:
    """What a head's cell patches where each layer's attention runs its output projection more than once (Pegasus-X's
    encoder: on its global tokens, then on the text's tokens padded to whole blocks), with the rows each call had."""
    if model.head_calls == 1 or not recorded.heads:
        return ""
    layer = min(layer for layer, _ in recorded.heads)
    rows = " and ".join(str(recorded.heads[layer, call].shape[0]) for call in range(model.head_calls))
    return (
        f"Each layer of {model.lm.name}'s {model.stack} runs its attention's output projection {model.head_calls} "
        f"times, on rows apart ({rows} rows in layer {layer}, for a text of {recorded.residual[0].shape[0]} tokens: "
        "rows of the model's own, such as global tokens, or padding, beside the text's). A head's cell patches that "
        "head's output in every one, each with the clean run's of the same call."
    )


def _headless_note(model: _Model) -> str:
    """Why rows of the heads' or the MLPs' map are blank: what those layers have instead of heads (and, in
    Mamba, instead of an MLP) is neither."""
    headless, without_mlp = model.headless(), model.without_mlp()
    if model.unreached:
        return (
            f"The heads of {model.lm.name} cannot be patched ({model.unreached.rstrip('.')}); its residual stream "
            "and its MLPs can: the heads' map is left out."
        )
    if not headless:
        return ""
    if not recorder.attends(model.lm):
        return (
            f"{model.lm.name} has no attention: each layer mixes positions through a state carried along the "
            "sequence (a state-space model), so it has no heads"
            + (" and no MLP separate from that mixer" if without_mlp else "")
            + " to patch; only its residual stream can be."
        )
    named = ", ".join(map(str, headless))
    return (
        f"Layer{'s' if len(headless) > 1 else ''} {named} of {model.lm.name} compute{'' if len(headless) > 1 else 's'} "
        "no attention (a state-space or linear-attention layer: a state carried along the sequence, not heads "
        "weighing positions), so head patching does not apply there: those rows are blank."
    )
