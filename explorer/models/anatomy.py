"""What a model is made of: its sizes, where its norms sit, how it knows positions, and its parameters by kind.

Everything here reads the loaded model (its config and its modules) and returns the frozen records of
``explorer.data.anatomy``. Quirks that cannot be read off reliably (where the layer norms sit, the position
scheme) come from a table keyed by model type, with an inference from module names as the fallback.
"""

from __future__ import annotations

import re

import numpy as np

from explorer.data.anatomy import LayerCounts, ModelAnatomy, ModuleRow

# model_type -> (layer-norm placement, position scheme); an entry is needed only where inference would fail.
ANATOMY_QUIRKS = {
    "bert": ("post", "learned absolute"),
    "roberta": ("post", "learned absolute"),
    "distilbert": ("post", "learned absolute"),
    "electra": ("post", "learned absolute"),
    "albert": ("post", "learned absolute"),
    "xlm-roberta": ("post", "learned absolute"),
    "gpt2": ("pre", "learned absolute"),
    "opt": ("pre", "learned absolute"),
    "t5": ("pre", "relative bias"),
    "bart": ("post", "learned absolute"),
    "llama": ("pre", "rotary"),
    "mistral": ("pre", "rotary"),
    "qwen2": ("pre", "rotary"),
    "qwen3": ("pre", "rotary"),
    "gemma": ("pre", "rotary"),
    "gemma2": ("pre and post (sandwich)", "rotary"),
    "phi3": ("pre", "rotary"),
}
KINDS = ("embeddings", "attention", "feed-forward", "norms", "other")
# What ``parameter_part`` tells apart inside a layer (other kinds: "<kind> weights" and "<kind> biases").
PARTS = (
    "attention weights",
    "attention biases",
    "cross-attention weights",
    "cross-attention biases",
    "relative position bias",
    "feed-forward weights",
    "feed-forward biases",
    "norm scales",
    "norm biases",
    "query/key norm scales",
    "query/key norm biases",
)
_LAYER_INDEX = re.compile(r"\.(?:layer|layers|h|block|blocks)\.(\d+)\.")
_ATTENTION = re.compile(r"(attn|attention|selfattention|encdecattention|q_proj|k_proj|v_proj|o_proj|query|key|value)")
_FFN = re.compile(
    r"(mlp|intermediate|densereludense|ffn|feed_forward|fc\d|gate_proj|up_proj|down_proj|\.output\.dense)"
)
_NORM = re.compile(r"(norm|ln_\d|ln_f|layernorm|layer_norm)")
_EMBEDDING = re.compile(r"(embed|wte|wpe|shared|position|token_type|lm_head)")  # lm_head: the unembedding

WIDTH_ATTRS = ("hidden_size", "n_embd", "d_model", "dim")
FFN_ATTRS = ("intermediate_size", "n_inner", "d_ff", "ffn_dim", "hidden_dim")
KV_ATTRS = ("num_key_value_heads", "num_kv_heads", "n_head_kv")


def model_anatomy(lm) -> ModelAnatomy:
    """The anatomy of a loaded model (see ``ModelAnatomy``)."""
    model, config = lm.model, lm.model.config.get_text_config()
    width = _first_int(config, WIDTH_ATTRS)
    heads = lm.num_heads
    head_dim = getattr(config, "head_dim", None) or getattr(config, "d_kv", None) or (width // heads if width else 0)
    ffn = _first_int(config, FFN_ATTRS) or (4 * width if width else None)
    kv_heads = _first_int(config, KV_ATTRS) or heads
    norm_place, positions = _quirks(model)
    counts = parameter_counts(model)
    return ModelAnatomy(
        name=lm.name,
        architecture=type(model).__name__,
        model_type=config.model_type,
        kind=lm.kind,
        layers=lm.num_layers,
        width=width,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=int(head_dim),
        ffn_size=ffn,
        vocabulary=int(getattr(config, "vocab_size", 0) or 0),
        context=lm.max_tokens,
        norm_placement=norm_place,
        norm_kind=_norm_kind(model),
        position_scheme=positions,
        tied_embeddings=_tied(model),
        output_embeddings=_output_embeddings(model) is not None,
        total_parameters=int(sum(p.numel() for p in model.parameters())),
        by_kind={kind: int(sum(row.counts[kind] for row in counts)) for kind in KINDS},
        layer_counts=tuple(counts),
        modules=tuple(module_rows(model)),
        bias_parameters=bias_count(model),
        position_rows=position_rows(model),
    )


_POSITION_TABLE = re.compile(r"(^|\.)(wpe|position_embeddings|embed_positions)\.weight$")


def position_rows(model) -> int:
    """Rows of the model's learned position table (the lecture's l_c); 0 when it has none."""
    for name, parameter in model.named_parameters():
        if _POSITION_TABLE.search(name) and parameter.dim() == 2:
            return int(parameter.shape[0])
    return 0


def bias_count(model) -> int:
    """Parameters in bias vectors outside the layer norms (each tied parameter once)."""
    return int(
        sum(
            parameter.numel()
            for name, parameter in model.named_parameters()
            if name.endswith("bias") and parameter_kind(name) != "norms" and "relative_attention_bias" not in name
        )
    )


def parameter_counts(model) -> list[LayerCounts]:
    """Parameters by kind, per layer (``layer`` None: outside the layers, e.g. embeddings). Shared (tied)
    parameters are counted once, as ``sum(p.numel() for p in model.parameters())`` does."""
    rows: dict[tuple[str, int | None], dict[str, int]] = {}
    parts: dict[tuple[str, int | None], dict[str, int]] = {}
    for name, parameter in model.named_parameters():  # named_parameters skips tied duplicates
        match = _LAYER_INDEX.search("." + name)
        stack = "decoder" if ".decoder." in "." + name or name.startswith("decoder.") else "main"
        key = (stack, int(match.group(1)) if match else None)
        kind = parameter_kind(name)
        row = rows.setdefault(key, dict.fromkeys(KINDS, 0))
        row[kind] += int(parameter.numel())
        part = parameter_part(name, kind)
        parts.setdefault(key, {})[part] = parts.get(key, {}).get(part, 0) + int(parameter.numel())
    return [
        LayerCounts(stack=stack, layer=layer, counts=counts, parts=parts[stack, layer])
        for (stack, layer), counts in sorted(
            rows.items(), key=lambda item: (item[0][0], -1 if item[0][1] is None else item[0][1])
        )
    ]


def parameter_kind(name: str) -> str:
    """embeddings, attention, feed-forward, norms or other, from a parameter's dotted name."""
    lowered = name.lower()
    if _NORM.search(lowered):
        return "norms"
    if _LAYER_INDEX.search("." + lowered):
        if "relative_attention_bias" in lowered or _ATTENTION.search(lowered.replace("attention.output.dense", "attn")):
            return "attention" if not _is_ffn_output(lowered) else "feed-forward"
        if _FFN.search(lowered):
            return "feed-forward"
        return "other"
    if _EMBEDDING.search(lowered):
        return "embeddings"
    return "other"


_CROSS = re.compile(r"(encdecattention|encoder_attn|crossattention|cross_attn)")
_QK_NORM = re.compile(r"\.(q_norm|k_norm|q_layernorm|k_layernorm)\.")


def parameter_part(name: str, kind: str) -> str:
    """What a parameter is within its kind, one of ``PARTS`` (``kind`` + " weights"/" biases" otherwise):
    what the textbook comparison needs to tell apart (``explorer.compute.anatomy.layer_against_textbook``)."""
    lowered = name.lower()
    role = "biases" if lowered.endswith("bias") else "weights"
    if "relative_attention_bias" in lowered:
        return "relative position bias"
    if kind == "attention":
        return f"{'cross-' if _CROSS.search(lowered) else ''}attention {role}"
    if kind == "norms":
        return f"{'query/key ' if _QK_NORM.search(lowered) else ''}norm {'biases' if role == 'biases' else 'scales'}"
    return f"{kind} {role}"


def _is_ffn_output(name: str) -> bool:
    """BERT's FFN output is ``layer.N.output.dense`` (not ``attention.output.dense``)."""
    return ".output.dense" in name and ".attention." not in name


def module_rows(model, max_depth: int = 4) -> list[ModuleRow]:
    """The module tree, depth-first, with each module's own parameter shapes and its total parameter count.
    Repeated layers after the first are summarised (one row saying how many more), to keep the tree short."""
    rows = []

    def visit(module, name: str, depth: int) -> None:
        own = tuple((pname, tuple(p.shape)) for pname, p in module.named_parameters(recurse=False))
        total = sum(p.numel() for p in module.parameters())
        rows.append(
            ModuleRow(depth=depth, name=name or "(model)", kind=type(module).__name__, parameters=own, count=int(total))
        )
        if depth >= max_depth:
            return
        children = list(module.named_children())
        repeated = _repeated_layers(children)
        for index, (child_name, child) in enumerate(children):
            if repeated and index > 0:
                rows.append(
                    ModuleRow(
                        depth=depth + 1,
                        name=f"… {len(children) - 1} more like {children[0][0]}",
                        kind=type(child).__name__,
                        parameters=(),
                        count=int(sum(sum(p.numel() for p in c.parameters()) for _, c in children[1:])),
                    )
                )
                break
            visit(child, f"{name}.{child_name}" if name else child_name, depth + 1)

    visit(model, "", 0)
    return rows


def _repeated_layers(children) -> bool:
    return (
        len(children) > 2 and all(name.isdigit() for name, _ in children) and len({type(c) for _, c in children}) == 1
    )


def _quirks(model) -> tuple[str, str]:
    model_type = model.config.get_text_config().model_type
    if model_type in ANATOMY_QUIRKS:
        return ANATOMY_QUIRKS[model_type]
    names = [name for name, _ in model.named_modules()]
    norm = (
        "pre"
        if any(re.search(r"(input_layernorm|ln_1|pre_attn)", n) for n in names)
        else ("post" if any("output.LayerNorm" in n for n in names) else "unknown")
    )
    if any(n.endswith("rotary_emb") for n in names):
        positions = "rotary"
    elif any("relative_attention_bias" in n for n in names):
        positions = "relative bias"
    elif any(re.search(r"(position_embeddings|wpe|embed_positions)$", n) for n in names):
        positions = "learned absolute"
    else:
        positions = "unknown"
    return norm, positions


def _norm_kind(model) -> str:
    kinds = {type(m).__name__ for m in model.modules() if "norm" in type(m).__name__.lower()}
    if any("rms" in k.lower() for k in kinds) or "T5LayerNorm" in kinds:
        return "RMSNorm"
    return "LayerNorm" if kinds else "none"


def _output_embeddings(model):
    return getattr(model, "get_output_embeddings", lambda: None)()


def _tied(model) -> bool:
    inputs, outputs = model.get_input_embeddings(), _output_embeddings(model)
    return outputs is not None and inputs is not None and outputs.weight is inputs.weight


def _first_int(config, attrs) -> int | None:
    for attr in attrs:
        value = getattr(config, attr, None)
        if isinstance(value, int | np.integer) and not isinstance(value, bool):
            return int(value)
    return None
