"""Tiny random models built from configs, saved as folders so tests load them through the public path.

Each covers an attention quirk: BERT (token types, no mask), GPT-2 (fused Conv1D projection), Llama
(RoPE, grouped KV heads), Qwen3 (q/k norms before RoPE, GQA), Gemma 2 (softcapping, sliding
windows), T5 (relative bias, no scaling, cross-attention).
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    BertConfig,
    Gemma2Config,
    GPT2Config,
    LlamaConfig,
    PreTrainedTokenizerFast,
    Qwen3Config,
    T5Config,
    T5ForConditionalGeneration,
)

from tests.devices import DEVICE

WORDS = (
    "time flies like an arrow fruit a banana the cat sat on mat dog ran to park "
    "and then it was very good bad day night . , ! ?"
).split()
SPECIALS = ["<pad>", "<unk>", "<s>", "</s>", "[CLS]", "[SEP]"]
VOCAB = {token: i for i, token in enumerate(SPECIALS + WORDS)}
IDS = dict(vocab_size=len(VOCAB), pad_token_id=0, bos_token_id=2, eos_token_id=3)


def word_tokenizer(pair_template: bool = False, eos: bool = False) -> PreTrainedTokenizerFast:
    """A word-level tokenizer over ``WORDS``; BERT-style [CLS]/[SEP] or a trailing </s> on request."""
    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if pair_template:
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", VOCAB["[CLS]"]), ("[SEP]", VOCAB["[SEP]"])],
        )
    elif eos:
        tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 3)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        model_max_length=64,
    )


def _llama_like(config_class, **extra):
    return config_class(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=64,
        **IDS,
        **extra,
    )


# name -> (auto class, config factory, tokenizer factory)
TINY = {
    "bert": (
        AutoModel,
        lambda: BertConfig(
            hidden_size=16,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=64,
            type_vocab_size=2,
            **IDS,
        ),
        lambda: word_tokenizer(pair_template=True),
    ),
    "gpt2": (
        AutoModelForCausalLM,
        lambda: GPT2Config(n_layer=2, n_head=2, n_embd=16, n_positions=64, **IDS),
        word_tokenizer,
    ),
    "llama": (AutoModelForCausalLM, lambda: _llama_like(LlamaConfig), word_tokenizer),
    "qwen3": (AutoModelForCausalLM, lambda: _llama_like(Qwen3Config), word_tokenizer),
    "gemma2": (
        AutoModelForCausalLM,
        lambda: _llama_like(
            Gemma2Config,
            sliding_window=4,
            attn_logit_softcapping=5.0,
            query_pre_attn_scalar=8,
            layer_types=["sliding_attention", "full_attention"],
        ),
        word_tokenizer,
    ),
    "t5": (
        T5ForConditionalGeneration,
        lambda: T5Config(
            d_model=16,
            d_kv=8,
            d_ff=32,
            num_layers=2,
            num_decoder_layers=2,
            num_heads=2,
            relative_attention_num_buckets=8,
            decoder_start_token_id=0,
            **IDS,
        ),
        lambda: word_tokenizer(eos=True),
    ),
}


def save_tiny(name: str, folder: Path) -> Path:
    """Build the tiny ``name`` model with seeded random weights and save it with its tokenizer."""
    auto_class, make_config, make_tokenizer = TINY[name]
    torch.manual_seed(0)
    config = make_config()
    if auto_class is T5ForConditionalGeneration:
        model = T5ForConditionalGeneration(config)
    else:
        model = auto_class.from_config(config, attn_implementation="eager")
    model.save_pretrained(folder)
    make_tokenizer().save_pretrained(folder)
    return folder


def eager_reference(name: str, folder: Path, dtype: torch.dtype = torch.float32):
    """The same weights loaded the plain way, with the library's own eager attention, in ``dtype``."""
    auto_class = TINY[name][0]
    return auto_class.from_pretrained(folder, attn_implementation="eager", dtype=dtype).to(DEVICE).eval()


def save_tiny_perceiver(folder: Path, model_class: str = "PerceiverForMaskedLM", num_latents: int = 4):
    """A tiny Perceiver saved as ``model_class`` (its text checkpoints' masked LM, or its base model) with the
    word tokenizer and a [MASK]: ``num_latents`` latents, 2 self-attention layers of 2 heads. Returns the model as
    saved."""
    import transformers

    tokenizer = word_tokenizer(pair_template=True)
    tokenizer.add_special_tokens({"mask_token": "[MASK]"})
    torch.manual_seed(0)
    config = transformers.PerceiverConfig(
        num_latents=num_latents, d_latents=16, d_model=16, num_blocks=1, num_self_attends_per_block=2,
        num_self_attention_heads=2, num_cross_attention_heads=2, vocab_size=len(tokenizer), max_position_embeddings=64,
    )  # fmt: skip
    model = getattr(transformers, model_class)(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model
