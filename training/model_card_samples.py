"""Write the model card ``explorer/assets/prose-gpt2/README.md``.

Numbers come from ``training/metrics.json`` (written by ``train_decoder.py``);
the sample continuations are regenerated here with ``model.generate`` so the
card always shows what the shipped weights actually do::

    python training/model_card_samples.py
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

REPO = Path(__file__).resolve().parent.parent
PROMPTS = [
    "The weather was",
    "She looked at him and said",
    "When the ship reached the harbour,",
    "My dear sister,",
    "The old captain",
    "In the morning they walked to",
    "He had never been so",
    "The letter was",
    "There was nothing in the world",
    "The whale",
]
MAX_NEW_TOKENS = 30
SEED = 0
DECODINGS = [
    ("greedy", {"do_sample": False}),
    ("beam4", {"do_sample": False, "num_beams": 4}),
    # Shown for contrast: a tiny model loops under greedy/beam search.
    ("sampled", {"do_sample": True, "top_p": 0.9, "temperature": 0.8}),
]


def generate_samples(folder: Path) -> list[dict]:
    """Greedy, 4-beam and seeded sampled continuations of every prompt."""
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()
    rows = []
    for prompt in PROMPTS:
        enc = tok(prompt, return_tensors="pt")
        row = {"prompt": prompt}
        for label, kwargs in DECODINGS:
            torch.manual_seed(SEED)  # only the sampled row uses it
            with torch.no_grad():
                out = model.generate(**enc, max_new_tokens=MAX_NEW_TOKENS, **kwargs)
            row[label] = tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        rows.append(row)
    return rows


def samples_markdown(rows: list[dict]) -> str:
    lines = [
        (
            f"Each prompt continued for {MAX_NEW_TOKENS} new tokens by `model.generate`: "
            "greedy (`do_sample=False`), beam search (`num_beams=4`), and, for "
            "contrast, nucleus sampling (`top_p=0.9, temperature=0.8`, "
            f"`torch.manual_seed({SEED})` before each call). "
            "Regenerate with `python training/model_card_samples.py`."
        ),
        "",
    ]
    for i, row in enumerate(rows, 1):
        lines += [
            f"{i}. **{row['prompt']}**",
            f"   - greedy: …{_one_line(row['greedy'])}",
            f"   - beam 4: …{_one_line(row['beam4'])}",
            f"   - sampled: …{_one_line(row['sampled'])}",
        ]
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render_card(m: dict, samples_md: str, folder: Path) -> str:
    a, c, f, hw = m["args"], m["corpus"], m["final"], m["hardware"]
    size_mb = sum(p.stat().st_size for p in folder.iterdir() if p.name != "README.md") / 1e6
    last = m["history"][-1]
    return CARD.format(
        params=m["params"],
        params_m=m["params"] / 1e6,
        size_mb=size_mb,
        weights_mb=(folder / "model.safetensors").stat().st_size / 1e6,
        words=c["words_total"],
        chars_mb=c["chars_total"] / 1e6,
        tok_train=c["tokens_train"],
        tok_val=c["tokens_val"],
        docs_train=c["docs_train"],
        docs_val=c["docs_val"],
        val_pct=100 * a["val_frac"],
        tokens_seen=m["tokens_seen"],
        epochs=m["epochs"],
        wall_min=m["wall_time_s"] / 60,
        cpu=hw["cpu"],
        torch=m["versions"]["torch"],
        transformers=m["versions"]["transformers"],
        train_loss=last["train_loss"],
        quick_val_loss=last["val_loss"],
        samples=samples_md,
        val_curve=", ".join(f"{h['val_loss']:.2f}" for h in m["history"]),
        **{k: v for k, v in a.items() if isinstance(v, (int, float))},
        **f,
    )


CARD = """\
---
license: mit
language: en
library_name: transformers
pipeline_tag: text-generation
tags: [gpt2, tiny, from-scratch, public-domain-text]
---

# prose-gpt2 — a tiny GPT-2 trained from scratch on public-domain novels

The default decoder of the Attention & Decoding Explorer. It is deliberately
small, so it loads in a second and runs on any CPU, and it is bundled in the
repository so the decoding pages work offline. It writes locally fluent,
19th-century-flavoured English; it has no knowledge of the world and does not
follow instructions.

```python
from transformers import AutoModelForCausalLM, AutoTokenizer
tok = AutoTokenizer.from_pretrained("explorer/assets/prose-gpt2")
model = AutoModelForCausalLM.from_pretrained("explorer/assets/prose-gpt2", attn_implementation="eager")
```

## Training data

| | |
|---|---|
| Debian package | `r-cran-janeaustenr` 1.0.0-1 (bookworm/main), MIT: Jane Austen's six novels |
| Debian package | `r-cran-tokenizers` 0.3.0-1 (bookworm/main), MIT: its `mobydick` data set (Melville) |
| Austen | *Sense and Sensibility*, *Pride and Prejudice*, *Mansfield Park*, *Emma*, *Northanger Abbey*, *Persuasion* |
| Melville | *Moby-Dick* |
| Status | public domain (Project Gutenberg transcriptions) |
| Cleaning | Gutenberg boilerplate, title pages, chapter headings and `_italic_` underscores removed |
| Layout | hard-wrapped lines joined: one paragraph per line, one document per chapter |
| Size | {words:,} words, {chars_mb:.1f} MB of text; {tok_train:,} training tokens, {tok_val:,} validation tokens |
| Split | the last chapters of *every* book (≥ {val_pct:.0f}% of its words) are held out for validation |
| Chapters | {docs_train} training, {docs_val} validation |

Fetch: `apt-get download r-cran-janeaustenr=1.0.0-1 r-cran-tokenizers=0.3.0-1`
(done by `training/corpus.py`, which reads R's lazy-load data files without R).

## Licence

Model weights and tokenizer: MIT. The training texts are in the public domain;
their Debian/CRAN packaging is MIT-licensed.

## Architecture

| | |
|---|---|
| Class | `GPT2LMHeadModel` (`transformers`), input and output embeddings tied |
| Layers / heads / width | {n_layer} / {n_head} / {n_embd} (head size {head_dim}) |
| Context length | {block_size} tokens (`n_positions`) |
| Vocabulary | {vocab_size} byte-level BPE tokens (training split only); `<\\|endoftext\\|>` = id 0 = bos/eos/pad |
| Parameters | {params:,} ({params_m:.2f} M) |
| Size on disk | {weights_mb:.1f} MB float32 safetensors; {size_mb:.1f} MB for the whole folder |

## Training

| | |
|---|---|
| Steps | {steps:,} × batch {batch_size} × {block_size} tokens = {tokens_seen:,} tokens seen ({epochs:.1f} epochs) |
| Optimiser | AdamW (β = 0.9, 0.95), weight decay {weight_decay} on matrices, gradient clipping {grad_clip} |
| Schedule | peak lr {lr}, linear warmup {warmup} steps, cosine decay to {min_lr_frac} × peak |
| Regularisation | dropout {dropout} |
| Seed | {seed} (data order, init, tokenizer training is deterministic) |
| Hardware | CPU only, no GPU: {cpu}, `torch.set_num_threads({threads})` (2 cores shared with other work) |
| Wall time | {wall_min:.0f} minutes including data preparation and evaluation |
| Software | torch {torch}, transformers {transformers} |

Reproduce: `python training/train_decoder.py` (defaults reproduce this model), then
`python training/model_card_samples.py` for this card.

## Evaluation (held-out chapters, {val_tokens_scored:,} tokens)

Sliding windows of {window} tokens with stride {stride}: every token is scored once,
with at least {stride} tokens of context after the first window.

| Metric | Value |
|---|---|
| Final training loss ({eval_windows} evenly spaced windows) | {train_loss:.3f} |
| Validation loss (same quick estimate) | {quick_val_loss:.3f} |
| Validation loss (full, sliding windows) | {val_loss:.3f} |
| **Validation perplexity** | **{val_ppl:.1f}** |
| Unigram perplexity (training-split token counts, add-one smoothing, same tokens) | {unigram_ppl:.1f} |
| Unigram / model perplexity | {ppl_ratio_unigram_over_model:.1f}× |
| Median top-1 next-token probability | {median_top1_prob:.3f} |

Validation loss at every {eval_every} steps: {val_curve}. It was still falling at
the end, so {epochs:.1f} epochs did not overfit; the train/validation gap partly
reflects that the held-out chapters are the endings of the books.

The median top-1 probability shows the next-token distributions are neither
flat nor collapsed onto a single token. `tests/test_default_decoder.py` rechecks
the perplexity ratio on a committed held-out sample.

## Samples

{samples}

## Limitations

Trained on about a million words from two 19th-century authors: expect period
vocabulary, Austen's drawing rooms and Melville's whaling, frequent repetition
loops under greedy decoding, and no factual reliability. Intended only for
visualising attention and decoding strategies.
"""


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--folder", type=Path, default=REPO / "explorer/assets/prose-gpt2")
    p.add_argument("--metrics", type=Path, default=REPO / "training/metrics.json")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    metrics = json.loads(args.metrics.read_text())
    metrics["args"]["head_dim"] = metrics["args"]["n_embd"] // metrics["args"]["n_head"]
    card = render_card(metrics, samples_markdown(generate_samples(args.folder)), args.folder)
    (args.folder / "README.md").write_text(card, encoding="utf-8")
    print(card)


if __name__ == "__main__":
    main()
