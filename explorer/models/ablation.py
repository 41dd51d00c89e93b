"""Head ablation: the outputs of the heads named are set to 0 before the output projection.

The zeroing itself happens in the recording attention (``recorder.ablating``), which already runs inside
every layer; this module says which heads, checks the names against the model, and builds the per-call
masks. Nothing is stored on the shared model: the masks live in the calling thread's context.

An ablation is written ``((layer, head), ...)`` for the one stack of a decoder-only or encoder-only
model, or ``((stack, layer, head), ...)`` with ``stack`` one of "encoder", "decoder", "cross" (required for
encoder-decoder models, which have several). Layers and heads are numbered as ``capture`` numbers them;
heads are query heads, so with grouped KV heads one query head is ablated, not the KV head it shares.
``normalize`` turns it into the canonical form, a sorted tuple of (stack, layer, head) without repeats
(hashable, for caches); ``()`` means none, and then no ablation code runs at all.

Which module is which layer is found once per model by one recorded forward pass of a short input: the
n-th attention module a stack calls is its layer n, as in ``capture``. A model that computes attention in its own
code (GPT-Neo, BLOOM, Falcon: nothing reaches the recording attention) is probed in the module graph instead:
each attention module is the innermost call that returns a map ``output_attentions`` reports, and the heads are
zeroed or edited in the input of its output projection (the heads concatenated, [batch, query, head × head_dim]:
see ``_output_projection``), by a hook registered once that acts only within ``ablating`` or ``editing`` of the
calling context. Where no module reads the heads' outputs side by side (XLNet combines them with a weight of its own,
``o``), a head is switched off at its weights, in the module that passes them on with the heads side by side (its
attention dropout; ``_passing_weights``): its output, their sum over the values, is then 0. That is exact for
ablation; activation patching, which replaces a head's output, is refused there (``layout(edits=True)``). An
encoder-decoder with one stack in its own code beside stacks that reach the recording attention (Pegasus-X's
global-local encoder, which returns its maps as a dict per layer) has that stack probed the same way; its output
projection, run on the global tokens and then on the text's, is hooked on both calls.
"""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

import torch

from explorer.data import STACK_CROSS, STACK_DECODER, STACK_ENCODER
from explorer.errors import InputError, NotApplicable
from explorer.models import recorder, sites
from explorer.models.architectures import KIND_DECODER, KIND_ENCODER_DECODER

Ablation = tuple[tuple[str, int, int], ...]
STACKS = (STACK_ENCODER, STACK_DECODER, STACK_CROSS)


@dataclass(frozen=True)
class AttentionLayout:
    """The attention modules of each stack, in layer order, and how many query heads each has."""

    modules: dict[str, tuple[int, ...]]  # stack -> id(module) of each layer
    heads: dict[str, tuple[int, ...]]  # stack -> query heads of each layer
    refused: dict[str, str] = field(default_factory=dict)  # stack -> why its heads cannot be reached (plain words)
    # stack -> why its heads are reached only at their weights (XLNet's): switched off exactly, never edited
    weights_only: dict[str, str] = field(default_factory=dict)
    # stack -> how often each layer's attention runs its output projection, where that is not once: Pegasus-X's
    # encoder runs it on its global tokens, then on the text's tokens (a head's output is in both)
    projection_calls: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # stack -> why no hook reaches its heads, for a stack left out beside recorded ones (not refused: ablating the
    # recorded stacks' heads still works)
    unreached: dict[str, str] = field(default_factory=dict)


_layouts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_layouts_lock = threading.Lock()


def layout(lm, *, shared: bool = False, stacks: Iterable[str] | None = None, edits: bool = False) -> AttentionLayout:
    """The model's attention layout, probed once per model and shared by every thread. Where layers share one
    attention module (ALBERT), ablation by module would zero a head in every layer at once: refused unless
    ``shared`` (activation patching tells the layers apart by counting the module's calls). Refused too where a
    stack of ``stacks`` (default: all) has heads no hook can reach (ProphetNet's decoder), and with ``edits`` (a
    head's output replaced: activation patching) where a stack's heads are reached only at their weights (XLNet)."""
    with _layouts_lock:  # one probe per model, even when many sessions ask at once
        found = _layouts.get(lm.model)
        if found is None:
            found = _layouts[lm.model] = _probe(lm)
    out_of_reach = found.refused | (found.weights_only if edits else {})
    for stack in out_of_reach if stacks is None else stacks:
        if stack in out_of_reach:
            raise Unsupported(lm, out_of_reach[stack])
    called = [module for stack_modules in found.modules.values() for module in stack_modules]
    if not shared and len(set(called)) != len(called):
        raise Unsupported(lm, "its layers share one attention module, so one layer cannot be ablated")
    return found


def _probe(lm) -> AttentionLayout:
    if not recorder.attends(lm):  # what RWKV returns are not weights
        raise NoHeads(
            f"Head ablation does not apply to {lm.name} ({type(lm.model).__name__}): it has no attention layers, so "
            "it has no attention heads to switch off.",
            "it has no attention layers",
        )
    ids = sites.probe_ids(lm, "Hello world")[:, :4]
    with torch.inference_mode(), recorder.recording() as calls:
        if lm.kind == KIND_ENCODER_DECODER:
            lm.model(input_ids=ids, decoder_input_ids=ids[:, :1], use_cache=False)
        else:
            lm.model(input_ids=ids, **({"use_cache": False} if lm.kind == KIND_DECODER else {}))
    modules, heads = defaultdict(list), defaultdict(list)
    for call in calls:
        stack = lm.stack_of_module.get(id(call.module), _main_stack(lm))
        modules[stack].append(id(call.module))
        heads[stack].append(call.query.shape[1])
    called = [module for stack_modules in modules.values() for module in stack_modules]
    if not called:
        return _probe_projections(lm)
    recorded = AttentionLayout({s: tuple(m) for s, m in modules.items()}, {s: tuple(h) for s, h in heads.items()})
    unrecorded = _unrecorded_stacks(lm, recorded)
    return _joined(recorded, _probe_projections(lm, unrecorded)) if unrecorded else recorded


# The stack whose maps each output of an encoder-decoder holds.
_STACK_OF_OUTPUT = {
    "encoder_attentions": STACK_ENCODER,
    "decoder_attentions": STACK_DECODER,
    "cross_attentions": STACK_CROSS,
}


def _unrecorded_stacks(lm, recorded: AttentionLayout) -> tuple[str, ...]:
    """The stacks of an encoder-decoder whose attention runs in its own code beside others that reach the recording
    attention (Pegasus-X's global-local encoder beside its decoder): their heads are probed at their projections."""
    if lm.kind != KIND_ENCODER_DECODER:
        return ()
    return tuple(stack for stack in _STACK_OF_OUTPUT.values() if stack not in recorded.modules)


def _joined(recorded: AttentionLayout, probed: AttentionLayout) -> AttentionLayout:
    """The recorded stacks and those reached at their projections. A probed stack whose heads no hook reaches is
    left out, not refused: refusing would refuse ablating the recorded stacks' heads too."""
    return AttentionLayout(
        recorded.modules | probed.modules,
        recorded.heads | probed.heads,
        weights_only=probed.weights_only,
        projection_calls=probed.projection_calls,
        unreached=probed.unreached | probed.refused,
    )


def _probe_projections(lm, stacks: tuple[str, ...] = ()) -> AttentionLayout:
    """The layout of a model whose attention runs in its own code, with a hook on each output projection; only the
    maps of ``stacks`` where named (an encoder-decoder's stacks that the recording attention does not reach)."""
    from explorer.models.capture import without_attention_layers  # capture imports this module

    with torch.inference_mode(), sites.record_calls(lm.model) as calls:
        out = lm.model(**_probe_inputs(lm), output_attentions=True)
    maps, unmapped = _returned_maps(out, stacks), _unmapped_stacks(out, stacks)
    if stacks and not maps:  # those stacks return no maps: nothing leads a hook to their heads
        none = "it returns no attention weights for it"
        return AttentionLayout({}, {}, unreached={stack: unmapped.get(stack, none) for stack in stacks})
    modules, heads, used, refused, weights_only = defaultdict(list), defaultdict(list), set(), {}, {}
    projection_calls = defaultdict(list)
    unreached = "no module of it returns its attention weights beside a projection"
    for weights in maps:
        attention = _returning(calls, weights, used)
        if attention is None and stacks:  # one of the stacks probed beside recorded ones: left out, as unreached
            refused.update({stack: unreached for stack in stacks if stack not in modules})
            continue
        if attention is None:
            raise Unsupported(lm, unreached)
        stack = lm.stack_of_module.get(id(attention.module), _main_stack(lm))
        projection = _output_projection(calls, attention, weights)
        passing = None if projection is not None else _passing_weights(attention, weights)
        if projection is None and passing is None:  # this stack's heads are out of reach; others' may not be
            refused[stack] = _no_projection(attention, weights.shape[1])
            continue
        if projection is None:  # heads combined in its own code: switched off at their weights, never edited
            weights_only[stack] = _no_projection(attention, weights.shape[1], zeroed=True)
            _hook_weights(passing, id(attention.module), weights.shape[1])
        else:
            _hook_projection(projection, id(attention.module), weights.shape[1])
        modules[stack].append(id(attention.module))
        heads[stack].append(weights.shape[1])
        projection_calls[stack].append(max(1, sum(c.module is projection for c in attention.inner)))
    if not maps:
        if why := without_attention_layers(lm):
            raise NoHeads(f"Head ablation does not apply: {why}, so it has no attention heads to switch off.", why)
        raise Unsupported(lm, "it returns no attention weights")
    several = {s: tuple(c) for s, c in projection_calls.items() if set(c) != {1}}
    return AttentionLayout(
        {s: tuple(m) for s, m in modules.items()},
        {s: tuple(h) for s, h in heads.items()},
        refused,
        weights_only,
        several,
        {s: why for s, why in unmapped.items() if s not in modules},
    )


def _probe_inputs(lm) -> dict:
    ids = sites.probe_ids(lm, "Hello world")[:, :4]
    if lm.kind == KIND_ENCODER_DECODER:
        return {"input_ids": ids, "decoder_input_ids": ids[:, :1], "use_cache": False}
    return {"input_ids": ids, **({"use_cache": False} if lm.kind == KIND_DECODER else {})}


def _returned_maps(out, stacks: tuple[str, ...] = ()) -> list[torch.Tensor]:
    """Every attention map the forward returned (of ``stacks`` only, where named): [batch, head, query, key] each
    (ProphetNet's n-gram streams come as [batch, stream, head, query, key]: not one map per head, left out). A layer
    returned as a dict of maps (Pegasus-X's global tokens' and local blocks', one call's) is its first such map."""
    return [
        found
        for key, layers in out.items()
        if key.endswith("attentions") and isinstance(layers, tuple | list)
        if not stacks or _STACK_OF_OUTPUT.get(key) in stacks
        for layer in layers
        if (found := _one_map(layer)) is not None
    ]


def _unmapped_stacks(out, stacks: tuple[str, ...] = ()) -> dict[str, str]:
    """{stack: why its heads are not found}, for an encoder-decoder's stacks (of ``stacks``, where named) that return
    their layers in another layout than one map per head (LongT5's local blocks): the probe finds the module that
    computes a stack's heads by the map it returns."""
    found = {}
    for key, layers in out.items():
        stack = _STACK_OF_OUTPUT.get(key)
        if stack is None or (stacks and stack not in stacks) or not isinstance(layers, tuple | list):
            continue
        other = next((layer for layer in layers if layer is not None and _one_map(layer) is None), None)
        if other is not None:
            kind = f"{other.dim()}-dimensional tensors" if isinstance(other, torch.Tensor) else type(other).__name__
            found[stack] = (
                f"its {stack} returns its attention weights as {kind}, not as maps [batch, head, query, key], by "
                "which the module that computes its heads is found"
            )
    return found


def _one_map(layer) -> torch.Tensor | None:
    """The layer's [batch, head, query, key] map: itself, or the first in a dict of maps; None for any other."""
    found = next((m for m in layer.values() if isinstance(m, torch.Tensor)), None) if isinstance(layer, dict) else layer
    return found if isinstance(found, torch.Tensor) and found.dim() == 4 else None


def _returning(calls: list, weights: torch.Tensor, used: set):
    """The innermost call that returned ``weights`` beside its output: the very tensor where the model passes it
    on as it is, else the first unused call that returned its values (maps of near-uniform random layers can be
    equal)."""
    for match in (_is, _equal, _view_of, _permuted):
        found = [c for c in calls if any(match(t, weights) for t in (*c.returned[1:], *c.maps))]
        innermost = [c for c in found if not any(c.contains(other) for other in found) and id(c) not in used]
        if innermost:
            used.add(id(innermost[0]))
            return innermost[0]
    return None


def _is(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.data_ptr() == b.data_ptr() and a.stride() == b.stride()


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.equal(a, b)


def _view_of(returned: torch.Tensor, weights: torch.Tensor) -> bool:
    """Whether the map the model reports is a view of what the module returned: Longformer's and LED's come back
    with the head and query axes swapped and the padding to a window multiple cut off."""
    same_heads = returned.dim() == 4 and weights.shape[1] in returned.shape[1:3]
    return same_heads and returned.data_ptr() == weights.data_ptr() and returned.numel() >= weights.numel()


def _permuted(returned: torch.Tensor, weights: torch.Tensor) -> bool:
    """Whether the map the model reports is the module's with its axes reordered: XLNet's attention returns
    [query, key, batch, head], reported as [batch, head, query, key]."""
    same_axes = sorted(returned.shape) == sorted(weights.shape)
    return same_axes and returned.data_ptr() == weights.data_ptr() and returned.numel() == weights.numel()


def _no_projection(attention, heads: int, *, zeroed: bool = False) -> str:
    """Why no hook reaches the heads of ``attention`` (a recorded call), in plain words: where its projections are
    weights of its own ([width, head, head_dim]: XLNet's q, k, v, o, r), the heads are combined in its own code and
    never side by side in a module's input; those weights are named. ``zeroed``: its heads are switched off at their
    weights instead, so only a head's output cannot be replaced."""
    width = attention.output.shape[-1] if attention.output is not None else None
    own = [
        name
        for name, weight in attention.module.named_parameters(recurse=False)
        if weight.dim() == 3 and weight.shape[:2] == (width, heads)
    ]
    if not own:
        return "no module reads its heads side by side before they are combined"
    return (
        f"its attention ({type(attention.module).__name__}) projects with weights of its own code "
        f"({', '.join(own)}, each with an axis of its {heads} heads), not with modules: its heads are combined "
        "inside that code, never side by side in a module's input, so no hook can "
        + (
            "replace one head's output (head ablation switches a head off at its attention weights)"
            if zeroed
            else "switch off one head"
        )
    )


def _output_projection(calls: list, attention, weights: torch.Tensor) -> torch.nn.Module | None:
    """The module that reads the heads concatenated: a projection its parent calls on the attention's output
    (DeBERTa's ``output.dense``), else the last projection the attention calls on something other than its own
    input (GPT-Neo's ``out_proj``, BLOOM's and Falcon's ``dense``: the query, key and value projections read the
    input). None where it reads them in another layout than [batch, query, ...] (FSMT's time-first tensors)."""
    heads = weights.shape[1]
    parent = max((c for c in calls if c.contains(attention)), key=lambda c: c.start, default=None)
    after = [c for c in (parent.inner if parent else ()) if c.start > attention.end and _projects(c, heads)]
    reading = [c for c in after if sites.same(c.input, attention.output)]
    if reading:
        return reading[0].module
    inside = [c for c in attention.inner if _projects(c, heads) and not sites.same(c.input, attention.input)]
    # one that returns the attention's width (ProphetNet's n-gram attention also projects relative positions, as
    # wide as its buckets times its heads)
    width = attention.output.shape[-1] if attention.output is not None else None
    inside = [c for c in inside if c.output is not None and c.output.shape[-1] == width]
    return max(inside, key=lambda c: c.end).module if inside else None


def _projects(call, num_heads: int) -> bool:
    """Whether ``call`` is of a module with a weight matrix, on [batch, query, heads × head_dim]: the probe's one row
    first (FSMT's time-first [query, batch, ...] is not split here)."""
    weight = getattr(call.module, "weight", None)
    is_matrix = isinstance(weight, torch.Tensor) and weight.dim() == 2
    found = call.input
    row_first = found is not None and found.dim() in (3, 4) and found.shape[0] == 1  # ProphetNet: [1, stream, query]
    return is_matrix and row_first and found.shape[-1] % num_heads == 0


_projection_hooked: weakref.WeakSet = weakref.WeakSet()


def _hook_projection(projection: torch.nn.Module, attention_id: int, num_heads: int) -> None:
    if projection not in _projection_hooked:
        projection.register_forward_pre_hook(partial(_edit_projection_input, attention_id, num_heads))
        _projection_hooked.add(projection)


def _edit_projection_input(attention_id: int, num_heads: int, module, args):
    """The heads concatenated, [batch, query, head × head_dim] (ProphetNet's decoder: [batch, stream, query, ...],
    its output projection called once for the main stream and once for the predicting streams), with this context's
    ablation or edits applied."""
    concatenated = args[0]
    heads = concatenated.flatten(1, -2).unflatten(-1, (num_heads, -1))  # ProphetNet's streams: more query rows
    edited = recorder.edited_heads(attention_id, heads)
    return None if edited is None else (edited.reshape(concatenated.shape), *args[1:])


def _passing_weights(attention, weights: torch.Tensor) -> torch.nn.Module | None:
    """A module inside ``attention`` (a recorded call) that passes on, unchanged, the very weights the attention
    returns, its heads side by side ([batch, head, query, key]: XLNet's attention dropout, before the weights are
    summed over the values): zeroing a head's weights there zeroes its output exactly. None where there is none."""
    passing = [
        call
        for call in attention.inner
        if call.input is not None
        and call.input.shape == weights.shape
        and torch.equal(call.input, weights)
        and call.output is not None
        and torch.equal(call.output, call.input)
    ]
    return passing[0].module if passing else None


_weights_hooked: weakref.WeakSet = weakref.WeakSet()


def _hook_weights(module: torch.nn.Module, attention_id: int, num_heads: int) -> None:
    if module not in _weights_hooked:
        module.register_forward_hook(partial(_ablate_weights, attention_id, num_heads))
        _weights_hooked.add(module)


def _ablate_weights(attention_id: int, num_heads: int, module, args, output):
    """The weights [batch, head, query, key] with this context's ablation applied (in every stream the attention
    runs: XLNet's content and query streams pass theirs through the same module); other tensors the module passes
    (XLNet's dropout also runs on the combined output, [query, batch, width]) as they are."""
    if not isinstance(output, torch.Tensor) or output.dim() != 4 or output.shape[1] != num_heads:
        return None
    return recorder.ablated_weights(attention_id, output)


class Unsupported(InputError):
    """Head ablation cannot reach this model's heads; ``why`` says so in plain words (activation patching repeats it
    when it patches the rest)."""

    def __init__(self, lm, why: str):
        super().__init__(f"Head ablation is not supported for {lm.name} ({type(lm.model).__name__}): {why}.")
        self.why = why


class NoHeads(NotApplicable, Unsupported):
    """A model with no attention layers: head ablation does not apply (activation patching still patches its residual
    stream and MLPs, and says with ``why`` that its heads' rows are blank)."""

    def __init__(self, message: str, why: str):
        InputError.__init__(self, message)
        self.why = why


def _main_stack(lm) -> str:
    """The stack of a module the load did not place, as ``capture`` decides it."""
    return STACK_DECODER if lm.kind == KIND_DECODER else STACK_ENCODER


def normalize(lm, ablate: Iterable | None) -> Ablation:
    """The canonical form of ``ablate`` (see the module docstring); raises ``InputError`` for a head the
    model does not have."""
    items = () if ablate is None else tuple(ablate)
    if not items:
        return ()
    found = layout(lm)
    return tuple(sorted({_one_head(lm, found, item) for item in items}))


def _one_head(lm, found: AttentionLayout, item) -> tuple[str, int, int]:
    if isinstance(item, str) or not isinstance(item, Sequence) or len(item) not in (2, 3):
        raise InputError(f"Name each head to ablate as (layer, head) or (stack, layer, head), not {item!r}.")
    if len(item) == 2 and lm.kind == KIND_ENCODER_DECODER:
        raise InputError(
            f"{lm.name} has an encoder and a decoder: name each head with its stack, as "
            f'("encoder" | "decoder" | "cross", layer, head), not {tuple(item)!r}.'
        )
    stack, layer, head = item if len(item) == 3 else (_main_stack(lm), *item)
    if stack not in found.modules:
        raise InputError(f"{lm.name} has no {stack!r} attention stack; it has {', '.join(map(repr, found.modules))}.")
    layers = len(found.modules[stack])
    layer = _whole_number("layer", layer, layers, f"{lm.name}'s {stack} has layers 0 to {layers - 1}")
    heads = found.heads[stack][layer]
    head = _whole_number("head", head, heads, f"layer {layer} of the {stack} has heads 0 to {heads - 1}")
    return stack, layer, head


def _whole_number(what: str, value, count: int, where: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__") or not 0 <= int(value) < count:
        raise InputError(f"There is no {what} {value!r} to ablate: {where}.")
    return int(value)


def keep_masks(lm, rows: Sequence[Ablation]) -> dict[int, torch.Tensor]:
    """{id(module): [row, head] bool}, False where row ``r`` ablates that head; only modules some row ablates.
    ``rows`` are canonical ablations, one per row of the batch the masks will run with."""
    found = layout(lm)
    masks: dict[int, torch.Tensor] = {}
    for row, ablation in enumerate(rows):
        for stack, layer, head in ablation:
            module = found.modules[stack][layer]
            if module not in masks:
                masks[module] = torch.ones((len(rows), found.heads[stack][layer]), dtype=torch.bool)
            masks[module][row, head] = False
    return {module: mask.to(lm.device) for module, mask in masks.items()}


@contextmanager
def ablating(lm, ablation: Ablation) -> Iterator[None]:
    """Run the block with the heads of the canonical ``ablation`` zeroed in every forward pass (every row)."""
    if not ablation:  # no ablation: not even an empty context, so results are bit for bit the plain ones
        yield
        return
    with recorder.ablating(keep_masks(lm, [ablation])):
        yield
