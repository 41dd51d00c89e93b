"""Measure a trained prose-llama folder as its model card reports it, with the helpers of
``tests/test_prose_llama.py`` (the tests hold the same numbers to their bars).

    python training/measure_llama.py [folder]      # default explorer/assets/prose-llama; prints JSON
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

import explorer  # noqa: E402
from explorer.lecture.generation import PROMPT  # noqa: E402
from tests import test_prose_llama as t  # noqa: E402


def probes(lm) -> dict:
    out = {}
    for n in (20, 100):
        p = explorer.head_probes(lm, n=n, seed=0)
        for score in ("induction", "previous", "duplicate", "sink"):
            layer, head = p.best(score)
            value = float(p.scores[score][layer, head])
            out[f"{score} n={n}"] = {
                "layer": int(layer),
                "head": int(head),
                "score": round(value, 3),
                "even_spread": round(p.uniform[score], 4),
                "ratio": round(value / p.uniform[score], 1),
            }
    return out


def heldout(reference) -> dict:
    text = (t.DATA / "prose_llama_heldout.txt").read_text(encoding="utf-8")
    old_text = (t.DATA / "prose_heldout.txt").read_text(encoding="utf-8")
    old = t._reference(t.OLD)
    out = {}
    for name, models in (("prose-llama", reference), ("prose-gpt2", old)):
        real = t.text_nll(*models, text)
        shuffled = t.text_nll(*models, t.shuffled_words(text))
        old_real = t.text_nll(*models, old_text)
        old_shuffled = t.text_nll(*models, t.shuffled_words(old_text))
        out[name] = {
            "real_over_shuffled_per_word (new sample)": round(math.exp(t.per_word(shuffled - real, text)), 2),
            "real_over_shuffled_per_word (prose-gpt2 sample)": round(
                math.exp(t.per_word(old_shuffled - old_real, old_text)), 2
            ),
            "word_perplexity (new sample)": round(math.exp(t.per_word(real, text)), 1),
            "word_perplexity (prose-gpt2 sample)": round(math.exp(t.per_word(old_real, old_text)), 1),
            "nll_ratio (new sample)": round(shuffled / real, 2),
            "nll_ratio (prose-gpt2 sample)": round(old_shuffled / old_real, 2),
        }
    return out


def deck(folder: Path) -> dict:
    t.FOLDER = folder
    loop_slide, trace = t._on_this_model("Greedy search repeats itself")
    _, trace_32 = t._on_this_model("Greedy search repeats itself", settings=t.GREEDY_32)
    beam_slide, traces = t._on_this_model("Greedy, beam, and a ban")
    temp_slide, logits = t._on_this_model("Temperature")
    return {
        "greedy 16 tokens": "".join(trace.generated_tokens[0]),
        "loop told (16 steps, the slide's)": loop_slide.revealed(trace)[0],
        "loop told (32 steps)": loop_slide.revealed(trace_32)[0],
        "greedy 32 tokens": "".join(trace_32.generated_tokens[0]),
        "beam vs greedy": beam_slide.question.explanation(traces),
        "ban told": beam_slide.revealed(traces),
        "continuations": {label: "".join(tr.generated_tokens[0]) for label, tr in traces.items()},
        "temperature": temp_slide.question.explanation(logits),
    }


def temperature_samples(reference) -> dict:
    """Seed 0, no top-k, 48 tokens; each with its mean NLL per token under the model and the share of its words
    that are not words of the training text (as the temperature test counts them)."""
    model, tokenizer = reference
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    vocabulary = set((t.DATA / "prose_llama_words.txt").read_text(encoding="utf-8").split())
    out = {}
    for temperature in (0.5, 1.0, 2.0):
        torch.manual_seed(0)
        sample = model.generate(ids, do_sample=True, temperature=temperature, top_k=0, max_new_tokens=48)
        new = sample[0, ids.shape[1] :]
        with torch.no_grad():
            logp = torch.log_softmax(model(sample).logits[0, :-1].double(), dim=-1)
        words = [w.strip(".,;:!?\"'()-").lower() for w in tokenizer.decode(new).split()]
        words = [w for w in words if w]
        out[f"T={temperature}"] = {
            "text": tokenizer.decode(new),
            "mean_nll": round(-float(logp[ids.shape[1] - 1 :].gather(1, new[:, None]).mean()), 2),
            "not_training_words": round(sum(w not in vocabulary for w in words) / len(words), 2),
        }
    return out


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else t.FOLDER
    start = time.perf_counter()
    lm = explorer.load_model(folder, device="cpu")
    load_s = time.perf_counter() - start
    reference = t._reference(folder)
    report = {
        "folder": str(folder),
        "load_model_s": round(load_s, 2),
        "bytes": sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()),
        "params": sum(p.numel() for p in lm.model.parameters()),
        "probes": probes(lm),
        "heldout": heldout(reference),
        "deck": deck(folder),
        "samples": temperature_samples(reference),
    }
    print(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
