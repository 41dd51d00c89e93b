"""Tiny random models of every text family transformers ships, and the coverage matrix over them (issue 40).

``FAMILIES`` maps a ``config.model_type`` to a ``Family``: its kind (how its Hub checkpoints are saved: "encoder"
as the masked-LM or base class, "decoder" as the causal LM, "encoder-decoder" as the seq2seq LM) and the config
values that make it tiny and exercise its quirks (sliding and chunked windows of 4 tokens, so that a prompt of 6
and 3 new tokens exceed them). ``build_family(model_type, folder)`` builds one from the family's own config class
with seeded random weights and saves it with a word-level tokenizer, so that it loads through
``explorer.load_model(folder)``.

``coverage(root)`` then checks each feature of the explorer on each family against plain transformers run on the
same weights (the model's own eager ``output_attentions``, ``generate()``, its logits through transformers' logits
processors, its own final norm and head, plain forward hooks) and marks each cell ``Y``, ``ERROR`` (a clear
message), ``NA`` (with the reason), ``FAIL`` (a crash, or a number off its reference) or not checked (the costlier
features run on ``REPRESENTATIVES`` only; or transformers itself fails on the reference).
``tests/test_families.py`` asserts the matrix; ``docs/supported-models.md`` is its table::

    python -m tests.families --write-docs   # regenerate docs/supported-models.md
"""

from __future__ import annotations

import argparse
import copy
import inspect
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np
import torch
from transformers import CONFIG_MAPPING
from transformers.models.auto import modeling_auto

from tests.tiny_models import IDS, VOCAB, word_tokenizer

ENCODER, DECODER, ENCODER_DECODER = "encoder", "decoder", "encoder-decoder"

# Size fields found in the library's configs, shrunk: each is passed only where the family's config has it.
SHRINK = {
    "hidden_size": 32,
    "d_model": 32,
    "n_embd": 32,
    "dim": 32,
    "embed_dim": 32,
    "intermediate_size": 64,
    "ffn_dim": 64,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "d_ff": 64,
    "n_inner": 64,
    "hidden_dim": 64,
    "num_hidden_layers": 2,
    "n_layer": 2,
    "n_layers": 2,
    "num_layers": 2,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "num_decoder_layers": 2,
    "num_attention_heads": 4,
    "n_head": 4,
    "n_heads": 4,
    "num_heads": 4,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "d_kv": 8,
    "max_position_embeddings": 64,
    "n_positions": 64,
    "n_ctx": 64,
    "sliding_window": 4,
    "attention_chunk_size": 4,
    "attention_window": 4,
    "block_size": 4,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "num_experts_per_token": 2,
    "moe_intermediate_size": 16,
    "embedding_size": 16,
    # The widths some families name otherwise, left at their checkpoints' sizes they cost seconds a family
    # (Kimi-Linear's 32 linear-attention heads of 128, Falcon-H1's 1024-wide SSM, LUKE's 500,000 entities).
    "linear_num_heads": 4,
    "linear_head_dim": 8,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 8,
    "linear_value_head_dim": 8,
    "mamba_d_ssm": 64,
    "mamba_n_heads": 8,
    "mamba_d_head": 8,
    "mamba_d_state": 16,
    "mamba_chunk_size": 16,
    "ffn_hidden_size": 64,
    "expert_ffn_hidden_size": 16,
    "entity_vocab_size": 16,
    "entity_emb_size": 16,
    "emb_dim": 32,
    "vocab_size_per_layer_input": IDS["vocab_size"],
    "hidden_size_per_layer_input": 8,
    "d_latents": 32,
    "num_latents": 8,
}


# Multi-head latent attention (DeepSeek-V2 and its kin), shrunk consistently.
LATENT = {
    "kv_lora_rank": 16,
    "q_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 16,
    "head_dim": 8,
    "qk_head_dim": 16,
    "num_key_value_heads": 4,  # no grouped heads: the latent is shared instead
}


@dataclass(frozen=True)
class Family:
    kind: str
    config: dict = field(default_factory=dict)  # values on top of SHRINK (the family's quirks, kept tiny)
    model_class: str | None = None  # the class its checkpoints are saved as, where the auto mapping's is not it


def _kind(model_type: str) -> str:
    """How the family's Hub checkpoints are saved: seq2seq LM, else masked LM (an encoder), else causal LM."""
    if model_type in modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
        return ENCODER_DECODER
    if model_type in modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return ENCODER
    return DECODER


# Families the matrix leaves out on purpose, and why (beyond composite configs, see ``_left_out``).
NOT_TEXT: dict[str, str] = {
    "whisper": "speech recognition: its encoder reads audio features",
    "trocr": "the text decoder of an image-to-text model (its checkpoints are vision encoder-decoders)",
    "seamless_m4t": "speech and text translation: one model of speech and text encoders and decoders",
    "seamless_m4t_v2": "speech and text translation: one model of speech and text encoders and decoders",
}
# Sub-configs that are parts of a text model's own layers (MPT's attention, DBRX's attention and experts).
TEXT_PARTS = frozenset({"attn_config", "ffn_config"})

# What differs from the defaults (the kind from the mappings, SHRINK's sizes), per family.
OVERRIDES: dict[str, Family] = {
    # Its Hub checkpoints are causal LMs (ReformerModelWithLMHead), though it also has a masked-LM class.
    "reformer": Family(
        DECODER, {"is_decoder": True, "axial_pos_embds_dim": [16, 16], "axial_pos_shape": [8, 8], "num_buckets": 4}
    ),
    # The decoder class of the causal-LM mapping, as encoder-decoders built from it use it.
    "bert-generation": Family(DECODER, {"is_decoder": True}),
    # OPT-350m: word embeddings narrower than the hidden states, projected in and out.
    "opt": Family(DECODER, {"word_embed_proj_dim": 16}),
    # Attention in layer 1 of 2 (the defaults put it in every 8th layer, so 2 layers would have none).
    "jamba": Family(
        DECODER, {"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 2, "expert_layer_offset": 1}
    ),
    "qwen3_next": Family(DECODER, {"layer_types": ["linear_attention", "full_attention"]}),
    # LongT5's local attention with a radius of 2 tokens, so that 6 tokens exceed it.
    "longt5": Family(ENCODER_DECODER, {"local_radius": 2}),
    # GPT-Neo: a global then a local layer, the local one a window of 4.
    "gpt_neo": Family(DECODER, {"attention_types": [[["global", "local"], 1]], "window_size": 4}),
    # Hybrids: a linear-attention (or state-space, or convolution) layer, then a softmax-attention one, so that
    # capture is checked against attention the model computes (their defaults put attention in every 4th to 6th
    # layer, or none: 2 layers would have none). Mamba-2 heads: hidden_size * expand = heads * head_dim.
    "bamba": Family(DECODER, {"mamba_n_heads": 4, "mamba_d_head": 16, "attn_layer_indices": [1]}),
    "granitemoehybrid": Family(
        DECODER, {"mamba_n_heads": 4, "mamba_d_head": 16, "layer_types": ["linear_attention", "full_attention"]}
    ),
    "bailing_hybrid": Family(DECODER, {"layer_types": ["linear_attention", "full_attention"]}),
    "kimi_linear": Family(DECODER, {"layer_types": ["linear_attention", "full_attention"]}),
    "lfm3": Family(DECODER, {"layer_types": ["conv", "full_attention"]}),
    "qwen3_5_text": Family(DECODER, {"layer_types": ["linear_attention", "full_attention"]}),
    "recurrent_gemma": Family(DECODER, {"block_types": ["recurrent", "attention"]}),
    "qwen3_5_moe_text": Family(DECODER, {"layer_types": ["linear_attention", "full_attention"]}),
    # Its attention layer selects keys by a token indexer (QSA), which needs its sizes.
    "qwen4_exp_text": Family(
        DECODER,
        {
            "layer_types": ["linear_attention", "indexed_attention"],
            "indexer_n_heads": 2,
            "indexer_kv_heads": 1,
            "indexer_head_dim": 8,
            "indexer_budget": 4,
            "indexer_compress_ratio": 2,
        },
    ),
    "zamba2": Family(DECODER, {"layers_block_type": ["mamba", "hybrid"]}),
    # Families whose attention has no grouped key/value heads.
    "dots3_note_text": Family(DECODER, {"num_key_value_heads": 4}),
    "esmc": Family(ENCODER, {"num_key_value_heads": 4}),
    "neomme": Family(ENCODER, {"head_dim": 16}),
    "squeezebert": Family(ENCODER, {"embedding_size": 32}),
    "zaya": Family(DECODER, {"num_experts_per_tok": 1}),
    "gemma3n_text": Family(DECODER, {"num_kv_shared_layers": 0}),
    "dots1": Family(DECODER, {"n_shared_experts": 1}),
    "lfm2_moe": Family(DECODER, {"layer_types": ["conv", "full_attention"]}),
    "cohere_compass_text": Family(
        DECODER,
        {
            "layer_types": ["sliding_attention", "full_attention"],
            "rope_parameters": {
                "full_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            },
        },
    ),
    # Rotary dimensions within the 8-wide heads.
    "gptj": Family(DECODER, {"rotary_dim": 4}),
    "codegen": Family(DECODER, {"rotary_dim": 4}),
    "dbrx": Family(DECODER, {"attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0}}),
    "mamba2": Family(DECODER, {"head_dim": 16, "n_groups": 1}),
    # xLSTM's cache sizes its state for query/key and value widths rounded up to 64 (hidden_size * factor), its layers
    # use them unrounded: widths of 64, as its checkpoints' are, or a forward with its cache (generate()'s) crashes.
    "xlstm": Family(DECODER, {"qk_dim_factor": 2.0, "v_dim_factor": 2.0}),
    "marian": Family(ENCODER_DECODER, {"decoder_vocab_size": IDS["vocab_size"]}),
    "funnel": Family(ENCODER, {"block_sizes": [1, 1], "num_decoder_layers": 1}),
    "xmod": Family(ENCODER, {"default_language": "en_XX"}),
    # Zamba ties the shared transformer of its hybrid layers: it needs two of them.
    "zamba": Family(DECODER, {"num_hidden_layers": 3, "layers_block_type": ["mamba", "hybrid", "hybrid"]}),
}


def _left_out(model_type: str) -> str | None:
    """Why ``model_type`` is not in the matrix, or None: not a text model, or a config made of sub-configs (an
    image, audio or speech model with a text part, or a composite of other families that are in the matrix)."""
    if model_type in NOT_TEXT:
        return NOT_TEXT[model_type]
    parts = set(getattr(CONFIG_MAPPING[model_type], "sub_configs", None) or ()) - TEXT_PARTS
    if parts:
        return f"a composite config ({', '.join(sorted(parts))}): not a text-only family"
    return None


def _candidates() -> list[str]:
    return sorted(
        set(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
        | set(modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)
        | set(modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES)
    )


SKIPPED: dict[str, str] = {name: why for name in _candidates() if (why := _left_out(name))}
FAMILIES: dict[str, Family] = {
    name: OVERRIDES.get(name) or Family(_kind(name)) for name in _candidates() if name not in SKIPPED
}


# The families issue 40 names, each in the matrix.
ISSUE_FAMILIES = (
    "gpt_neo", "gptj", "bloom", "falcon", "codegen", "mpt", "xglm", "openai-gpt", "deberta", "deberta-v2", "mpnet",
    "megatron-bert", "roformer", "big_bird", "longformer", "mvp", "led", "prophetnet", "m2m_100", "blenderbot",
    "blenderbot-small", "nllb-moe", "opt", "pegasus_x", "camembert", "data2vec-text", "roberta-prelayernorm",
    "xlm-roberta-xl", "ernie", "cohere", "cohere2", "granite", "granitemoe", "longt5", "gpt_oss", "mistral", "gemma2",
    "gemma3_text", "starcoder2", "llama4_text", "olmo3", "exaone4", "ministral", "qwen3_next", "jamba",
    "switch_transformers", "albert", "electra", "mobilebert", "biogpt", "bart", "mbart", "plbart", "roberta", "mamba",
    "mixtral", "qwen3_moe", "t5", "gpt2", "llama", "bert", "qwen3", "xlm-roberta", "distilbert", "modernbert",
    "gpt_neox", "phi", "pegasus", "marian", "mt5", "umt5",
)  # fmt: skip


def tiny_config(model_type: str, **overrides):
    """The family's own config class with SHRINK's sizes (where it has them), the word tokenizer's ids, the
    family's overrides and then ``overrides`` (a test's variant of the family)."""
    family = FAMILIES[model_type]
    config_class = CONFIG_MAPPING[model_type]
    present = config_class().to_dict()
    values = {name: value for name, value in SHRINK.items() if name in present}
    values |= {name: value for name, value in IDS.items() if name in present or name == "vocab_size"}
    if "kv_lora_rank" in present:  # multi-head latent attention: its rotary part is the head_dim RoPE sees
        values |= {name: value for name, value in LATENT.items() if name in present}
    if family.kind == ENCODER:
        values["vocab_size"] = len(VOCAB_WITH_MASK)
    values |= _tiny_token_ids(present, values)
    if family.kind == ENCODER_DECODER and present.get("decoder_start_token_id") is None:
        values["decoder_start_token_id"] = IDS["pad_token_id"]  # as T5's checkpoints name it
    return config_class(**(values | family.config | overrides))


def _tiny_token_ids(present: dict, values: dict) -> dict:
    """The family's default token ids that lie beyond the tiny vocabulary (Marian's decoder starts from its pad
    token, 58100), made valid: the tiny tokenizer's id of that token where it has one, else the tiny id of the
    special token the family's defaults give the same id, so that the family's own relation between them holds."""
    size, fixed = values["vocab_size"], {}
    for name, value in present.items():
        if not (name.endswith("_token_id") and isinstance(value, int) and value >= size and name not in values):
            continue
        same = next((TOKEN_IDS[other] for other in TOKEN_IDS if other != name and present.get(other) == value), None)
        fixed[name] = TOKEN_IDS.get(name, same)
    return {name: value for name, value in fixed.items() if value is not None}


def model_class(model_type: str):
    """The class the family's checkpoints are saved as: its seq2seq LM, causal LM or masked LM (else base)."""
    import transformers

    family = FAMILIES[model_type]
    if family.model_class:
        return getattr(transformers, family.model_class)
    mapping = {
        ENCODER: modeling_auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES,
        DECODER: modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        ENCODER_DECODER: modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    }[family.kind]
    return getattr(transformers, mapping.get(model_type) or modeling_auto.MODEL_MAPPING_NAMES[model_type])


VOCAB_WITH_MASK = [*range(IDS["vocab_size"]), "[MASK]"]  # encoders' tokenizers add a [MASK] (patching, attribution)
# The word tokenizer's ids of the special tokens a config names (its [MASK] is the one encoders add).
TOKEN_IDS = {name: value for name, value in IDS.items() if name != "vocab_size"} | {
    "unk_token_id": VOCAB["<unk>"],
    "cls_token_id": VOCAB["[CLS]"],
    "sep_token_id": VOCAB["[SEP]"],
    "mask_token_id": len(VOCAB_WITH_MASK) - 1,
}


def tokenizer_for(kind: str):
    """The word tokenizer: [CLS] … [SEP] and a [MASK] for encoders, a trailing </s> for encoder-decoders."""
    if kind == ENCODER:
        tokenizer = word_tokenizer(pair_template=True)
        tokenizer.add_special_tokens({"mask_token": "[MASK]"})
        return tokenizer
    return word_tokenizer(eos=kind == ENCODER_DECODER)


def build(model_type: str, **overrides):
    """(model, tokenizer): the tiny ``model_type`` (its config's ``overrides`` applied) with seeded random weights,
    eager attention, in eval mode."""
    torch.manual_seed(0)
    config = tiny_config(model_type, **overrides)
    model = model_class(model_type)._from_config(config, attn_implementation="eager").eval()
    return model, tokenizer_for(FAMILIES[model_type].kind)


def build_family(model_type: str, folder: str | Path, **overrides) -> str:
    """Build the tiny ``model_type`` (its config's ``overrides`` applied) and save it with its tokenizer in
    ``folder``: the folder, as a string."""
    model, tokenizer = build(model_type, **overrides)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


# -- the coverage matrix ---------------------------------------------------------------------------------------

Y, ERROR, NA, FAIL = "Y", "clear error", "n/a", "FAIL"

PROMPT = "the cat sat on the mat"  # 6 tokens: past the windows of 4 before anything is generated
CORRUPTED = "the dog sat on the mat"
CORRUPTED_LATE = "the cat sat on a mat"  # changed inside the last chunk of 4 (chunked attention)
MASKED = ("the cat sat on the [MASK] .", "the dog sat on the [MASK] .")  # an encoder predicts its [MASK]
TARGET = "a dog ran"  # the decoder's text for encoder-decoders
NEW_TOKENS = 3
ATOL = 1e-5


@dataclass(frozen=True)
class Cell:
    mark: str
    note: str = ""


class Mismatch(AssertionError):
    """A number off its reference: silently wrong."""


@dataclass
class Subject:
    """One family: the plain model built here (the reference), its tokenizer, and what explorer loaded."""

    model_type: str
    kind: str
    reference: torch.nn.Module
    tokenizer: object
    lm: object = None
    cached: dict = field(default_factory=dict)

    def ids(self, text: str) -> torch.Tensor:
        return self.tokenizer(text, return_tensors="pt")["input_ids"]

    def start(self) -> torch.Tensor:
        from explorer.models.decoding import special_token_ids

        return torch.tensor([[special_token_ids(self.lm)["decoder_start"]]])

    def teacher_ids(self) -> torch.Tensor:
        """The decoder's input for TARGET as the model's own ``prepare_decoder_input_ids_from_labels`` shifts the
        labels (mBART moves the last token to the front), else the start token and all labels but the last."""
        labels = self.tokenizer(text_target=TARGET, return_tensors="pt")["input_ids"]
        try:
            return self.reference.prepare_decoder_input_ids_from_labels(labels=labels)
        except Exception:  # a family without it, or whose version fails (M2M100): shifted as T5's is
            return torch.cat([self.start(), labels[:, :-1]], dim=1)

    def run(self, ids: torch.Tensor, decoder_ids: torch.Tensor | None = None, **options):
        """The reference model's own forward pass (without a cache unless asked)."""
        extra = {} if decoder_ids is None else {"decoder_input_ids": decoder_ids}
        with torch.inference_mode(), reference_runs("own forward pass"):
            return self.reference(input_ids=ids, **extra, **({"use_cache": False} | options))


class ReferenceFailure(Exception):
    """Plain transformers itself failed on the reference: the feature cannot be checked here."""


@contextmanager
def reference_runs(what: str):
    """Failures inside the reference model's forward pass become ``ReferenceFailure``, saying whose they are:
    transformers' own code, or a hook this file added (then the reference needs fixing, not the explorer)."""
    try:
        yield
    except Mismatch:
        raise
    except Exception as error:
        # a hook of this file's that fails is the reference's fault, not the model's: said so
        where = (
            f"the reference's own hook fails in transformers' {what}"
            if _raised_here(error)
            else f"transformers' {what} fails"
        )
        raise ReferenceFailure(f"{where}: {type(error).__name__}: {_one_line(error)}") from error


def _raised_here(error: Exception) -> bool:
    """Whether ``error`` was raised in this file's code (a reference's hook), as its innermost frame says."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and frames[-1].filename == __file__


def close(what: str, ours, theirs, atol: float = ATOL) -> None:
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    if ours.shape != theirs.shape:
        raise Mismatch(f"{what}: shape {ours.shape}, the reference's {theirs.shape}")
    error = float(np.nanmax(np.abs(ours - theirs))) if ours.size else 0.0
    if not error <= atol:  # NaN fails too
        raise Mismatch(f"{what} off by {error:.2g}")


def _layers(layers, length: int | None = None) -> np.ndarray:
    """[layer, head, query, key] from the model's own per-layer weights (layers without attention left out); a
    self-attention stack of ``length`` tokens with its local bands placed as squares."""
    found = [layer[0] if length is None else _square(layer[0], length) for layer in layers if layer is not None]
    return torch.stack(found).float().numpy()


def _square(weights: torch.Tensor, length: int | None) -> torch.Tensor:
    """[head, query, key], with every key at its absolute position. Local attention comes in bands: Longformer's
    [head, query, window + 1] (keys from query - window/2 to query + window/2), LongT5's [block, head, block_len,
    3 * block_len] (each block's queries over the previous, own and next block's keys)."""
    if weights.dim() == 3 and weights.shape[-1] == weights.shape[-2]:
        return weights
    if weights.dim() == 3:
        heads, queries, width = weights.shape
        full = torch.zeros(heads, queries, queries + width - 1, dtype=weights.dtype)
        for query in range(queries):
            full[:, query, query : query + width] = weights[:, query]
        return full[:, :, (width - 1) // 2 : (width - 1) // 2 + queries]
    blocks, heads, size, _ = weights.shape
    full = torch.zeros(heads, blocks * size, (blocks + 2) * size, dtype=weights.dtype)
    for block in range(blocks):
        full[:, block * size : (block + 1) * size, block * size : (block + 3) * size] = weights[block]
    full = full[:, :, size : (blocks + 1) * size]  # the padding blocks before the first and after the last cut off
    return full[:, :length, :length]  # and the padding to a whole number of blocks


def _only_encoder_decoder_decoders(subject: Subject) -> Cell | None:
    if subject.kind == ENCODER:
        return Cell(NA, "an encoder has no language-model head: it predicts no next token")
    return None


# -- capture -----------------------------------------------------------------------------------------------------


def _capture(subject: Subject):
    import explorer

    if "capture" not in subject.cached:
        target = TARGET if subject.kind == ENCODER_DECODER else None
        subject.cached["capture"] = explorer.capture(subject.lm, PROMPT, target=target)
    return subject.cached["capture"]


def check_capture(subject: Subject) -> Cell:
    """The captured weights equal the model's own eager ``output_attentions``, stack by stack."""
    cap = _capture(subject)
    ids = torch.as_tensor(cap.token_ids)[None]
    subject = _returning_attentions(subject)
    if subject.kind == ENCODER_DECODER:
        out = subject.run(ids, subject.teacher_ids(), output_attentions=True)
        encoder = _encoder_layers(subject, out.encoder_attentions, ids.shape[1])
        expected = {"encoder": encoder, "decoder": out.decoder_attentions, "cross": _main_stream(out)}
    else:
        out = subject.run(ids, output_attentions=True)
        expected = {"encoder" if subject.kind == ENCODER else "decoder": _softmax_layers(subject, out.attentions)}
    notes = []
    for stack, layers in expected.items():
        if stack not in cap.stacks:
            if not cap.notes:
                raise Mismatch(f"the {stack} stack is missing, and the capture has no note saying why")
            notes.append(f"{stack}: {' '.join(cap.notes)}")
            continue
        length = None if stack == "cross" else cap.stacks[stack].attentions.shape[-2]
        if not isinstance(layers, np.ndarray):
            layers = _token_by_token(cap, stack, layers, len(cap.stacks[stack].query_tokens))
        weights = layers if isinstance(layers, np.ndarray) else _layers(layers, length)
        close(f"{stack} weights", cap.stacks[stack].attentions, weights)
    return Cell(NA, "; ".join(notes)) if notes and len(notes) == len(expected) else Cell(Y, "; ".join(notes))


def _token_by_token(cap, stack: str, layers, queries: int) -> list:
    """The model's own layers (those without attention, None, left out) whose maps have a row per token: a layer
    that pools its queries (Funnel's blocks after the first: fewer rows than tokens) is left out, and the capture
    must leave out the same layers, keep the model's own numbers for the others, and name the left-out ones."""
    present = [layer for layer in layers if layer is not None]
    pooled = [
        number
        for number, layer in enumerate(present)
        if isinstance(layer, torch.Tensor) and layer.dim() == 4 and layer.shape[-2] < queries
    ]
    if not pooled:
        return layers
    kept = [number for number in range(len(present)) if number not in pooled]
    numbers = [cap.stacks[stack].layer_number(layer) for layer in range(cap.stacks[stack].num_layers)]
    if numbers != kept:
        raise Mismatch(f"{stack} layers numbered {numbers}, the model's own token-by-token layers {kept}")
    named = f"{', '.join(map(str, pooled))} of the {stack} attention"
    if not any(named in note and "left out" in note for note in cap.notes):
        raise Mismatch(f"pooled {stack} layers {pooled} left out with no note naming them")
    return [present[number] for number in kept]


def _encoder_layers(subject: Subject, layers, length: int):
    """The encoder's own layers, its local blocks placed at their keys: LongT5's cut to the input, Pegasus-X's
    global-local dicts as their text rows."""
    if layers and isinstance(layers[0], dict):
        return _global_local_text_rows(subject, layers, length)
    return _layers(layers, length)


def _global_local_text_rows(subject: Subject, layers, length: int) -> np.ndarray:
    """[layer, head, query, key]: Pegasus-X's encoder layers' local weights [batch, head, block, block_len, global +
    block_len], each text token's weights on its block's tokens put at their keys, one by one. The text is padded
    at its end to whole blocks; a layer the model staggers (its own ``stagger_blocks_this_layer``) pads block_len // 2
    more in front. Weights on padding must be exactly 0 (nothing of the text is dropped)."""
    found = []
    for module, layer in zip(subject.reference.get_encoder().layers, layers, strict=True):
        local = layer["local"][0]  # [head, block, block_len, global + block_len]
        heads, _, size, width = local.shape
        front = size // 2 if module.stagger_blocks_this_layer else 0
        full = torch.zeros(heads, length, length, dtype=local.dtype)
        for query in range(length):
            block, row = divmod(query + front, size)
            for column in range(size):
                key, weights = block * size + column - front, local[:, block, row, width - size + column]
                if 0 <= key < length:
                    full[:, query, key] = weights
                elif weights.any():
                    raise Mismatch(f"query {query} puts weight on a padding position of its block")
        found.append(full)
    return torch.stack(found).float().numpy()


def _returning_attentions(subject: Subject) -> Subject:
    """``subject`` with a reference model that returns its own attentions. One whose forward switched its attention
    type (BigBird on a short text: block-sparse to full attention, its attention modules replaced by new ones, which
    transformers' output capture, installed on the first call, never reads) is built afresh with the type it runs,
    after checking that this computes the logits a fresh model of the family's own config computes on the prompt."""
    running = getattr(subject.reference.base_model, "attention_type", None)
    if running is None or running == getattr(subject.reference.config, "attention_type", None):
        return subject
    as_it_runs, fresh = build(subject.model_type, attention_type=running)[0], build(subject.model_type)[0]
    ids = subject.ids(PROMPT)
    with torch.inference_mode(), reference_runs("own forward pass"):
        ours, theirs = as_it_runs(input_ids=ids).logits, fresh(input_ids=ids).logits
    close(f"logits with attention_type={running!r}, against the family's own config", ours, theirs)
    return replace(subject, reference=as_it_runs)


def _main_stream(out):
    """The model's own cross attentions, for its decoder's positions: ProphetNet's decoder runs its n-gram streams
    (``decoder_ngram_attentions``) in the rows after its main stream's, whose rows its self-attention has."""
    if getattr(out, "decoder_ngram_attentions", None) is None:
        return out.cross_attentions
    pairs = zip(out.cross_attentions, out.decoder_attentions, strict=True)
    return [cross[..., : own.shape[-2], :] for cross, own in pairs]


def _softmax_layers(subject: Subject, layers):
    """The model's own per-layer attentions, with what its linear-attention layers return left out (None): MiniMax's
    lightning layers return their running state [batch, head, head_dim, head_dim], not weights over the tokens."""
    layer_types = getattr(subject.reference.config, "layer_types", None)
    if not layers or not layer_types or len(layer_types) != len(layers):
        return layers
    return [None if kind == "linear_attention" else layer for kind, layer in zip(layer_types, layers, strict=True)]


def check_verify(subject: Subject) -> Cell:
    """``verify()``: the weights recomputed from the captured queries and keys, within its tolerance."""
    cap = _capture(subject)
    if any(stack.queries is None for stack in cap.stacks.values()):
        return Cell(NA, " ".join(cap.notes) or "no queries and keys")
    error = cap.verify()
    if not error <= cap.tolerance:
        raise Mismatch(f"verify() = {error:.2g} (tolerance {cap.tolerance:g})")
    return Cell(Y)


# -- decoding ----------------------------------------------------------------------------------------------------

DECODING = {
    "greedy": dict(strategy="greedy", max_new_tokens=NEW_TOKENS),
    "beam": dict(strategy="beam", num_beams=2, max_new_tokens=NEW_TOKENS, num_return_sequences=2),
    "sample": dict(strategy="sample", max_new_tokens=NEW_TOKENS, temperature=0.8, top_k=10, seed=7),
}


def _generate(subject: Subject, case: dict, *, logits: bool = False):
    from tests.test_decoding import reference_config

    config = reference_config(subject.lm, case)
    config.output_logits = logits
    try:
        return _generate_with(subject, case, config)
    except ReferenceFailure as failure:
        if "get_seq_length" not in str(failure):
            raise
    # transformers cannot count the tokens in this model's cache (its layers are all linear-attention or state-space
    # ones): generate() decodes it only without a cache
    config.use_cache = False
    return _generate_with(subject, case, config)


def _generate_with(subject: Subject, case: dict, config):
    if case["strategy"] == "sample":
        torch.manual_seed(case["seed"])
    with torch.inference_mode(), reference_runs("generate()"):
        return subject.reference.generate(subject.ids(PROMPT), generation_config=config)


def check_decoding(strategy: str):
    def check(subject: Subject) -> Cell:
        """``decode()`` equals ``generate()`` with the same settings (and seed)."""
        import explorer
        from tests.test_decoding import assert_same_as_generate, fill_tokens

        if cell := _only_encoder_decoder_decoders(subject):
            return cell
        case = DECODING[strategy]
        trace = explorer.decode(subject.lm, PROMPT, **case)
        reference = _generate(subject, case)
        try:
            assert_same_as_generate(trace, reference, fill_tokens(subject.lm))
        except AssertionError as error:  # said the same with or without pytest's assertion rewriting
            ours, theirs = [list(map(int, s)) for s in trace.sequences], reference.sequences.tolist()
            raise Mismatch(f"differs from generate(): {ours} against {theirs}") from error
        return Cell(Y)

    check.__name__ = f"check_{strategy}"
    return check


def check_next_token(subject: Subject) -> Cell:
    """The next-token distribution: generate()'s first logits, and those through transformers' own warpers."""
    import explorer
    from tests.test_distribution import transformers_final

    if cell := _only_encoder_decoder_decoders(subject):
        return cell
    settings = dict(temperature=0.7, top_k=10, top_p=0.9, min_p=0.0)
    dist = explorer.next_token_distribution(subject.lm, PROMPT, **settings)
    logits = _first_generated_logits(subject)
    close("logits", dist.logits, logits, 1e-4)
    close("final distribution", dist.final, transformers_final(logits, **settings))
    return Cell(Y)


def _first_generated_logits(subject: Subject) -> np.ndarray:
    """generate()'s own raw logits for the first token it writes after the prompt (before any processor): the
    first pass as generate() prepares it (XLNet's appends the token to predict, hidden by its permutation mask)."""
    try:
        output = _generate(subject, {"strategy": "greedy", "max_new_tokens": 1}, logits=True)
    except ReferenceFailure:  # generate() itself fails on this family (CPM-Ant): its plain forward pass instead
        decoder_ids = subject.start() if subject.kind == ENCODER_DECODER else None
        return subject.run(subject.ids(PROMPT), decoder_ids).logits[0, -1].float().numpy()
    return output.logits[0][0].float().numpy()


def check_record_attention(subject: Subject) -> Cell:
    """``decode(record_attention=True)`` past the window equals one eager pass over what it generated."""
    import explorer

    if cell := _only_encoder_decoder_decoders(subject):
        return cell
    trace = explorer.decode(subject.lm, PROMPT, strategy="greedy", max_new_tokens=NEW_TOKENS, record_attention=True)
    fed = torch.as_tensor(trace.sequences[0][:-1])[None]  # the last token is never fed back
    if subject.kind == ENCODER_DECODER:
        prompt = torch.as_tensor(trace.prompt_ids)[None]
        out = subject.run(prompt, fed, output_attentions=True, use_cache=False)
        expected = {"decoder": out.decoder_attentions, "cross": _main_stream(out), "encoder": None}
        if "encoder" in (trace.attention or {}):  # laid out by the capture's reference (LongT5's, Pegasus-X's blocks)
            expected["encoder"] = _encoder_layers(subject, out.encoder_attentions, prompt.shape[1])
    else:
        own = subject.run(fed, output_attentions=True, use_cache=False).attentions
        expected = {"decoder": _softmax_layers(subject, own)}
    recorded = trace.attention or {}
    if not set(expected) <= set(recorded):
        if not trace.notes:
            raise Mismatch(f"no {' or '.join(set(expected) - set(recorded))} attention recorded, and no note why")
        if set(expected) - set(recorded) != {"encoder"}:
            return Cell(NA, " ".join(trace.notes))
        del expected["encoder"]  # left out, and a note says why: the decoder's stacks are still checked
        note = f"encoder: {' '.join(trace.notes)}"
    else:
        note = ""
    for stack, layers in expected.items():
        weights = layers if isinstance(layers, np.ndarray) else _layers(layers)
        close(f"{stack} weights", recorded[stack].attentions, weights)
    return Cell(Y, note)


def check_kv_cache(subject: Subject) -> Cell:
    """The KV cache view picks each pass's argmax of the model's own logits (whole prefix, no cache), with and
    without the cache alike."""
    import explorer

    if cell := _only_encoder_decoder_decoders(subject):
        return cell
    trace = explorer.kv_cache(subject.lm, PROMPT, steps=NEW_TOKENS - 1)
    ids, chosen, whole = subject.ids(PROMPT), [], []
    decoder_ids = subject.start() if subject.kind == ENCODER_DECODER else None
    for _ in range(NEW_TOKENS):
        whole.append(subject.run(ids, decoder_ids).logits[:, -1:])
        token = whole[-1].argmax(-1)
        chosen.append(int(token))
        if decoder_ids is None:
            ids = torch.cat([ids, token], dim=1)
        else:
            decoder_ids = torch.cat([decoder_ids, token], dim=1)
    if trace.chosen_ids.tolist() != chosen:
        raise Mismatch(f"chose {trace.chosen_ids.tolist()}, the model's own argmax {chosen}")
    largest = float(np.max(trace.logit_difference))
    if largest <= trace.tolerance:
        return Cell(Y)
    # More than rounding: the model's own passes with its cache must differ from its whole-prefix passes as much
    # (plain transformers), and the page must say so.
    own = [float((a[0, -1] - b).abs().max()) for a, b in zip(whole, _cached_logits(subject, chosen), strict=True)]
    close("the difference of the logits with and without the cache", trace.logit_difference, own)
    if f"{largest:.1e}" not in " ".join(trace.notes):
        raise Mismatch(f"logits with and without the cache differ by {largest:.2g}, and no note says so")
    return Cell(Y, f"the model's own logits with and without its cache differ by {largest:.2g}: the page says so")


def _cached_logits(subject: Subject, chosen: list[int]) -> list[torch.Tensor]:
    """The model's last logits at each pass of greedy search with its own cache, fed one token a step (plain
    transformers)."""
    seq2seq = subject.kind == ENCODER_DECODER
    fed = "decoder_input_ids" if seq2seq else "input_ids"
    with torch.inference_mode(), reference_runs("forward pass with its cache"):
        inputs = {fed: subject.start() if seq2seq else subject.ids(PROMPT)}
        if seq2seq:
            inputs["encoder_outputs"] = subject.reference.get_encoder()(input_ids=subject.ids(PROMPT), return_dict=True)
        out = subject.reference(**inputs, use_cache=True)
        found = [out.logits[0, -1]]
        for token in chosen[:-1]:
            step = inputs | {fed: torch.tensor([[token]])}
            out = subject.reference(**step, past_key_values=out.past_key_values, use_cache=True)
            found.append(out.logits[0, -1])
    return found


# -- the model's own modules: its layers, found by the order its forward calls them ------------------------------


def _layer_lists(subject: Subject, ids, decoder_ids) -> list[list]:
    """Each ``ModuleList`` the forward calls, as [[module, first start, last end, calls]] of its elements."""
    clock, seen, handles = iter(range(1, 1 << 30)), {}, []

    def watch(record):
        def before(module, args):
            record[1] = record[1] or next(clock)
            record[3] += 1

        def after(module, args, output):
            record[2] = next(clock)

        return before, after

    lists = [m for m in subject.reference.modules() if isinstance(m, torch.nn.ModuleList)]
    for element in (element for module_list in lists for element in module_list):
        if id(element) not in seen:
            seen[id(element)] = [element, None, None, 0]
            before, after = watch(seen[id(element)])
            handles += [element.register_forward_pre_hook(before), element.register_forward_hook(after)]
    try:
        subject.run(ids, decoder_ids)
    finally:
        for handle in handles:
            handle.remove()
    called = ([seen[id(e)] for e in module_list if seen[id(e)][3]] for module_list in lists)
    return [records for records in called if records]


def layer_calls(subject: Subject, ids, decoder_ids, layers: int, last: bool) -> list:
    """The modules that run the ``layers`` layers of the stack that runs last (the decoder's) or first (the
    encoder's), in order; a shared layer (ALBERT) appears once per call."""
    stacks = [called for called in _layer_lists(subject, ids, decoder_ids) if sum(c[3] for c in called) == layers]
    if not stacks:
        raise ReferenceFailure(f"the reference finds no module list that runs the {layers} layers")
    chosen = max(stacks, key=lambda c: c[-1][2]) if last else min(stacks, key=lambda c: c[0][1])
    return [record[0] for record in chosen for _ in range(record[3])]


# A layer's output as the model returns it: the hidden states alone, or a tuple, or (OpenAI-GPT's Block) a list,
# whose first item they are
def _hidden(output):
    return output[0] if isinstance(output, tuple | list) else output


def _with_hidden(output, hidden):
    if isinstance(output, tuple | list):
        return type(output)((hidden, *output[1:]))
    return hidden


def _replace_last_call(module, calls: int, make):
    """A forward hook that replaces ``module``'s hidden output (``make(hidden)``) on its ``calls``-th call."""
    count = [0]

    def hook(module, args, output):
        count[0] += 1
        return _with_hidden(output, make(_hidden(output))) if count[0] == calls else output

    return module.register_forward_hook(hook)


# -- the logit lens ----------------------------------------------------------------------------------------------


def lens_reference(subject: Subject, ids, decoder_ids) -> np.ndarray:
    """[layer + 1, position, vocab] log-probabilities: each layer's residual stream put in place of the last
    layer's output, so that the model's own final norm, scaling, head and softcapping read it."""
    if first_pass(subject, ids)[1]:
        return _lens_reference_of_streams(subject, ids)
    out = subject.run(ids, decoder_ids, output_hidden_states=True)
    states = out.decoder_hidden_states if subject.kind == ENCODER_DECODER else out.hidden_states
    modules = layer_calls(subject, ids, decoder_ids, len(states) - 1, last=True)
    last, calls = modules[-1], modules.count(modules[-1])
    readings = []
    for state in _layer_inputs(subject, ids, decoder_ids, modules, states):
        handle = _replace_last_call(last, calls, lambda hidden, state=state: _put_rows(hidden, state))
        try:
            readings.append(subject.run(ids, decoder_ids).logits[0])
        finally:
            handle.remove()
    readings.append(out.logits[0])
    return torch.log_softmax(torch.stack(readings).float(), dim=-1).numpy()


def first_pass(subject: Subject, ids: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """(ids, further inputs) of the pass that predicts the token after ``ids``: for a decoder whose own
    ``prepare_inputs_for_generation`` (what generate() runs first) reads positions after the text, the ids it
    prepares and the tensors it adds (XLNet: the appended token, its permutation mask and target mapping); else
    ``ids`` and nothing."""
    if subject.kind != DECODER:
        return ids, {}
    prepared = subject.reference.prepare_inputs_for_generation(
        ids, is_first_iteration=True, attention_mask=torch.ones_like(ids), use_cache=False
    )
    if prepared["input_ids"].shape[-1] == ids.shape[-1]:
        return ids, {}
    extra = {name: value for name, value in prepared.items() if isinstance(value, torch.Tensor)}
    return extra.pop("input_ids"), extra


def _stream_the_head_reads(subject: Subject, ids, extra: dict, last: torch.nn.Module) -> int:
    """Which item of the last layer's output the head reads (XLNet: its query stream, item 1), by value: the
    item equal to the head's input, time-first or not."""
    seen = {}
    handles = [
        last.register_forward_hook(lambda module, args, output: seen.setdefault("out", output)),
        subject.reference.get_output_embeddings().register_forward_pre_hook(
            lambda module, args: seen.setdefault("head", args[0])
        ),
    ]
    try:
        subject.run(ids, **extra)
    finally:
        for handle in handles:
            handle.remove()
    head = seen["head"]
    for index, item in enumerate(seen["out"]):
        layouts = (item, item.transpose(0, 1)) if isinstance(item, torch.Tensor) and item.dim() == 3 else ()
        if any(t.shape == head.shape and torch.equal(t, head) for t in layouts):
            return index
    raise ReferenceFailure("the head reads none of the last layer's outputs as it returns it")


def _lens_reference_of_streams(subject: Subject, text_ids) -> np.ndarray:
    """The lens's reference where the first pass reads after the text (XLNet): the stream the head reads (its
    query stream at the target) at each layer's input, from forward pre-hooks on the model's own layers, put in
    place of that item of the last layer's output, and the model's own logits of that first pass."""
    ids, extra = first_pass(subject, text_ids)
    plain = subject.run(text_ids, output_hidden_states=True).hidden_states
    modules = layer_calls(subject, text_ids, None, len(plain) - 1, last=True)
    stream = _stream_the_head_reads(subject, ids, extra, modules[-1])
    seen, handles = [], []
    for module in dict.fromkeys(modules):
        handles.append(module.register_forward_pre_hook(lambda m, args: seen.append(args[stream].clone())))
    try:
        own = subject.run(ids, **extra).logits[0]
    finally:
        for handle in handles:
            handle.remove()
    readings = []
    for state in seen[: len(modules)]:
        replace = _replace_item(modules[-1], stream, state)
        try:
            readings.append(subject.run(ids, **extra).logits[0])
        finally:
            replace.remove()
    readings.append(own)
    return torch.log_softmax(torch.stack(readings).float(), dim=-1).numpy()


def _replace_item(module, index: int, state: torch.Tensor):
    """A forward hook putting ``state`` in place of item ``index`` of ``module``'s output tuple."""

    def hook(module, args, output):
        return (*output[:index], state, *output[index + 1 :])

    return module.register_forward_hook(hook)


def _layer_inputs(subject: Subject, ids, decoder_ids, modules: list, states) -> list[torch.Tensor]:
    """The residual stream at each layer's input: the hidden states the model reports, or, where those are not
    what its layers read (Mamba reports each layer's output, from the first on), what forward pre-hooks on the
    layers see (their first ``len(modules)`` calls, in order)."""
    seen, handles = [], []
    for module in dict.fromkeys(modules):
        handles.append(module.register_forward_pre_hook(_keep_first_input(seen), with_kwargs=True))
    try:
        subject.run(ids, decoder_ids)
    finally:
        for handle in handles:
            handle.remove()
    read = seen[: len(modules)]
    reported = states[:-1]
    if all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(read, reported, strict=True)):
        return list(reported)
    # What the layers read, whole, in the layout they read it: Longformer's positions padded to a window multiple,
    # ProphetNet's predicting streams after its main stream (it reports the main stream only), XLNet's time-first
    return read


def _keep_first_input(seen: list):
    def hook(module, args, kwargs):
        seen.append((args[0] if args else kwargs["hidden_states"]).clone())

    return hook


def _put_rows(hidden: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """``state`` in place of ``hidden``; where the layer ran on the positions padded to a window multiple at the
    end (Longformer), in its first rows, the padding kept."""
    if hidden.shape == state.shape:
        return state.to(hidden.dtype)
    hidden = hidden.clone()
    hidden[:, : state.shape[1]] = state.to(hidden.dtype)
    return hidden


def check_lens(subject: Subject) -> Cell:
    """The logit lens: every layer read through the model's own final norm and head (scales included)."""
    import explorer

    text = MASKED[0] if subject.kind == ENCODER else PROMPT
    target = TARGET if subject.kind == ENCODER_DECODER else None
    lens = explorer.logit_lens(subject.lm, text, top_n=3, target=target)
    decoder_ids = subject.teacher_ids() if subject.kind == ENCODER_DECODER else None
    expected = lens_reference(subject, subject.ids(text), decoder_ids)
    close("top log-probabilities", lens.top_logprobs, -np.sort(-expected, axis=-1)[..., :3], 1e-4)
    close(
        "final token's log-probability",
        lens.final_logprobs,
        np.take_along_axis(expected, np.asarray(lens.final_ids)[None, :, None].repeat(len(expected), 0), axis=-1)[
            ..., 0
        ],
        1e-4,
    )
    if np.asarray(lens.final_ids).tolist() != expected[-1].argmax(-1).tolist():
        raise Mismatch("the last layer's top tokens are not the model's own")
    return Cell(Y)


# -- attribution -------------------------------------------------------------------------------------------------


def check_attribution(subject: Subject) -> Cell:
    """Integrated gradients: its log-probabilities are the model's, and its scores add up to their change."""
    import explorer

    prompt = MASKED[0] if subject.kind == ENCODER else PROMPT
    result = explorer.attribute(subject.lm, prompt, steps=subject.lm.integrated_gradients_steps)  # the page's
    encoded = subject.tokenizer(prompt, return_tensors="pt")
    position = _metric_position(subject, encoded["input_ids"])
    decoder_ids = subject.start() if subject.kind == ENCODER_DECODER else None
    ids, extra = first_pass(subject, encoded["input_ids"])  # XLNet: the pass generate() runs first
    logits = subject.run(ids, decoder_ids, **extra).logits[0, position]
    close("log p(target)", result.logprob, torch.log_softmax(logits.float(), -1)[result.target_id], 1e-4)
    delta = float(result.scores.sum()) - result.change
    if abs(delta) <= 0.01 * abs(result.change) + 1e-6:
        return Cell(Y)
    if subject.kind != DECODER or not _jumps_said(subject, result):
        raise Mismatch(f"completeness error {delta:+.2g} ({abs(delta) / max(abs(result.change), 1e-12):.0%})")
    return _against_the_integral(subject, result, prompt)


GRADIENT_POINTS = 4096  # the reference integral's midpoints


def _jumps_said(subject: Subject, result) -> bool:
    """Whether the page's check line says log p jumps along the path, so that no number of steps closes the gap."""
    from explorer.views.attribution import Scores

    return "more steps do not close this gap" in Scores(subject.lm.name, PROMPT).caption(result)


def _against_the_integral(subject: Subject, result, prompt: str) -> Cell:
    """Where log p jumps along the path (experts switching), no scores add up to the change: they must equal the
    path integral of the gradient (autograd on the plain model at 4,096 midpoints), and that integral must miss
    the change by over 1% too, as the page's check line says (steps do not close it)."""
    embeddings = subject.reference.get_input_embeddings()(subject.ids(prompt)).detach().float()
    integral = torch.zeros(embeddings.shape[1], dtype=torch.float64)
    with torch.enable_grad():
        for alphas in np.array_split((np.arange(GRADIENT_POINTS) + 0.5) / GRADIENT_POINTS, GRADIENT_POINTS // 64):
            points = (torch.tensor(alphas, dtype=torch.float32).view(-1, 1, 1) * embeddings).requires_grad_()
            logits = subject.reference(inputs_embeds=points, use_cache=False).logits[:, -1].float()
            chosen = torch.log_softmax(logits, dim=-1)[:, result.target_id]
            (gradients,) = torch.autograd.grad(chosen.sum(), points)
            integral += (gradients * embeddings).sum(-1).sum(0).double() / GRADIENT_POINTS
    bound = 0.01 * abs(result.change)
    close("scores against the integral of the gradient", result.scores, integral.numpy(), bound)
    missed = float(integral.sum()) - result.change
    if abs(missed) <= bound:
        raise Mismatch(f"the integral of the gradient misses the change by {missed:+.2g} only: steps would close it")
    return Cell(
        Y,
        f"log p jumps along the path where experts switch: the scores equal the integral of the gradient, which "
        f"misses the change by {missed / abs(result.change):+.1%}, and the page says steps do not close it",
    )


def _metric_position(subject: Subject, ids: torch.Tensor) -> int:
    if subject.kind == ENCODER:
        return int((ids[0] == subject.tokenizer.mask_token_id).nonzero()[0, 0])
    return -1


# -- activation patching and head ablation, by plain forward hooks ----------------------------------------------

# Where a layer's MLP output and the input of its attention's output projection are, as paths inside a layer:
# the reference's own sites (test code), tried in order.
MLP_SITES = (
    "mlp",
    "feed_forward",
    "ffn",
    "block_sparse_moe",
    "output.dense",
    "layer.1.DenseReluDense",
    "fc2",
    "ff.layer_2",
)
PROJECTION_SITES = (
    *(
        f"{attention}.{projection}"
        for attention in (
            "self_attn",
            "attn",
            "attention",
            "self_attention",
            "attention.output",
            "layer.0.SelfAttention",
        )
        for projection in ("o_proj", "out_proj", "c_proj", "dense", "o", "out_lin", "wo")
    ),
    "self_attn.output",  # LED's encoder: a Longformer self-attention beside its output projection
)


def _site(layer: torch.nn.Module, paths) -> torch.nn.Module | None:
    """The first of ``paths`` in ``layer``; None where there is none, or where the module adds the residual
    stream itself (BLOOM's MLP takes it as an argument): its output is then not the MLP's alone."""
    modules = {name: m for name, m in layer.named_modules() if not isinstance(m, torch.nn.ModuleList)}  # callables
    path = next((path for path in paths if path in modules), None)
    if path is None or "residual" in inspect.signature(modules[path].forward).parameters:
        return None
    parent = path.rpartition(".")[0]
    if any(name.startswith(parent) and name.endswith("sub_norm") for name in modules):
        return None  # a norm over all heads before the projection (BitNet): its input is not the heads' outputs
    return modules[path]


class Patcher:
    """The reference: one plain run per patched cell, hooks on the reference model's own modules."""

    def __init__(self, subject: Subject, layers: list):
        self.subject, self.layers = subject, layers
        # MobileBERT runs several feed-forward networks per layer (a ModuleList "ffn"): which output is the MLP's
        # is a choice, so its MLP cells are left to the residual stream's check
        several = [isinstance(getattr(layer, "ffn", None), torch.nn.ModuleList) for layer in layers]
        self.mlps = [None if many else _site(layer, MLP_SITES) for layer, many in zip(layers, several, strict=True)]
        self.projections = [_site(layer, PROJECTION_SITES) for layer in layers]

    def logits(self, ids) -> torch.Tensor:
        decoder_ids = self.subject.start() if self.subject.kind == ENCODER_DECODER else None
        return self.subject.run(ids, decoder_ids).logits[0, _metric_position(self.subject, ids)].float()

    def call(self, layer: int, every: bool = False) -> int | None:
        """Which call of its module in a run is ``layer``'s: the k-th where one module runs several layers
        (ALBERT's), else the first (Pegasus-X's encoder runs its MLP on the positions, then on its global tokens);
        None, every call, where asked (zeroing a head: ProphetNet's output projection runs once for the main
        stream and once for the predicting streams) and the module runs this layer alone."""
        if every and self.layers.count(self.layers[layer]) == 1:
            return None
        return self.layers[: layer + 1].count(self.layers[layer])

    def record(self, ids) -> dict:
        found, handles = {}, []
        for index, layer in enumerate(self.layers):
            nth = self.call(index)
            handles.append(
                layer.register_forward_pre_hook(_on_call(nth, _keeper(found, ("in", index))), with_kwargs=True)
            )
            if self.mlps[index] is not None:
                hook = _on_call(nth, _output_keeper(found, ("mlp", index)))
                handles.append(self.mlps[index].register_forward_hook(hook))
            if self.projections[index] is not None:
                keeper = _on_call(self.call(index, every=True), _input_keeper(found, index))
                handles.append(self.projections[index].register_forward_pre_hook(keeper))
        last = _on_call(self.call(len(self.layers) - 1), _output_keeper(found, ("in", len(self.layers))))
        handles.append(self.layers[-1].register_forward_hook(last))
        try:
            self.logits(ids)
        finally:
            for handle in handles:
                handle.remove()
        return found

    def patched(self, ids, handle) -> torch.Tensor:
        try:
            return self.logits(ids)
        finally:
            handle.remove()

    def residual(self, ids, clean, layer: int, position: int):
        def replace(hidden):
            hidden = hidden.clone()
            # one row runs: its positions are on the other axis (XLNet's layers see [position, row, hidden])
            index = (0, position) if hidden.shape[0] == 1 else (position, 0)
            hidden[index] = clean["in", layer][index]
            return hidden

        if layer == len(self.layers):
            last = _on_call(self.call(layer - 1), lambda m, a, o: _with_hidden(o, replace(_hidden(o))))
            return self.layers[-1].register_forward_hook(last)

        def layer_input(module, args, kwargs):
            if args:
                return (replace(args[0]), *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": replace(kwargs["hidden_states"])}

        return self.layers[layer].register_forward_pre_hook(_on_call(self.call(layer), layer_input), with_kwargs=True)

    def mlp(self, clean, layer: int):
        hook = _on_call(self.call(layer), lambda m, a, o: _with_hidden(o, clean["mlp", layer]))
        return self.mlps[layer].register_forward_hook(hook)

    def head(self, clean, layer: int, head: int, heads: int, value=None):
        """The head's slice of its output projection's input zeroed, or, with ``value`` (the clean run's inputs,
        one per call), replaced call by call: where a layer runs its projection more than once (Pegasus-X's encoder,
        on its global tokens, then on the text's), its k-th call by the clean run's k-th."""
        values = iter(value or ())

        def hook(module, args):
            patched = args[0].clone()
            width = patched.shape[-1] // heads
            cut = slice(head * width, (head + 1) * width)
            patched[..., cut] = 0.0 if value is None else next(values)[..., cut]
            return (patched, *args[1:])

        return self.projections[layer].register_forward_pre_hook(_on_call(self.call(layer, every=True), hook))


class StreamsPatcher(Patcher):
    """The reference where the pass that predicts reads after the text (XLNet): that pass, as the model's own
    ``prepare_inputs_for_generation`` prepares it; each layer's streams (the arguments it returns updated in the same
    place and shape: XLNet's content stream and query stream) recorded and patched by hooks on the model's own
    layers, a column being the text's positions in the first stream, then each row of the others; an MLP patched
    in every call its layer makes of it (one per stream)."""

    def logits(self, ids) -> torch.Tensor:
        ids, extra = first_pass(self.subject, ids)
        return self.subject.run(ids, **extra).logits[0, -1].float()

    def record(self, ids) -> dict:
        found, handles = {}, []
        for index, layer in enumerate(self.layers):
            handles.append(layer.register_forward_hook(_streams_keeper(found, index, len(self.layers))))
            if self.mlps[index] is not None:
                handles.append(self.mlps[index].register_forward_hook(_calls_keeper(found, ("mlp", index))))
        try:
            self.logits(ids)
        finally:
            for handle in handles:
                handle.remove()
        self.columns = [(0, p) for p in range(ids.shape[1])]
        self.columns += [(k, row) for k, stream in enumerate(found["in", 0][1:], 1) for row in range(len(stream))]
        return found

    def residual(self, ids, clean, layer: int, column: int):
        stream, position = self.columns[column]

        def replace(hidden):
            hidden = hidden.clone()
            index = (0, position) if hidden.shape[0] == 1 else (position, 0)  # XLNet's: time-first
            hidden[index] = clean["in", layer][stream][index]
            return hidden

        if layer == len(self.layers):
            return self.layers[-1].register_forward_hook(
                lambda m, a, output: (*output[:stream], replace(output[stream]), *output[stream + 1 :])
            )
        return self.layers[layer].register_forward_pre_hook(
            lambda m, args: (*args[:stream], replace(args[stream]), *args[stream + 1 :])
        )

    def mlp(self, clean, layer: int):
        calls = iter(clean["mlp", layer])
        return self.mlps[layer].register_forward_hook(lambda m, a, o: next(calls))


def _streams_keeper(found, index: int, layers: int):
    """Each stream the layer reads (its arguments it returns updated, same shape, in the same place), and after
    the last layer each stream it returns."""

    def hook(module, args, output):
        count = 0
        while count < min(len(args), len(output)) and _same_shape(args[count], output[count]):
            count += 1
        found["in", index] = [args[k].clone() for k in range(count)]
        if index == layers - 1:
            found["in", layers] = [output[k].clone() for k in range(count)]

    return hook


def _same_shape(a, b) -> bool:
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.is_floating_point() and a.shape == b.shape


def _calls_keeper(found, key):
    def hook(module, args, output):
        found.setdefault(key, []).append(_hidden(output).clone())

    return hook


def _on_call(nth: int | None, hook):
    """``hook`` acting on its module's ``nth`` call of the run only: a module that runs several layers (ALBERT's
    shared layer) is layer k on its k-th call; on every call for None."""
    if nth is None:
        return hook
    calls = [0]

    def counted(module, *rest):
        calls[0] += 1
        return hook(module, *rest) if calls[0] == nth else None

    return counted


def _keeper(found, key):
    def hook(module, args, kwargs):
        found.setdefault(key, (args[0] if args else kwargs["hidden_states"]).clone())  # a shared layer: its first call

    return hook


def _output_keeper(found, key):
    def hook(module, args, output):
        found[key] = _hidden(output).clone()

    return hook


def _input_keeper(found, index):
    """Each call's input, in order (a layer that runs its projection more than once: Pegasus-X's encoder)."""

    def hook(module, args):
        found.setdefault(("heads", index), []).append(args[0].clone())

    return hook


def check_patching(subject: Subject) -> Cell:
    """Activation patching: each recovered fraction equals one plain run with that cell patched by hand."""
    clean_ids = subject.ids(MASKED[0] if subject.kind == ENCODER else PROMPT)
    layers = layer_calls(
        subject,
        clean_ids,
        subject.start() if subject.kind == ENCODER_DECODER else None,
        _stack_layers(subject),
        last=subject.kind != ENCODER_DECODER,
    )
    patcher = StreamsPatcher if first_pass(subject, clean_ids)[1] else Patcher
    return compare_patching(subject, patcher(subject, layers))


def _patching_prompts(subject: Subject, patcher: Patcher) -> tuple[str, str, str]:
    """(clean, corrupted, note): the matrix's pair, or, where the changed word cannot reach the predicting position
    (chunked attention: the last position reads only its own chunk of 4), one changed inside that window, as a user
    would, so that there is a difference to recover."""
    if subject.kind == ENCODER:
        return (*MASKED, "")
    if bool((patcher.logits(subject.ids(PROMPT)) != patcher.logits(subject.ids(CORRUPTED))).any()):
        return PROMPT, CORRUPTED, ""
    note = f"the pair {PROMPT!r} / {CORRUPTED!r} predicts the same, so {CORRUPTED_LATE!r}: a change in the last chunk"
    return PROMPT, CORRUPTED_LATE, note


def compare_patching(subject: Subject, patcher: Patcher) -> Cell:
    """Every recovered fraction of ``explorer.patch`` against ``patcher``'s plain runs, one per cell."""
    import explorer

    clean_text, corrupted_text, note = _patching_prompts(subject, patcher)
    clean_ids, corrupted_ids = subject.ids(clean_text), subject.ids(corrupted_text)
    layers = patcher.layers
    moved = patcher.logits(clean_ids) - patcher.logits(corrupted_ids)
    answer, counterfactual = int(moved.argmax()), int(moved.argmin())
    result = explorer.patch(subject.lm, clean_text, corrupted_text, answer=answer, counterfactual=counterfactual)

    def ld(logits):
        return float(logits[answer] - logits[counterfactual])

    clean, corrupted = patcher.record(clean_ids), ld(patcher.logits(corrupted_ids))
    change = result.ld_clean - result.ld_corrupted
    # Compared as logit differences (a fraction of a tiny change is rounding): within 0.1% of the change, so that a
    # fraction off by 0.001 fails however small the tiny model's change is.
    atol = 1e-6 + 1e-3 * abs(change)
    close("logit differences", [result.ld_clean, result.ld_corrupted], [ld(patcher.logits(clean_ids)), corrupted])
    columns = len(getattr(patcher, "columns", range(clean_ids.shape[1])))  # XLNet's: the text, then where it predicts
    if result.residual.shape[1] != columns:
        raise Mismatch(f"{result.residual.shape[1]} columns of the residual stream, the reference {columns}")
    for layer in range(len(layers) + 1):
        for position in range(columns):
            handle = patcher.residual(corrupted_ids, clean, layer, position)
            expected = ld(patcher.patched(corrupted_ids, handle)) - corrupted
            close(f"residual [{layer}, {position}]", result.residual[layer, position] * change, expected, atol)
    unchecked, headless, without_mlp, refused = [], [], [], []
    for layer in range(len(layers)):
        if patcher.mlps[layer] is None:
            blank = bool(np.isnan(result.mlp[layer])) and bool(result.headless)  # Mamba's layer: a mixer, no MLP
            (without_mlp if blank else unchecked).append(layer if blank else "MLP")
        else:
            expected = ld(patcher.patched(corrupted_ids, patcher.mlp(clean, layer))) - corrupted
            close(f"MLP [{layer}]", result.mlp[layer] * change, expected, atol)
        if bool(np.isnan(result.heads[layer]).all()) and result.headless:
            # no head patched in this layer, and the page says why: it has no attention (a hybrid's Mamba layer), or
            # its heads are out of reach (said as a refusal: the reference's own site is named in the note)
            attends = patcher.projections[layer] is not None or _every_layer_attends(subject, clean_ids, len(layers))
            (refused if attends else headless).append(layer)
            continue
        if patcher.projections[layer] is None:
            unchecked.append("heads")
            continue
        heads = result.heads.shape[1]
        for head in range(heads):
            hook = patcher.head(clean, layer, head, heads, value=clean["heads", layer])
            expected = ld(patcher.patched(corrupted_ids, hook)) - corrupted
            close(f"head [{layer}, {head}]", result.heads[layer, head] * change, expected, atol)
    unchecked_note = f"reference checks the residual stream only, not {' or '.join(sorted(set(unchecked)))}"
    headless_note = f"no heads in layer {', '.join(map(str, headless))}: no attention there (its row is blank)"
    mlp_note = f"no MLP in layer {', '.join(map(str, without_mlp))}: its one branch is a state-space mixer (blank)"
    notes = (note, *(text for text, said in ((unchecked_note, unchecked), (headless_note, headless)) if said))
    notes += (mlp_note,) if without_mlp else ()
    notes += (f"heads refused in layer {', '.join(map(str, refused))}: {result.headless}",) if refused else ()
    return Cell(Y, "; ".join(part for part in notes if part))


def _every_layer_attends(subject: Subject, ids, layers: int) -> bool:
    """Whether the model returns one attention map per layer (XLNet, whose heads no projection module reads):
    blank heads there are refused, not a layer without attention (a hybrid's Mamba layer returns none)."""
    decoder_ids = subject.start() if subject.kind == ENCODER_DECODER else None
    out = subject.run(ids, decoder_ids, output_attentions=True)
    maps = getattr(out, "encoder_attentions" if subject.kind == ENCODER_DECODER else "attentions", None)  # Mamba: none
    return maps is not None and sum(isinstance(m, torch.Tensor) for m in maps) == layers


def _stack_layers(subject: Subject) -> int:
    return subject.lm.num_layers


# Attention modules that combine their heads with a weight of their own ([width, head, head_dim]) rather than an
# output projection module: the reference zeroes that weight's slice of the head in a copy of the model.
HEADS_COMBINED_BY = {"XLNetRelativeAttention": "o"}


def _combining_weight(layer: torch.nn.Module) -> tuple[torch.nn.Module, str] | None:
    """The attention module inside ``layer`` that combines its heads with a weight of its own, and that weight's
    name (``HEADS_COMBINED_BY``); None where there is none."""
    found = [(m, HEADS_COMBINED_BY[type(m).__name__]) for m in layer.modules() if type(m).__name__ in HEADS_COMBINED_BY]
    return found[0] if found else None


def _without_head(subject: Subject, ids, layer: torch.nn.Module, head: int) -> torch.Tensor:
    """[vocab] next-token log-probabilities of a copy of the reference model whose ``layer`` combines its heads
    without ``head`` (that head's slice of the combining weight set to 0), run on the pass that predicts."""
    attention, name = _combining_weight(layer)
    path = next(path for path, module in subject.reference.named_modules() if module is attention)
    model = copy.deepcopy(subject.reference)
    with torch.no_grad():
        getattr(model.get_submodule(path), name)[:, head] = 0.0
    ids, extra = first_pass(subject, ids)
    with torch.inference_mode(), reference_runs("own forward pass"):
        logits = model(input_ids=ids, use_cache=False, **extra).logits[0, -1]
    return torch.log_softmax(logits.float(), -1)


def check_ablation(subject: Subject) -> Cell:
    """Head ablation: each head zeroed at its output projection's input, one plain run per head."""
    import explorer

    if cell := _only_encoder_decoder_decoders(subject):
        return cell
    effects = explorer.head_ablation_effects(subject.lm, PROMPT)
    ids = subject.ids(PROMPT)
    decoder_ids = subject.start() if subject.kind == ENCODER_DECODER else None
    heads = effects.logprobs.shape[1]
    layers = _ablated_layers(subject, ids, decoder_ids, effects.logprobs.shape[0])
    patcher = (StreamsPatcher if first_pass(subject, ids)[1] else Patcher)(subject, layers)  # XLNet: its first pass
    plain = torch.log_softmax(patcher.logits(ids), -1)[effects.target_id]
    close("log p(target)", effects.baseline_logprob, plain, 1e-4)
    if any(projection is None for projection in patcher.projections):
        if not all(_combining_weight(layer) for layer in layers):
            return Cell(Y, "reference checks the unablated log-probability only")
        expected = [
            [_without_head(subject, ids, layer, head)[effects.target_id] for head in range(heads)] for layer in layers
        ]
        close("ablated log p(target)", effects.logprobs, np.array(expected, dtype=np.float64), 1e-4)
        return Cell(Y)
    expected = [
        [
            torch.log_softmax(patcher.patched(ids, patcher.head({}, layer, head, heads)), -1)[effects.target_id]
            for head in range(heads)
        ]
        for layer in range(len(layers))
    ]
    close("ablated log p(target)", effects.logprobs, np.array(expected, dtype=np.float64), 1e-4)
    return Cell(Y)


def _ablated_layers(subject: Subject, ids, decoder_ids, count: int) -> list:
    """The ``count`` layers whose heads head ablation numbers, in order: those of the module list that runs them,
    or, in a hybrid (Jamba's Mamba layers, Qwen3-Next's linear attention: no module list runs its attention layers
    alone), the layers of the whole stack that return an attention map."""
    try:
        return layer_calls(subject, ids, decoder_ids, count, last=True)
    except ReferenceFailure:
        every = layer_calls(subject, ids, decoder_ids, _stack_layers(subject), last=True)
    attending = _returning_maps(subject, ids, decoder_ids, every)
    if len(attending) != count:
        raise Mismatch(f"{count} layers of heads, the model returns attention maps from {len(attending)}")
    return attending


def _returning_maps(subject: Subject, ids, decoder_ids, layers: list) -> list:
    """Those of ``layers`` (a stack's, in order) that attend: a module inside them outputs one of the attention
    maps the model itself returns (``output_attentions``), the very tensor."""
    produced, handles = {}, []
    for layer in dict.fromkeys(layers):
        for module in layer.modules():
            keep = partial(_keep_outputs, produced.setdefault(id(layer), []))
            handles.append(module.register_forward_hook(keep))
    try:
        out = subject.run(ids, decoder_ids, output_attentions=True)
    finally:
        for handle in handles:
            handle.remove()
    maps = getattr(out, "decoder_attentions" if subject.kind == ENCODER_DECODER else "attentions", None) or ()
    return [layer for layer in layers if any(item is m for item in produced[id(layer)] for m in maps)]


def _keep_outputs(found: list, module, args, output) -> None:
    """The tensors ``module`` outputs, kept alive (an id alone could be reused by a later tensor)."""
    items = output if isinstance(output, tuple | list) else (output,)
    found.extend(item for item in items if isinstance(item, torch.Tensor))


# -- the Tokens page's input vectors -----------------------------------------------------------------------------


def check_input_vectors(subject: Subject) -> Cell:
    """The Tokens page's check (the first layer's input) is what the first layer really receives, and its summed
    embeddings are too, or the page says by how much they differ."""
    from explorer import gateway

    vectors = gateway._input_vectors(subject.lm, PROMPT)
    encoded = subject.tokenizer(PROMPT, return_tensors="pt")
    found: dict = {}
    decoder_ids = subject.start() if subject.kind == ENCODER_DECODER else None
    first = layer_calls(subject, encoded["input_ids"], decoder_ids, _stack_layers(subject), last=False)[0]
    handle = first.register_forward_pre_hook(_keeper(found, "in"), with_kwargs=True)
    try:
        subject.run(encoded["input_ids"], decoder_ids, **{k: v for k, v in encoded.items() if k == "token_type_ids"})
    finally:
        handle.remove()
    received = found["in"].squeeze().float()  # [token, hidden]; other shapes are other architectures
    if received.dim() == 2 and len(received) > len(vectors.first_layer):
        received = received[: len(vectors.first_layer)]  # padded to a multiple of a window (Longformer, LED)
    close("the first layer's input", vectors.first_layer, received.numpy())  # the page's check is true
    if getattr(vectors.embeddings, "note", None):  # the page says the rows do not add up, and why
        return Cell(NA, vectors.embeddings.note)
    summed = np.asarray(vectors.summed, dtype=np.float64)
    if summed.shape != tuple(received.shape):
        raise Mismatch(f"the summed rows: shape {summed.shape}, what the first layer receives {tuple(received.shape)}")
    difference = float(np.abs(summed - received.double().numpy()).max())
    if difference <= ATOL:
        return Cell(Y)
    close("the difference the page shows", vectors.largest_difference, difference)
    return Cell(NA, f"the page says the model does more before its first layer than the sum (by {difference:.2g})")


FEATURES = {
    "capture": check_capture,
    "verify": check_verify,
    "greedy": check_decoding("greedy"),
    "beam": check_decoding("beam"),
    "sample": check_decoding("sample"),
    "next token": check_next_token,
    "attention while decoding": check_record_attention,
    "kv cache": check_kv_cache,
    "logit lens": check_lens,
    "attribution": check_attribution,
    "patching": check_patching,
    "head ablation": check_ablation,
    "input vectors": check_input_vectors,
}


# Checked on every family: loading, capture and its check, greedy search and the next token (the core the issue asks
# of every family), the Tokens page. The rest cost more (beams, samples, the cache's timed runs, a lens and a
# patched run per layer and position, integrated gradients' points): checked on one family per attention style
# and quirk, and on the families issue 40 names, to keep the module within its share of the suite (about 90 s of
# CPU).
EVERY_FAMILY = ("capture", "verify", "greedy", "next token", "input vectors")
REPRESENTATIVES = (
    # decoders: learned positions and a fused projection; RoPE with grouped heads; sliding windows; softcapping;
    # logit scales and multipliers; OPT-350m's projections; ALiBi and their own attention code; local attention;
    # attention sinks; chunked attention; hybrid linear attention and Mamba layers; no attention at all; experts;
    # a permutation language model (its first pass appends the token to predict)
    "gpt2", "llama", "mistral", "gemma2", "gemma3_text", "cohere", "granite", "opt", "bloom", "falcon", "gpt_neo",
    "gptj", "gpt_oss", "llama4_text", "qwen3_next", "jamba", "mamba", "mixtral", "phi", "xlnet",
    # encoders: absolute positions; RoBERTa's offset positions; factorized embeddings; disentangled attention;
    # local and global layers; a family with a causal-LM class too; attention from a latent array to the tokens
    "bert", "roberta", "albert", "electra", "deberta-v2", "modernbert", "camembert", "perceiver",
    # encoder-decoders: relative bias; learned and sinusoidal positions; local attention; experts; block-local
    "t5", "bart", "m2m_100", "longt5", "switch_transformers", "pegasus_x",
    # and the other families whose failures issue 40 names (windows, caches, kinds, positions, heads)
    "starcoder2", "olmo3", "cohere2", "exaone4", "ministral", "granitemoe", "qwen3_moe", "codegen", "xglm",
    "openai-gpt", "biogpt", "mpnet", "megatron-bert", "roformer", "big_bird", "longformer", "data2vec-text",
    "roberta-prelayernorm", "xlm-roberta-xl", "ernie", "mobilebert", "mvp", "led", "prophetnet", "blenderbot",
    "blenderbot-small", "nllb-moe", "mbart", "plbart",
)  # fmt: skip
NOT_CHECKED = Cell("not checked", "")


def features_for(model_type: str) -> tuple[str, ...]:
    return tuple(FEATURES) if model_type in REPRESENTATIVES else EVERY_FAMILY


def judge(check, subject: Subject) -> Cell:
    """A feature's cell: Y, n/a (``explorer.NotApplicable``: the explorer says why it does not apply), its own clear
    message (another explorer.errors exception), or FAIL (off its reference, or any other exception)."""
    from explorer.errors import InputError, ModelLoadError, NotApplicable

    try:
        return check(subject)
    except NotApplicable as error:  # the explorer says why the feature does not apply to this architecture
        return Cell(NA, _one_line(error))
    except (InputError, ModelLoadError) as error:
        return Cell(ERROR, _one_line(error))
    except Mismatch as error:
        return Cell(FAIL, _one_line(error))
    except ReferenceFailure as error:
        return Cell(NOT_CHECKED.mark, _one_line(error))
    except Exception as error:  # a crash: the page would show a traceback
        return Cell(FAIL, f"{type(error).__name__}: {_one_line(error)}")


def _one_line(error) -> str:
    return " ".join(str(error).split())


def _short(note: str, root: str) -> str:
    """A note as the page shows it: the build folder named FOLDER (it differs per run), cut to 160 characters,
    markup escaped."""
    text = note.replace(root, "FOLDER") if root else note
    text = text[:160] + ("…" if len(text) > 160 else "")
    return "".join("\\" + c if c in MARKDOWN else c for c in text)  # shown as written, never as markup


MARKDOWN = set("\\`*_[]<>|#")


def subject_for(model_type: str, root: Path) -> Subject:
    """The tiny ``model_type`` built, saved under ``root`` and loaded through explorer: one family as the matrix
    checks it (for tests of one feature on a few families)."""
    import explorer

    model, tokenizer = build(model_type)
    folder = Path(root) / model_type
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    subject = Subject(model_type, FAMILIES[model_type].kind, model, tokenizer)
    subject.lm = explorer.load_model(str(folder), device="cpu")
    _tokenizer_note(subject)
    return subject


def family_row(model_type: str, root: Path) -> dict[str, Cell]:
    """Every feature's cell for one family (built, saved under ``root``, loaded through explorer)."""
    import explorer
    from explorer.errors import ModelLoadError

    kind = FAMILIES[model_type].kind
    try:
        model, tokenizer = build(model_type)
        folder = root / model_type
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    except Exception as error:
        return {"load": Cell(FAIL, f"the test could not build it: {type(error).__name__}: {_one_line(error)}")}
    subject, chosen = Subject(model_type, kind, model, tokenizer), features_for(model_type)
    try:  # the tiny model runs in transformers itself, or nothing here can be checked
        subject.run(subject.ids(PROMPT), torch.tensor([[0]]) if kind == ENCODER_DECODER else None)
    except ReferenceFailure as error:
        return {"load": Cell(NOT_CHECKED.mark, f"the tiny model: {error}")} | dict.fromkeys(FEATURES, NOT_CHECKED)
    try:
        subject.lm = explorer.load_model(str(folder), device="cpu")
    except ModelLoadError as error:  # every feature is refused with the model
        refused = Cell(ERROR, "refused at load")
        cells = {f: refused if f in chosen else NOT_CHECKED for f in FEATURES}
        return {"load": Cell(ERROR, _one_line(error))} | cells
    except Exception as error:  # the crash is the load's FAIL; nothing else can be checked
        crash = Cell(FAIL, f"{type(error).__name__}: {_one_line(error)}")
        return {"load": crash} | dict.fromkeys(FEATURES, NOT_CHECKED)
    loaded = subject.lm.kind == kind
    row = {
        "load": Cell(Y, _tokenizer_note(subject))
        if loaded
        else Cell(FAIL, f"loads as a {subject.lm.kind}, not an {kind}")
    }
    return row | {f: judge(check, subject) if f in chosen else NOT_CHECKED for f, check in FEATURES.items()}


def _tokenizer_note(subject: Subject) -> str:
    """Where ``AutoTokenizer`` reads the saved word-level tokenizer as the family's own class (Qwen2's BPE), the
    reference takes that tokenizer too, so that both run on the same ids; said in the load cell's note."""
    loaded = subject.lm.tokenizer
    ids = loaded(PROMPT)["input_ids"]
    if ids == subject.tokenizer(PROMPT)["input_ids"]:
        return ""
    subject.tokenizer = loaded
    return f"AutoTokenizer loads {type(loaded).__name__}, which reads the prompt as {len(ids)} tokens"


def coverage(root: Path, families=None) -> dict[str, dict[str, Cell]]:
    """{family: {feature: Cell}} for ``families`` (default: all of ``FAMILIES``), on one CPU thread: on models
    this small, more threads only wait in each other's barriers (and the suite's workers share the cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {model_type: family_row(model_type, Path(root)) for model_type in families or FAMILIES}
    finally:
        torch.set_num_threads(threads)


# -- the docs page -----------------------------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs" / "supported-models.md"
COLUMNS = ("load", *FEATURES)
SHORT = {Y: "Y", ERROR: "error", NA: "n/a", FAIL: "**FAIL**", NOT_CHECKED.mark: "·"}

INTRO = """# Supported models

Which families of Hugging Face text models the explorer supports, feature by feature: the coverage matrix of
`tests/test_families.py`, run in the suite. Each family is a tiny model built from transformers' own config class
for it ({version}; 2 layers, hidden size 32, 4 heads, 2 key/value heads where the family has grouped heads, a
vocabulary of {vocab} words, sliding and chunked windows of 4 tokens) with seeded random weights, saved as its Hub
checkpoints are (encoders as their masked-LM class, decoders as their causal LM, encoder-decoders as their
seq2seq LM) and loaded through `explorer.load_model`. Every feature is then checked against plain transformers
on a prompt of 6 tokens (past the windows) and {new} new tokens:

| feature | reference it must equal |
|---|---|
| load | `explorer.load_model` loads it as its kind (encoder, decoder, encoder-decoder) |
| capture | the model's own eager `output_attentions=True`, every stack, to 1e-5 |
| verify | `verify()` (the weights recomputed from the captured queries and keys) within its tolerance |
| greedy, beam, sample | `model.generate()` with the same settings and seed: the same sequences (and beam scores) |
| next token | `generate()`'s first logits, and those through transformers' temperature, top-k and top-p warpers |
| attention while decoding | `decode(record_attention=True)` past the window = one eager pass over what it generated |
| kv cache | the argmax of the model's own logits at each pass; logits with and without the cache as the model's own |
| logit lens | each layer's residual stream in place of the last layer's output: the model's own norm and head read it |
| attribution | integrated gradients: log p(target) as the model gives it, scores adding up to its change within 1%; \
where log p jumps along the path (experts switching), each score within 1% of the change of a 4,096-point \
integral of the gradient, and the page saying steps do not close the gap |
| patching | each cell = one plain run patched by forward hooks (residual, MLP output, a head's slice) |
| head ablation | each head zeroed at its output projection's input by a forward hook, one plain run per head; \
where the heads are combined by a weight of the attention's own (XLNet's `o`), that weight's slice of the head \
set to 0 in a copy of the model |
| input vectors | the Tokens page's check = what the first layer receives; its sum too, or the page says how far off |

Marks: **Y** equals its reference; **error** the explorer refuses with a message saying why (an `explorer.errors`
exception); **n/a** the feature does not apply (the reason is in the notes); **FAIL** a crash or a number off its
reference (silently wrong). Every FAIL is a known gap of issue 40 listed in `KNOWN_GAPS` (`tests/test_families.py`):
the test fails on any other FAIL, and on a listed gap that now passes. **·** not checked: {every} are checked on
every family; the other features, which cost more per family, on {count} representatives, one per attention style
and per quirk (learned, rotary, ALiBi and relative positions; sliding, chunked, local and global windows;
softcapping, logit scales, attention sinks; grouped heads; experts; hybrid linear-attention and Mamba layers; no
attention at all; factorized embeddings; encoders with a causal-LM class; a latent array) and the families issue 40
names, to keep the matrix within its share of the suite's time: {representatives}.

Regenerate this page with `python -m tests.families --write-docs`; the suite fails when it differs from the matrix.
"""


def render(matrix: dict[str, dict[str, Cell]], root: str = "") -> str:
    """The docs page for ``matrix``: the introduction, counts per feature, the table, then the notes."""
    import transformers

    facts = dict(
        version=f"transformers {transformers.__version__}",
        new=NEW_TOKENS,
        vocab=IDS["vocab_size"],
        every=", ".join(("load", *EVERY_FAMILY)),
        count=len(REPRESENTATIVES),
        representatives=", ".join(REPRESENTATIVES),
    )
    lines = [INTRO.format(**facts)]
    lines += ["## Counts", "", "| feature | Y | error | n/a | FAIL | not checked |", "|---|---|---|---|---|---|"]
    for feature in COLUMNS:
        marks = [row.get(feature, Cell(FAIL)).mark for row in matrix.values()]
        counts = (marks.count(mark) for mark in (Y, ERROR, NA, FAIL, NOT_CHECKED.mark))
        lines.append(f"| {feature} | " + " | ".join(map(str, counts)) + " |")
    lines += ["", f"## The matrix ({len(matrix)} families)", ""]
    lines += ["| family | kind | " + " | ".join(COLUMNS) + " |", "|---|---|" + "---|" * len(COLUMNS)]
    for model_type, row in matrix.items():
        cells = [SHORT[row.get(feature, Cell(FAIL, "not run")).mark] for feature in COLUMNS]
        lines.append(f"| {model_type} | {FAMILIES[model_type].kind} | " + " | ".join(cells) + " |")
    lines += ["", "## Notes", ""]
    for model_type, row in matrix.items():
        notes = [f"{feature}: {_short(cell.note, root)}" for feature, cell in row.items() if cell.note]
        if notes:
            lines.append(f"- **{model_type}**: " + "; ".join(_unique(notes)))
    if SKIPPED:
        lines += ["", "## Not in the matrix", ""]
        lines += [f"- **{model_type}**: {reason}" for model_type, reason in sorted(SKIPPED.items())]
    return "\n".join(lines) + "\n"


def _unique(notes: list[str]) -> list[str]:
    return list(dict.fromkeys(notes))


def main(argv=None) -> None:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-docs", action="store_true", help="regenerate docs/supported-models.md")
    parser.add_argument("--gaps", action="store_true", help="print the FAIL cells as KNOWN_GAPS entries")
    parser.add_argument("families", nargs="*", help="only these families (default: all); printed, never written")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as root:
        matrix = coverage(Path(root), args.families or None)
        page = render(matrix, root)
        gaps = [
            f"    ({family!r}, {feature!r}): {'issue 40: ' + cell.note.replace(root, 'FOLDER')[:90]!r},"
            for family, row in matrix.items()
            for feature, cell in row.items()
            if cell.mark == FAIL
        ]
    if args.gaps:
        print("\n".join(gaps))
    if args.write_docs and not args.families:
        DOCS.write_text(page)
        print(f"wrote {DOCS}")
    if not (args.gaps or args.write_docs):
        print(page)


if __name__ == "__main__":
    main()
