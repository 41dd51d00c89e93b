"""Architecture quirks as data: a table keyed by model type, not a chain of ``if``s.

Most quirks (RoPE, q/k norms, grouped KV heads, T5's bias and missing scaling, softcapping) never
reach this table: the recorder sees the final tensors that each model's own attention code passes to
``eager_attention_forward``. What is left is how to load a model of each kind and how to tell a
decoder's cross-attention modules from its self-attention ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

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
    # The norm the language-model head reads through (the logit lens applies it to every layer's residual
    # stream): an attribute path from the model with its head. Most decoders of the library call it model.norm.
    final_norm: str = "model.norm"
    # An encoder's masked-LM head in its checkpoint (the module of AutoModelForMaskedLM that turns hidden states
    # into logits), for the logit lens; None where the family has none we read.
    masked_lm_head: str | None = None
    # Integrated gradients' points that keep its completeness error under 1% of the change (the Why this token?
    # page's default). T5's bias-free RMSNorms and ReLUs make f' jump at hundreds to thousands of points of the
    # path: 64 points miss by 2-17% there, 256 by 0.02-0.4% on the bundled dates-t5 (bench/bench_ig_path.py).
    integrated_gradients_steps: int = 64


# Keyed by ``config.model_type``. An entry is needed only where the defaults are wrong.
QUIRKS: dict[str, ArchitectureQuirks] = {
    # Encoder-only families whose configs may carry ``is_decoder``-like hints but that we show as encoders.
    "bert": ArchitectureQuirks(kind=KIND_ENCODER, masked_lm_head="cls"),
    "roberta": ArchitectureQuirks(kind=KIND_ENCODER, masked_lm_head="lm_head"),
    "distilbert": ArchitectureQuirks(kind=KIND_ENCODER),
    "electra": ArchitectureQuirks(kind=KIND_ENCODER),
    "albert": ArchitectureQuirks(kind=KIND_ENCODER),
    "deberta-v2": ArchitectureQuirks(kind=KIND_ENCODER),
    "modernbert": ArchitectureQuirks(kind=KIND_ENCODER),
    "xlm-roberta": ArchitectureQuirks(kind=KIND_ENCODER, masked_lm_head="lm_head"),
    "t5": ArchitectureQuirks(
        kind=KIND_ENCODER_DECODER,
        cross_attention_names=frozenset({"EncDecAttention"}),
        final_norm="decoder.final_layer_norm",
        integrated_gradients_steps=256,
    ),
    "gpt2": ArchitectureQuirks(final_norm="transformer.ln_f"),
    "gpt_neox": ArchitectureQuirks(final_norm="gpt_neox.final_layer_norm"),
    "gptj": ArchitectureQuirks(final_norm="transformer.ln_f"),
    "bloom": ArchitectureQuirks(final_norm="transformer.ln_f"),
    "falcon": ArchitectureQuirks(final_norm="transformer.ln_f"),
    "opt": ArchitectureQuirks(final_norm="model.decoder.final_layer_norm"),
    "phi": ArchitectureQuirks(final_norm="model.final_layernorm"),
}


def quirks_for(model_type: str) -> ArchitectureQuirks:
    return QUIRKS.get(model_type, ArchitectureQuirks())


def infer_kind(config) -> str:
    """Encoder, decoder or encoder-decoder, from the table first and the config second."""
    listed = quirks_for(config.model_type).kind
    if listed is not None:
        return listed
    if getattr(config, "is_encoder_decoder", False):
        return KIND_ENCODER_DECODER
    if _has_causal_lm(config):
        return KIND_DECODER
    return KIND_ENCODER


def _has_causal_lm(config) -> bool:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
