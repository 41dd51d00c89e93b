"""Train the bundled encoder-decoder (``explorer/assets/dates-t5``): written dates to ISO 8601.

"Thursday, March 5, 2021" → "2021-03-05", "the 5th of March 2021" → "2021-03-05": the classic first demo of
attention (the year moves to the front, the month name becomes two digits), so a class can read the
cross-attention: each output piece looks at the words it came from. Everything is synthetic and deterministic
(a fixed seed), so the model needs no download and the script reproduces it on any CPU in a few minutes.

- **Data**: random calendar dates from 1900 to 2099 in twelve written formats (with and without weekdays,
  ordinals, abbreviated months, commas); the held-out set's sources never occur in training.
- **Tokenizer**: word-level, so that an attention map has one row per word: words and numbers carry a "▁"
  word-start mark (as T5's SentencePiece does), ordinal endings and punctuation are their own tokens, and
  decoding gives the exact text back ("▁2021", "-", "03", "-", "05" → "2021-03-05").
- **Model**: ``T5ForConditionalGeneration`` from a small ``T5Config`` (2 + 2 layers, 4 heads, width 128),
  AdamW with warmup and linear decay, one CPU thread, fixed seeds.
- **Outputs**: the model folder (safetensors, tokenizer, generation config, the model card's numbers in
  ``training/seq2seq_metrics.json``) and 200 held-out examples in ``tests/data/dates_heldout.jsonl``.

Run: ``python training/train_seq2seq.py`` (defaults reproduce the shipped model).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import random
import time
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import GenerationConfig, PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

REPO = Path(__file__).resolve().parent.parent
OUTPUT = REPO / "explorer" / "assets" / "dates-t5"
METRICS = REPO / "training" / "seq2seq_metrics.json"
HELD_OUT_FILE = REPO / "tests" / "data" / "dates_heldout.jsonl"
SPECIALS = ["<pad>", "</s>", "<unk>"]  # ids 0, 1, 2: T5's order (pad doubles as the decoder's start token)
MONTHS = [dt.date(2000, m, 1).strftime("%B") for m in range(1, 13)]
WEEKDAYS = [dt.date(2024, 1, d).strftime("%A") for d in range(1, 8)]  # 2024-01-01 was a Monday
FIRST, LAST = dt.date(1900, 1, 1), dt.date(2099, 12, 31)


def ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


# How people write a date; {W} weekday, {M} month, {m} its first three letters, {d} day, {D} two-digit day,
# {o} ordinal day, {Y} year.
FORMATS = [
    "{W}, {M} {d}, {Y}",
    "{M} {d}, {Y}",
    "{d} {M} {Y}",
    "{M} {o}, {Y}",
    "the {o} of {M} {Y}",
    "{o} of {M}, {Y}",
    "{m} {d} {Y}",
    "{D} {m} {Y}",
    "{W} {d} {M} {Y}",
    "{W}, the {o} of {M}, {Y}",
    "{m}. {d}, {Y}",
    "{M} {Y}, the {o}",
]


def written(date: dt.date, form: str) -> str:
    month = MONTHS[date.month - 1]
    return form.format(
        W=WEEKDAYS[date.weekday()],
        M=month,
        m=month[:3],
        d=date.day,
        D=f"{date.day:02d}",
        o=ordinal(date.day),
        Y=date.year,
    )


def examples(rng: random.Random, count: int) -> list[tuple[str, str]]:
    span = (LAST - FIRST).days
    pairs = []
    for _ in range(count):
        date = FIRST + dt.timedelta(days=rng.randrange(span + 1))
        pairs.append((written(date, rng.choice(FORMATS)), date.isoformat()))
    return pairs


def split(rng: random.Random, train_size: int, held_out_size: int) -> tuple[list, list]:
    """Training pairs and held-out pairs whose sources never occur in training."""
    held_out = list(dict(examples(rng, held_out_size * 2)).items())[:held_out_size]
    unseen = {source for source, _ in held_out}
    train = [pair for pair in examples(rng, train_size * 2) if pair[0] not in unseen][:train_size]
    return train, held_out


def word_tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    """Word-level: '▁' marks a word's start; numbers, letters and each punctuation mark are separate tokens."""
    pre = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True),
            pre_tokenizers.Split(Regex(r"▁?[^\W\d_]+|▁?\d+|[^\w▁]|▁"), behavior="isolated"),
        ]
    )
    vocabulary = {token: i for i, token in enumerate(SPECIALS)}
    for text in texts:
        for piece, _ in pre.pre_tokenize_str(text):
            vocabulary.setdefault(piece, len(vocabulary))
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", model_max_length=64
    )


def model_for(vocab_size: int, seed: int) -> T5ForConditionalGeneration:
    torch.manual_seed(seed)
    config = T5Config(
        vocab_size=vocab_size,
        d_model=128,
        d_kv=32,
        d_ff=512,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=16,
        relative_attention_max_distance=32,
        dropout_rate=0.1,
        feed_forward_proj="relu",
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    return T5ForConditionalGeneration(config)


def batches(rng: random.Random, pairs: list, size: int):
    while True:
        order = list(range(len(pairs)))
        rng.shuffle(order)
        for start in range(0, len(order) - size + 1, size):
            yield [pairs[i] for i in order[start : start + size]]


def encode(tokenizer, batch) -> dict:
    sources, targets = zip(*batch, strict=True)
    inputs = tokenizer(list(sources), return_tensors="pt", padding=True)
    labels = tokenizer(text_target=list(targets), return_tensors="pt", padding=True)["input_ids"]
    labels[labels == tokenizer.pad_token_id] = -100  # padding is not predicted
    return {**inputs, "labels": labels}


@torch.no_grad()
def exact_match(model, tokenizer, pairs: list, batch_size: int = 250) -> float:
    model.eval()
    right = 0
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        inputs = tokenizer([s for s, _ in chunk], return_tensors="pt", padding=True)
        out = model.generate(**inputs, max_new_tokens=12, do_sample=False, num_beams=1)
        predictions = tokenizer.batch_decode(out, skip_special_tokens=True)
        right += sum(p == t for p, (_, t) in zip(predictions, chunk, strict=True))
    model.train()
    return right / len(pairs)


def train(args) -> dict:
    torch.set_num_threads(1)
    rng = random.Random(args.seed)
    train_pairs, held_out = split(rng, args.train_size, args.held_out_size)
    tokenizer = word_tokenizer([s for s, _ in train_pairs + held_out] + [t for _, t in train_pairs + held_out])
    model = model_for(len(tokenizer), args.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, args.steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, max(0.0, (args.steps - step) / (args.steps - warmup)))
    )
    history, begun = [], time.monotonic()
    model.train()
    for step, batch in zip(range(args.steps), batches(rng, train_pairs, args.batch_size), strict=False):
        loss = model(**encode(tokenizer, batch)).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            score = exact_match(model, tokenizer, held_out[: args.eval_size])
            history.append({"step": step + 1, "loss": round(loss.item(), 4), "held_out_exact_match": score})
            print(f"step {step + 1}: loss {loss.item():.4f}, held-out exact match {score:.4f}", flush=True)
    model.eval()
    return {
        "model": model,
        "tokenizer": tokenizer,
        "held_out": held_out,
        "train_size": len(train_pairs),
        "history": history,
        "seconds": round(time.monotonic() - begun, 1),
    }


def save(result: dict, args) -> dict:
    model, tokenizer, held_out = result["model"], result["tokenizer"], result["held_out"]
    args.output.mkdir(parents=True, exist_ok=True)
    model.generation_config = GenerationConfig(
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, max_new_tokens=12
    )
    model.save_pretrained(args.output, safe_serialization=True)
    tokenizer.save_pretrained(args.output)
    score = exact_match(model, tokenizer, held_out)
    args.heldout_file.parent.mkdir(parents=True, exist_ok=True)
    args.heldout_file.write_text(
        "".join(json.dumps({"source": s, "target": t}, ensure_ascii=False) + "\n" for s, t in held_out[:200]),
        encoding="utf-8",
    )
    metrics = {
        "settings": {k: _portable(v) for k, v in vars(args).items()},
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocabulary": len(tokenizer),
        "train_examples": result["train_size"],
        "held_out_examples": len(held_out),
        "held_out_exact_match": score,
        "history": result["history"],
        "train_seconds": result["seconds"],
        "threads": 1,
    }
    args.metrics.parent.mkdir(parents=True, exist_ok=True)
    args.metrics.write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    return metrics


def _portable(value):
    """Paths inside the repository are recorded relative to it (no machine-specific prefixes)."""
    if not isinstance(value, Path):
        return value
    return str(value.relative_to(REPO)) if value.is_relative_to(REPO) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--train-size", type=int, default=60000)
    parser.add_argument("--held-out-size", type=int, default=2000)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--eval-size", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=OUTPUT, help="model folder to write")
    parser.add_argument("--metrics", type=Path, default=METRICS, help="settings, loss history, exact match")
    parser.add_argument("--heldout-file", type=Path, default=HELD_OUT_FILE, help="200 held-out examples (JSONL)")
    args = parser.parse_args()
    metrics = save(train(args), args)
    print(json.dumps({k: v for k, v in metrics.items() if k != "history"}, indent=2))
    assert math.isfinite(metrics["held_out_exact_match"])


if __name__ == "__main__":
    main()
