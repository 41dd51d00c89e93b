"""The bundled decoder is a real (if tiny) language model: it beats a unigram
baseline on held-out prose, writes words, and stays small enough to ship.

Everything runs offline from files in the repository; see
``explorer/assets/prose-gpt2/README.md`` and ``training/train_decoder.py``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.devices import DEVICE

REPO = Path(__file__).resolve().parent.parent
FOLDER = REPO / "explorer" / "assets" / "prose-gpt2"
DATA = Path(__file__).resolve().parent / "data"
MAX_FOLDER_BYTES = 25 * 1024 * 1024


@pytest.fixture(scope="module")
def decoder():
    tokenizer = AutoTokenizer.from_pretrained(FOLDER)
    model = AutoModelForCausalLM.from_pretrained(FOLDER, attn_implementation="eager").to(DEVICE).eval()
    return model, tokenizer


@torch.no_grad()
def sliding_window_nll(model, ids: torch.Tensor, block: int, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """NLL of every token after the first, each scored once, with windows of ``block`` tokens.

    Returns (nll per scored token, the scored target ids) so a baseline can
    be evaluated on exactly the same tokens.
    """
    nlls, targets, scored_until = [], [], 1
    for begin in range(0, len(ids) - 1, stride):
        end = min(begin + block, len(ids))
        logp = torch.log_softmax(model(ids[begin:end].unsqueeze(0)).logits[0, :-1].float(), dim=-1)
        new = slice(scored_until - begin - 1, None)  # skip tokens an earlier window scored
        tgt = ids[begin + 1 : end][new]
        nlls.append(-logp[new].gather(1, tgt.unsqueeze(1)).squeeze(1))
        targets.append(tgt)
        scored_until = end
        if end == len(ids):
            break
    return torch.cat(nlls), torch.cat(targets)


def unigram_nll(targets: torch.Tensor) -> torch.Tensor:
    """Add-one smoothed unigram model from the committed training-split counts."""
    data = json.loads((DATA / "prose_unigram_counts.json").read_text())
    counts = torch.tensor(data["counts"], dtype=torch.float64)
    logp = torch.log((counts + 1) / (counts.sum() + len(counts)))
    return -logp[targets.cpu()]


def test_beats_unigram_baseline_by_3x_on_heldout_prose(decoder):
    model, tokenizer = decoder
    text = (DATA / "prose_heldout.txt").read_text(encoding="utf-8")
    ids = torch.tensor(tokenizer(text)["input_ids"], device=DEVICE)
    assert len(ids) > 1000, "held-out sample too small to be meaningful"
    block = model.config.n_positions
    nll, targets = sliding_window_nll(model, ids, block=block, stride=block // 2)
    assert len(targets) == len(ids) - 1

    model_ppl = math.exp(nll.mean().item())
    unigram_ppl = math.exp(unigram_nll(targets).mean().item())
    assert model_ppl <= unigram_ppl / 3, f"model ppl {model_ppl:.1f} vs unigram ppl {unigram_ppl:.1f}"


def test_unigram_counts_match_the_tokenizer(decoder):
    _, tokenizer = decoder
    data = json.loads((DATA / "prose_unigram_counts.json").read_text())
    assert data["vocab_size"] == len(data["counts"]) == len(tokenizer)
    assert data["total"] == sum(data["counts"]) > 100_000


def test_greedy_continuation_is_mostly_words(decoder):
    model, tokenizer = decoder
    enc = tokenizer("He had never been so", return_tensors="pt").to(DEVICE)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=30, do_sample=False)
    text = tokenizer.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)

    words = [re.sub(r"^[\W_]+|[\W_]+$", "", w) for w in text.split()]  # strip surrounding punctuation
    words = [w for w in words if w]
    assert len(words) >= 5, f"too little text: {text!r}"
    alphabetic = [w for w in words if w.replace("'", "").replace("-", "").isalpha()]
    assert len(alphabetic) >= 0.8 * len(words), f"not word-like: {text!r}"
    assert len({w.lower() for w in alphabetic}) >= 4, f"degenerate repetition: {text!r}"


def test_bundled_folder_is_small_and_complete():
    names = {p.name for p in FOLDER.iterdir()}
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "README.md",
    } <= names
    size = sum(p.stat().st_size for p in FOLDER.rglob("*") if p.is_file())
    assert size <= MAX_FOLDER_BYTES, f"{size / 1e6:.1f} MB"


def test_generation_config_stops_and_pads_with_endoftext(decoder):
    model, tokenizer = decoder
    eos = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    gen = model.generation_config
    assert gen.eos_token_id == gen.pad_token_id == gen.bos_token_id == eos == tokenizer.eos_token_id


def test_explorer_loads_the_default_decoder():
    import explorer

    lm = explorer.load_model(explorer.PROSE_GPT2, device=DEVICE)
    assert lm.kind == "decoder"


def test_capture_on_the_bundled_decoder_equals_its_eager_attention(decoder):
    import numpy as np

    import explorer

    model, tokenizer = decoder
    lm = explorer.load_model(explorer.PROSE_GPT2, device=DEVICE)
    text = "It is a truth universally acknowledged, that a single man in possession of a good fortune"
    cap = explorer.capture(lm, text)
    with torch.no_grad():
        expected = model(**tokenizer(text, return_tensors="pt").to(DEVICE), output_attentions=True).attentions
    np.testing.assert_allclose(cap.attentions, torch.stack([a[0] for a in expected]).cpu().numpy(), rtol=0, atol=1e-6)
    assert cap.verify() <= 1e-5
    assert cap.main.is_causal and np.triu(cap.attentions, k=1).max() == 0.0
    assert "".join(cap.tokens) == text  # byte-level BPE labels read as the text itself
    assert " truth" in cap.tokens
