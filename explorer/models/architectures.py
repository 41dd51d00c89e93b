"""Architecture quirks as data: a table keyed by model type, not a chain of ``if``s.

Most quirks (RoPE, q/k norms, grouped KV heads, T5's bias and missing scaling, softcapping) never
reach this table: the recorder sees the final tensors that each model's own attention code passes to
``eager_attention_forward``. What is left is how to load a model of each kind and how to tell a
decoder's cross-attention modules from its self-attention ones.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM

KIND_ENCODER = "encoder"
KIND_DECODER = "decoder"
KIND_ENCODER_DECODER = "encoder-decoder"

# The auto class that loads each kind with the head the explorer needs (none for encoders).
AUTO_CLASS_OF_KIND = {
    KIND_ENCODER: AutoModel,
    KIND_DECODER: AutoModelForCausalLM,
    KIND_ENCODER_DECODER: AutoModelForSeq2SeqLM,
}

# Names that mark a cross-attention submodule across the library's modeling files.
DEFAULT_CROSS_ATTENTION_NAMES = frozenset({"encoder_attn", "crossattention", "cross_attn", "EncDecAttention"})


@dataclass(frozen=True)
class ArchitectureQuirks:
    kind: str | None = None  # overrides the kind inferred from the config
    cross_attention_names: frozenset[str] = DEFAULT_CROSS_ATTENTION_NAMES
    # No final norm or masked-LM head here: the lens and patching find them in the module graph (models/sites.py).
    # Integrated gradients' points that keep its completeness error under 1% of the change (the Why this token?
    # page's default). T5's bias-free RMSNorms and ReLUs make f' jump at hundreds to thousands of points of the
    # path: 64 points miss by 2-17% there, 256 by 0.02-0.4% on the bundled dates-t5 (bench/bench_ig_path.py).
    integrated_gradients_steps: int | None = None  # None: 64, or more for a mixture of experts (see below)
    # Attention sinks (the ``s_aux`` logit per head) join the softmax whose weights the model returns (GPT-OSS,
    # MiMo-V2-Flash), unless this says how else they act: then its weights are a plain softmax, recomputed as one.
    sinks_after_weights: str | None = None


# Granite SWA's eager attention returns a plain softmax and scales each head's output by sigmoid(lse - sink) after.
_GRANITE_SWA_SINKS = (
    "Its attention sinks act after the softmax: each head's output is scaled by sigmoid(logsumexp(scores) - sink). "
    "The weights shown are the model's own softmax, without the sinks, and verify() recomputes that."
)

# Keyed by ``config.model_type``. An entry is needed only where the defaults are wrong.
QUIRKS: dict[str, ArchitectureQuirks] = {
    "granite_swa": ArchitectureQuirks(sinks_after_weights=_GRANITE_SWA_SINKS),
    "granitemoe_swa": ArchitectureQuirks(sinks_after_weights=_GRANITE_SWA_SINKS),
    # No entry sets ``kind``: the config and the class the checkpoint was saved as say it (``infer_kind``).
    "t5": ArchitectureQuirks(
        cross_attention_names=frozenset({"EncDecAttention"}),
        integrated_gradients_steps=256,
    ),
    # T5's feed-forward ReLUs and norms (the bisected trapezoid, explorer.compute.quadrature): 256 points miss by
    # 0.89% on the tiny LongT5 (Gauss-Legendre panels: 6.7% at 64, 1.3% at 256), by 0.73% on the tiny Switch
    # Transformers (whose path is the tiny T5's: the same weights, its experts in no layer of two; panels: 17% at 64)
    "longt5": ArchitectureQuirks(integrated_gradients_steps=256),
    "switch_transformers": ArchitectureQuirks(integrated_gradients_steps=256),
    # Four bias-free RMSNorms a layer move f over 14 decades of α (Σ|Δf| 4.4 times the change, tiny Gemma 2): the
    # panels miss by 3.8% at 64 points, by 3e-5 at 256
    "gemma2": ArchitectureQuirks(integrated_gradients_steps=256),
    # Two bias-free RMSNorms a layer, eight layers on the bundled prose-llama: the panels miss by 7-49% at 64 points,
    # 0.3-1.3% at 256 (three texts), 2-20% at 128 and under 0.01% at 512 (four texts)
    "llama": ArchitectureQuirks(integrated_gradients_steps=512),
}


def quirks_for(model_type: str) -> ArchitectureQuirks:
    return QUIRKS.get(model_type, ArchitectureQuirks())


# How transformers' configs count a mixture's experts (Mixtral, Qwen3-MoE, Qwen3-Next, GPT-OSS, DeepSeek...).
_EXPERT_COUNTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
# A mixture of experts routes each token to a few experts: log p jumps where they switch along an attribution
# path, so its scores equal the integral of the gradient, never the change. 256 points bring them within 0.3% of
# the change of a 4,096-point integral on the tiny Mixtral, Qwen3-MoE, Qwen3-Next and GPT-OSS (64: up to 1.7%).
ROUTED_INTEGRATED_GRADIENTS_STEPS = 256


def routes_to_experts(config) -> bool:
    """Whether the model's config names more than one expert per mixture layer."""
    return any(isinstance(count := getattr(config, name, None), int) and count > 1 for name in _EXPERT_COUNTS)


def integrated_gradients_steps(config) -> int:
    """The Why this token? page's default points: the family's own where the table gives them, else 64, or more
    for a mixture of experts."""
    listed = quirks_for(config.model_type).integrated_gradients_steps
    if listed is not None:
        return listed
    return ROUTED_INTEGRATED_GRADIENTS_STEPS if routes_to_experts(config) else 64


def module_quirks(module) -> ArchitectureQuirks:
    """The quirks of the family a module belongs to, by its own config (a composite model's text part has its own)."""
    return quirks_for(getattr(getattr(module, "config", None), "model_type", ""))


def infer_kind(config) -> str:
    """Encoder, decoder or encoder-decoder, from the config and the class the checkpoint was saved as.

    ``is_encoder_decoder`` says the first. A family with a masked-LM class (BERT, RoBERTa, CamemBERT, ERNIE...)
    attends both ways unless ``is_decoder`` is set, even where it also has a causal-LM class: it is a decoder
    only then, and only if the checkpoint was saved as that causal LM where ``config.architectures`` names the
    class. A decoder-only family's checkpoint saved as its base model alone is an encoder: it has no head to
    decode with.
    """
    listed = quirks_for(config.model_type).kind  # none is listed today: kept for what a config cannot say
    if listed is not None:
        return listed
    if getattr(config, "is_encoder_decoder", False):
        return KIND_ENCODER_DECODER
    causal = _classes(_auto_names("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"), config.model_type)
    if not causal:
        return KIND_ENCODER
    saved = set(getattr(config, "architectures", None) or ())
    if _classes(_auto_names("MODEL_FOR_MASKED_LM_MAPPING_NAMES"), config.model_type):
        decoder = getattr(config, "is_decoder", False) and not (saved and saved.isdisjoint(causal))
        return KIND_DECODER if decoder else KIND_ENCODER
    headless = _classes(_auto_names("MODEL_MAPPING_NAMES"), config.model_type) - causal
    return KIND_ENCODER if saved and saved <= headless else KIND_DECODER


def auto_class_for(config, kind: str):
    """The auto class that loads a checkpoint of ``kind``: ``AUTO_CLASS_OF_KIND``'s, except for an encoder whose base
    model reads no token ids (Perceiver's requires ``inputs``, arrays a preprocessor makes, and its base model has
    none) saved as its masked LM, which does (Perceiver's embeds the ids through its text preprocessor): that masked
    LM. A base model saved without one keeps its base class, and the load's probe refuses it with the reason."""
    base = AUTO_CLASS_OF_KIND[kind]
    if kind != KIND_ENCODER or not inputs_besides_ids(_mapped_class(base, config)):
        return base
    saved = set(getattr(config, "architectures", None) or ())
    if not saved & _classes(_auto_names("MODEL_FOR_MASKED_LM_MAPPING_NAMES"), config.model_type):
        return base
    return AutoModelForMaskedLM if not inputs_besides_ids(_mapped_class(AutoModelForMaskedLM, config)) else base


def inputs_besides_ids(model_class) -> list[str]:
    """The inputs a model class's forward requires besides ``input_ids`` (none for a text model; an unknown class
    has none to name)."""
    if model_class is None:
        return []
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = inspect.signature(model_class.forward).parameters.values()
    required = [p.name for p in parameters if p.kind in kinds and p.default is p.empty]
    return [name for name in required if name not in ("self", "input_ids")]


def _mapped_class(auto_class, config):
    """The class ``auto_class`` would build for ``config``, without building it; None where it maps none. Where it
    maps several (Funnel's full and base models), the one the checkpoint was saved as, else the first, as
    transformers picks."""
    try:
        found = auto_class._model_mapping[type(config)]
    except (KeyError, ValueError):
        return None
    if not isinstance(found, list | tuple):
        return found
    saved = set(getattr(config, "architectures", None) or ())
    return next((model_class for model_class in found if model_class.__name__ in saved), found[0])


def _auto_names(mapping: str) -> dict:
    from transformers.models.auto import modeling_auto

    return getattr(modeling_auto, mapping)


def _classes(names: dict, model_type: str) -> set[str]:
    """The class names an auto mapping lists for ``model_type`` (one name, or a tuple of them)."""
    found = names.get(model_type, ())
    return {found} if isinstance(found, str) else set(found)


# Layer types in transformers' own config vocabulary (``config.layer_types``; its legacy "mamba" included) whose
# layers carry a running state (linear attention, state spaces, convolutions) instead of softmax weights over keys.
STATE_LAYER_TYPES = frozenset({"linear_attention", "conv", "mamba"})


def stateful_layer_types(config) -> tuple[str, ...] | None:
    """The config's layer types where every one is a state-carrying layer (a hybrid family built without any of its
    attention layers, such as a 2-layer RecurrentGemma whose attention comes every third layer), else None."""
    layer_types = getattr(config.get_text_config(), "layer_types", None)
    if not layer_types or not all(kind in STATE_LAYER_TYPES for kind in layer_types):
        return None
    return tuple(layer_types)


def attention_outputs(config, layers):
    """A model's per-layer ``output_attentions`` with what its state-carrying layers return put as None, as
    transformers itself puts it for most hybrids: MiniMax's lightning (linear-attention) layers return their running
    state [batch, head, head_dim, head_dim], not weights over the tokens. Layers as they are where the config names
    no type per layer."""
    layer_types = getattr(config.get_text_config(), "layer_types", None)
    if not layers or not layer_types or len(layer_types) != len(layers):
        return layers
    return tuple(None if kind in STATE_LAYER_TYPES else layer for kind, layer in zip(layer_types, layers, strict=True))
