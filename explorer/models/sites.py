"""Where a stack's residual stream runs, found in the module graph rather than in a table of names.

One probe forward pass of a short input, with every module of the stack hooked, records each call: when it
started and ended (so nesting), its input and its output (the first tensor of each). From that and the hidden
states transformers reports for the stack:

layers  the module called as layer l: the first call of an element of a ``ModuleList`` (every stack of the library
        keeps its layers in one) after layer l − 1 ended that reads hidden state l and returns a new one; where none
        does, the calls of one ``ModuleList`` that chain each other's outputs, batch-first or, as XLNet's layers see
        the stream, time-first ([position, row, hidden]: ``time_first``)
tail    the modules the last layer's output goes through, in order, before the head reads it: the final norm
        (none for post-norm encoders; OPT-350m's ``project_out``), each called on the previous one's output
mlps    in each layer, the call whose output is the feed-forward's contribution to the residual stream: of the
        calls whose output the layer adds to a tensor it also saw (pre-norm: the residual before the MLP; parallel
        blocks: the input plus the attention's output; post-norm: the input of the norm that follows), the first
        branch that is not attention's (the probe asks for attention weights, which mark it). OPT's ``fc2`` sees
        positions flattened into rows, GPT-OSS's MLP returns a tuple: ``rows_view`` gives any of these outputs as
        [row, position, hidden].

Sites are probed once per model and stack and kept weakly with the model; the probe's hooks are removed before
it returns, and act only on the probe's own forward pass (a context variable), so other threads' runs of the
shared model pass through them unchanged.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch

from explorer.data import STACK_DECODER
from explorer.errors import InputError
from explorer.models import recorder
from explorer.models.architectures import KIND_DECODER, KIND_ENCODER, KIND_ENCODER_DECODER

_probing: ContextVar = ContextVar("explorer_sites_probe", default=None)
_sites: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()


@dataclass(frozen=True)
class StackSites:
    """A stack's layers (the same module L times where layers share weights, as ALBERT's), the modules between
    its last layer and the head, and each layer's MLP (None where no call is one)."""

    layers: tuple[torch.nn.Module, ...]
    tail: tuple[torch.nn.Module, ...]
    mlps: tuple[torch.nn.Module | None, ...]
    time_first: bool = False  # the layers read and return the stream as [position, row, hidden] (XLNet's)


@dataclass
class ModuleCall:
    module: torch.nn.Module
    start: int
    end: int = -1
    input: torch.Tensor | None = None
    output: torch.Tensor | None = None
    returned: tuple[torch.Tensor, ...] = ()  # every tensor of a tuple or list output (attention returns its weights)
    # the tensors of a dict in a tuple output: Pegasus-X's global-local attention returns its weights so, as
    # {"global": [batch, head, global, global + position], "local": [batch, head, block, block_len, ...]}
    maps: tuple[torch.Tensor, ...] = ()
    plain: bool = True  # its output is a tensor or a plain tuple or list, which a hook can replace in kind
    inner: list = field(default_factory=list)  # the calls nested in this one

    def contains(self, other: ModuleCall) -> bool:
        return self.start < other.start and other.end < self.end

    def changes(self) -> bool:
        return self.output is not None and not same(self.input, self.output)


def stack_sites(lm, stack: str) -> StackSites:
    """The sites of ``stack`` ("decoder" or "encoder") of the loaded model, probed once per model."""
    with _lock:
        found = _sites.setdefault(lm.model, {})
        if stack not in found:
            found[stack] = _probe(lm, stack)
    return found[stack]


def rows_view(tensor: torch.Tensor, rows: int, positions: int) -> torch.Tensor:
    """``tensor`` as [row, position, ...]: as the module saw it (Longformer's positions padded to a window multiple
    at the end), or with positions flattened into rows (OPT)."""
    if tensor.shape[:2] == (rows, positions) or (tensor.dim() > 2 and tensor.shape[0] == rows):
        return tensor
    return tensor.reshape(rows, positions, *tensor.shape[1:])


def first_tensor(value) -> torch.Tensor | None:
    """A module's output as the next module reads it: the tensor, or the first item of a tuple or model output
    (GPT-OSS's MLP returns its router's logits beside it)."""
    if isinstance(value, torch.Tensor):
        return value
    items = value.to_tuple() if hasattr(value, "to_tuple") else value
    if isinstance(items, (tuple, list)) and items and isinstance(items[0], torch.Tensor):
        return items[0]
    return None


def _probe(lm, stack: str) -> StackSites:
    scope = _scope(lm, stack)
    with record_calls(scope) as calls:
        hidden = _hidden_states(lm, stack)
    layers = _layers(lm, calls, hidden)
    tail = _tail(calls, layers[-1], _head(lm, stack))
    return StackSites(
        layers=tuple(call.module for call in layers),
        tail=tuple(call.module for call in tail),
        mlps=tuple(_mlp(layer, recorder.attends(lm)) for layer in layers),
        time_first=_time_first(layers[0], hidden[0]),
    )


def _scope(lm, stack: str) -> torch.nn.Module:
    if lm.kind != KIND_ENCODER_DECODER:
        return lm.model
    return lm.model.get_decoder() if stack == STACK_DECODER else lm.model.get_encoder()


def _hidden_states(lm, stack: str) -> tuple[torch.Tensor, ...]:
    ids = probe_ids(lm)
    inputs = {"input_ids": ids, "output_hidden_states": True}
    if lm.kind == KIND_ENCODER_DECODER:
        inputs["decoder_input_ids"] = ids[:, :3]
    if lm.kind != KIND_ENCODER:
        inputs["use_cache"] = False
    with torch.inference_mode():
        try:  # attention weights returned mark the attention branches apart from the MLP's
            out = lm.model(**inputs, output_attentions=True)
        except TypeError:  # a model without attention (Mamba) takes no such argument
            out = lm.model(**inputs)
    if lm.kind == KIND_ENCODER_DECODER:
        return out.decoder_hidden_states if stack == STACK_DECODER else out.encoder_hidden_states
    return out.hidden_states


def probe_ids(lm, text: str = "Hello world, hello") -> torch.Tensor:
    """[1, position] a few tokens of ``text`` for a probe pass, on the model's device; one token where the tokenizer
    gives none."""
    ids = lm.tokenizer(text, return_tensors="pt")["input_ids"][:, :6]
    return (ids if ids.shape[1] else torch.zeros((1, 1), dtype=torch.long)).to(lm.device)


def _layers(lm, calls: list[ModuleCall], hidden) -> list[ModuleCall]:
    listed = {
        id(module) for modules in lm.model.modules() if isinstance(modules, torch.nn.ModuleList) for module in modules
    }
    layers, after = [], -1
    for index, state in enumerate(hidden[:-1]):
        following = hidden[index + 1] if index + 2 < len(hidden) else None  # the last may be normed after it
        found = next(
            (c for c in calls if c.start > after and id(c.module) in listed and _reads(c, state, following)), None
        )
        if found is None:
            return _chained(lm, calls, hidden, index)
        layers.append(found)
        after = found.end
    return layers


def _batch_first(call: ModuleCall, state: torch.Tensor) -> bool:
    """Whether ``call`` reads and returns the stream as [row, position, hidden], the positions as reported or padded
    at the end to a window multiple (Longformer); not time-first (XLNet's [position, row, hidden])."""
    rows, positions, width = state.shape
    shape = call.input.shape
    return call.output.shape == shape and shape[0] == rows and shape[1] >= positions and shape[2] == width


def _time_first(call: ModuleCall, state: torch.Tensor) -> bool:
    """Whether ``call`` reads and returns the stream as [position, row, hidden] where transformers reports it as
    [row, position, hidden] (XLNet's layers: the shapes its hooks see)."""
    rows, positions, width = state.shape
    shape = call.input.shape
    return rows != positions and call.output.shape == shape == (positions, rows, width)


def _chained(lm, calls: list[ModuleCall], hidden, index: int) -> list[ModuleCall]:
    """The layers of a model whose reported hidden states are not each layer's input (Mamba's start after its
    first layer; XLNet's layers read them time-first): the ``count`` calls of one ``ModuleList``'s elements, in
    order, each reading the one before's output, the first reading what no layer returned (the embeddings), all
    batch-first or all time-first."""
    for modules in (m for m in lm.model.modules() if isinstance(m, torch.nn.ModuleList)):
        members = {id(module) for module in modules}
        run = [c for c in calls if id(c.module) in members and c.plain and c.output is not None]
        chained = all(same(before.output, after.input) for before, after in itertools.pairwise(run))
        laid_out = any(all(fits(c, hidden[0]) for c in run) for fits in (_batch_first, _time_first))
        if len(run) == len(hidden) - 1 and chained and laid_out:
            return run
    raise InputError(
        f"{lm.name} ({type(lm.model).__name__}) does not pass its hidden states through modules one layer "
        f"at a time (no module reads hidden state {index}), so its residual stream cannot be read or patched."
    )


def _reads(call: ModuleCall, state: torch.Tensor, following: torch.Tensor | None) -> bool:
    """Whether ``call`` reads hidden state ``state`` and returns the next one (a layer does; XLM's attention
    module reads it too, and returns only what its loop then adds)."""
    if not call.plain:  # Reformer's layers return named tuples of two streams: no residual stream to hook
        return False
    if following is None:
        return same(call.input, state) and call.changes() and call.output.shape == state.shape
    return same(call.input, state) and same(call.output, following)


def _tail(calls: list[ModuleCall], last: ModuleCall, head: torch.nn.Module | None) -> list[ModuleCall]:
    """The calls after the last layer that carry its output on, each reading the one before (identities left
    out), up to the head."""
    tail, value, after = [], last.output, last.end
    reading = [call for call in calls if call.module is head]
    for call in (call for call in calls if call.start > after):
        if call.module is head or any(call.contains(other) for other in reading):  # BertGeneration wraps its head
            break
        if same(call.input, value) and call.changes() and _per_position(call):
            tail.append(call)
            value, after = call.output, call.end
    return tail


def _per_position(call: ModuleCall) -> bool:
    """Whether ``call`` keeps the positions it reads (a norm, a projection), unlike BERT's pooler."""
    return call.output.shape[:-1] == call.input.shape[:-1]


def _head(lm, stack: str) -> torch.nn.Module | None:
    return lm.model.get_output_embeddings() if stack == STACK_DECODER or lm.kind == KIND_DECODER else None


def _mlp(layer: ModuleCall, attends: bool = True) -> torch.nn.Module | None:
    """The feed-forward's branch: of the calls whose output the layer adds to its residual stream (outermost of
    each nest: one per branch), the first that is neither attention's nor a post-norm's residual (Gemma 4 adds a
    per-layer branch after its MLP, T5's decoder a cross-attention branch before it); the last where no branch
    shows attention weights. None in a model without attention whose layer has one branch: that branch mixes
    positions (Mamba's mixer), it is no feed-forward."""
    seen = [layer.input, *(t for call in layer.inner for t in (call.input, call.output))]
    out = layer.output
    matches = [
        call for call in layer.inner if call.plain and call.changes() and _adds_to_residual(call, out, layer, seen)
    ]
    branches = [call for call in matches if not any(other.contains(call) for other in matches)]
    attending = [_attends(layer, branch) for branch in branches]
    if not attends and len(branches) == 1:
        return None
    if not any(attending):
        return branches[-1].module if branches else None
    feed_forward = (b for b, a in zip(branches, attending, strict=True) if not a and not _read_on(layer, b))
    return next((branch.module for branch in feed_forward), None)


def _attends(layer: ModuleCall, branch: ModuleCall) -> bool:
    """Whether the branch is attention's: it, a call in it or around it returns attention weights ([batch, head,
    query, key], one query per position), or it reads what such a call returned (Gemma's post-attention norm)."""
    positions = layer.input.shape[-2]
    attention = [c for c in layer.inner if any(t.dim() == 4 and t.shape[-2] == positions for t in c.returned[1:])]
    related = [c for c in attention if c is branch or c.contains(branch) or branch.contains(c)]
    return bool(related) or any(same(branch.input, c.output) for c in attention)


def _read_on(layer: ModuleCall, branch: ModuleCall) -> bool:
    """Whether a projection later in the layer reads the branch's output (in any shape: OPT flattens positions):
    a post-norm layer's normed residual (OPT-350m's), not a contribution."""
    later = (c for c in layer.inner if c.start > branch.end and _fits(c.input, branch.output))
    matrices = (c for c in later if isinstance(getattr(c.module, "weight", None), torch.Tensor))
    return any(c.module.weight.dim() == 2 and torch.equal(c.input.flatten(), branch.output.flatten()) for c in matrices)


def _adds_to_residual(call: ModuleCall, out, layer: ModuleCall, seen) -> bool:
    """Whether the layer adds ``call``'s output to its residual stream: the layer's output less it is a tensor the
    layer saw (pre-norm), or that less the layer's input (parallel blocks); or a later call's input less it is a
    residual some call of the layer read (post-norm: BERT's, OPT-350m's norm after the MLP)."""
    contribution = call.output
    if out is None or contribution.numel() != out.numel():
        return False
    contribution = contribution.reshape(out.shape)
    candidates = [out - contribution, out - contribution - layer.input.reshape(out.shape)]
    if any(_close(candidate, t) for candidate in candidates for t in seen if t is not call.output):
        return True
    read = [layer.input, *(c.input for c in layer.inner if c.start < call.start)]
    after_norm = [c.input.reshape(out.shape) for c in layer.inner if c.start > call.end and _fits(c.input, out)]
    return any(_close(norm_input - contribution, t) for norm_input in after_norm for t in read)


def _fits(tensor, like) -> bool:
    return tensor is not None and tensor.numel() == like.numel()


def same(a, b) -> bool:
    """Whether two recorded tensors (or None) hold the same values in the same shape."""
    return a is not None and b is not None and a.shape == b.shape and torch.equal(a, b)


def _close(a: torch.Tensor, b) -> bool:
    """Equal up to the rounding of one addition: ``(a + b) − b`` is ``a`` only to the last bits."""
    if b is None or b.numel() != a.numel():
        return False
    b = b.reshape(a.shape)
    scale = float(b.abs().max()) + 1e-12
    return bool((a - b).abs().max() <= 1e-5 * max(scale, float(a.abs().max())))


class _Probe:
    """The calls of one probe pass, in the order they started, and those not yet ended (innermost last)."""

    def __init__(self):
        self.calls: list[ModuleCall] = []
        self.open: list[ModuleCall] = []
        self.clock = 0

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    def started(self, module, args, kwargs) -> None:
        if _probing.get() is self:
            call = ModuleCall(module, start=self.tick(), input=layer_input(args, kwargs))
            self.calls.append(call)
            self.open.append(call)

    def ended(self, module, args, output) -> None:
        if _probing.get() is self and self.open:
            call = self.open.pop()
            call.end, call.output = self.tick(), _detached(first_tensor(output))
            if isinstance(output, tuple | list):
                call.returned = tuple(item.detach() for item in output if isinstance(item, torch.Tensor))
                found = (value for item in output if isinstance(item, dict) for value in item.values())
                call.maps = tuple(t.detach() for t in found if isinstance(t, torch.Tensor))
            call.plain = isinstance(output, torch.Tensor) or type(output) in (tuple, list)  # OpenAI GPT: a list


@contextmanager
def record_calls(scope: torch.nn.Module):
    """Within the block, every call of a module of ``scope`` made by this context, recorded: [call] in the order
    they started, each with the calls nested in it once the block ends."""
    probe, handles = _Probe(), []
    token = _probing.set(probe)
    try:
        for module in scope.modules():
            handles.append(module.register_forward_pre_hook(probe.started, with_kwargs=True))
            handles.append(module.register_forward_hook(probe.ended, always_call=True))
        yield probe.calls
    finally:
        _probing.reset(token)
        for handle in handles:
            handle.remove()
    for call in probe.calls:
        call.inner = [other for other in probe.calls if call.contains(other)]


def layer_streams(args, kwargs, output) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    """(input, output) of each stream a layer carries: its hidden states, then each further argument that it
    returns updated in the same place of its output tuple and shape (XLNet's query stream, beside its content
    stream)."""
    streams = [(layer_input(args, kwargs), first_tensor(output))]
    items = output if type(output) in (tuple, list) else ()
    for index in range(1, min(len(args), len(items))):
        given, returned = args[index], items[index]
        if not (isinstance(given, torch.Tensor) and isinstance(returned, torch.Tensor)):
            break
        if not given.is_floating_point() or given.shape != returned.shape:
            break
        streams.append((given.detach(), returned.detach()))
    return tuple(streams)


def layer_input(args, kwargs) -> torch.Tensor | None:
    """The hidden states a module was called with: its first floating-point tensor argument."""
    for value in (*args, kwargs.get("hidden_states"), *kwargs.values()):
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.detach()
    return None


def _detached(tensor):
    return tensor.detach() if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() else None
