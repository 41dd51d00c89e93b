"""Train the bundled prose decoder (``explorer/assets/prose-gpt2``) from scratch.

Reproduce the shipped model (CPU, one thread, about an hour)::

    python training/train_decoder.py

The corpus is fetched with ``apt-get download`` (Debian bookworm packages
``r-cran-janeaustenr`` and ``r-cran-tokenizers``) into ``--workdir``; see
``training/corpus.py``.  Everything random is seeded, so a rerun on the same
software versions gives the same tokenizer and (up to floating-point
non-determinism across CPUs) the same weights.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    GenerationConfig,
    GPT2Config,
    GPT2LMHeadModel,
    PreTrainedTokenizerFast,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus  # sibling module: the script runs without packaging

REPO = Path(__file__).resolve().parent.parent
EOS = "<|endoftext|>"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/prose_corpus"),
        help="corpus download dir",
    )
    p.add_argument(
        "--ckpt-dir",
        type=Path,
        default=Path("/tmp/prose_ckpt"),
        help="checkpoints (not in repo)",
    )
    p.add_argument("--out", type=Path, default=REPO / "explorer/assets/prose-gpt2")
    p.add_argument("--metrics", type=Path, default=REPO / "training/metrics.json")
    p.add_argument("--test-data", type=Path, default=REPO / "tests/data")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--val-frac", type=float, default=0.05, help="held-out tail of every book")
    p.add_argument("--vocab-size", type=int, default=6144)
    p.add_argument("--n-layer", type=int, default=5)
    p.add_argument("--n-head", type=int, default=6)
    p.add_argument("--n-embd", type=int, default=192)
    p.add_argument("--block-size", type=int, default=256, help="context length (n_positions)")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--batch-size", type=int, default=12)
    p.add_argument("--steps", type=int, default=1600)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr-frac", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument(
        "--eval-windows",
        type=int,
        default=24,
        help="val windows for the quick periodic eval",
    )
    p.add_argument("--resume", action="store_true", help="continue from --ckpt-dir/last.pt")
    p.add_argument(
        "--probe",
        type=int,
        default=0,
        help="time N steps, print tokens/s, save nothing",
    )
    return p.parse_args(argv)


# --------------------------------------------------------------------------- data
def split_documents(docs, val_frac):
    """Hold out the last chapters of every book (>= val_frac of its words).

    Whole chapters at the end of each novel, so no sentence in validation
    overlaps training and every author/book is represented.
    """
    train, val = [], []
    for book in dict.fromkeys(d.book for d in docs):
        chapters = [d for d in docs if d.book == book]
        total = sum(len(d.text.split()) for d in chapters)
        held, words = [], 0
        while words < val_frac * total:
            held.insert(0, chapters.pop())
            words += len(held[0].text.split())
        train += chapters
        val += held
    return train, val


def train_tokenizer(texts, vocab_size) -> Tokenizer:
    """Byte-level BPE (GPT-2 style) trained on the training split only."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def encode_stream(tok: Tokenizer, docs) -> torch.Tensor:
    """Concatenate documents, each followed by <|endoftext|>."""
    eos = tok.token_to_id(EOS)
    ids = []
    for enc in tok.encode_batch([d.text for d in docs]):
        ids.extend(enc.ids)
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.long)


def wrap_tokenizer(tok: Tokenizer, block_size: int) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOS,
        eos_token=EOS,
        pad_token=EOS,
        unk_token=EOS,
        model_max_length=block_size,
        clean_up_tokenization_spaces=False,
    )


# --------------------------------------------------------------------------- model
def build_model(args, vocab_size: int, eos_id: int) -> GPT2LMHeadModel:
    config = GPT2Config(
        vocab_size=vocab_size,
        n_positions=args.block_size,
        n_embd=args.n_embd,
        n_layer=args.n_layer,
        n_head=args.n_head,
        resid_pdrop=args.dropout,
        embd_pdrop=args.dropout,
        attn_pdrop=args.dropout,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
        tie_word_embeddings=True,
    )
    return GPT2LMHeadModel(config)


def make_optimizer(model, args):
    # No weight decay on biases, LayerNorm gains and embeddings (standard GPT practice).
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (decay if param.dim() >= 2 and "wte" not in name and "wpe" not in name else no_decay).append(param)
    groups = [
        {"params": decay, "weight_decay": args.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95))


def lr_at(step: int, args) -> float:
    """Linear warmup, then cosine decay to min_lr_frac * lr."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    floor = args.lr * args.min_lr_frac
    return floor + 0.5 * (args.lr - floor) * (1 + math.cos(math.pi * progress))


def get_batch(stream: torch.Tensor, args, gen: torch.Generator) -> torch.Tensor:
    """Random windows of block_size tokens (GPT2LMHeadModel shifts labels itself)."""
    starts = torch.randint(0, len(stream) - args.block_size, (args.batch_size,), generator=gen)
    return torch.stack([stream[s : s + args.block_size] for s in starts])


# --------------------------------------------------------------------------- evaluation
@torch.no_grad()
def window_stats(model, ids: torch.Tensor, block: int, stride: int):
    """Per-token NLL and top-1 probability with sliding windows.

    Every token after the first is predicted exactly once, with at least
    ``block - stride`` tokens of context once the first window is full.
    Returns (nll, top1_prob, target_ids) as 1-D tensors.
    """
    model.eval()
    nlls, top1, targets = [], [], []
    prev_end = 1  # position 0 has no context and is never scored
    for begin in range(0, len(ids) - 1, stride):
        end = min(begin + block, len(ids))
        window = ids[begin:end].unsqueeze(0)
        logp = torch.log_softmax(model(window).logits[0, :-1].float(), dim=-1)
        tgt = ids[begin + 1 : end]
        keep = slice(prev_end - begin - 1, None)  # only tokens not scored yet
        nlls.append(-logp[keep].gather(1, tgt[keep].unsqueeze(1)).squeeze(1))
        top1.append(logp[keep].max(dim=-1).values.exp())
        targets.append(tgt[keep])
        prev_end = end
        if end == len(ids):
            break
    return torch.cat(nlls), torch.cat(top1), torch.cat(targets)


@torch.no_grad()
def quick_loss(model, stream: torch.Tensor, block: int, n_windows: int) -> float:
    """Mean loss over n evenly spaced non-overlapping windows (cheap, for logging)."""
    model.eval()
    n_windows = min(n_windows, (len(stream) - 1) // block)
    starts = torch.linspace(0, len(stream) - block - 1, n_windows).long()
    x = torch.stack([stream[s : s + block] for s in starts])
    loss = model(x, labels=x).loss.item()
    model.train()
    return loss


def unigram_counts(train_stream: torch.Tensor, vocab_size: int) -> list[int]:
    return torch.bincount(train_stream, minlength=vocab_size).tolist()


def unigram_nll(counts: list[int], targets: torch.Tensor) -> torch.Tensor:
    """Add-one smoothed unigram NLL of each target token."""
    c = torch.tensor(counts, dtype=torch.float64)
    logp = torch.log((c + 1) / (c.sum() + len(c)))
    return -logp[targets]


# --------------------------------------------------------------------------- checkpoints
def save_checkpoint(path: Path, model, opt, step: int, history) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    state = {
        "model": model.state_dict(),
        "opt": opt.state_dict(),
        "step": step,
        "history": history,
    }
    state["rng"] = torch.get_rng_state()
    torch.save(state, tmp)
    tmp.replace(path)  # atomic: a crash never leaves a half-written checkpoint


def export(model, hf_tok, folder: Path) -> None:
    """Write the self-contained HF folder (safetensors weights + tokenizer)."""
    folder.mkdir(parents=True, exist_ok=True)
    eos = hf_tok.eos_token_id
    model.generation_config = GenerationConfig(bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    model.save_pretrained(folder, safe_serialization=True)
    hf_tok.save_pretrained(folder)


# --------------------------------------------------------------------------- main loop
def train(model, opt, train_stream, val_stream, args, start_step=0, history=None):
    gen = torch.Generator().manual_seed(args.seed + start_step)
    history = history or []
    tokens_per_step = args.batch_size * args.block_size
    t0, last_loss = time.time(), float("nan")
    model.train()
    for step in range(start_step, args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args)
        x = get_batch(train_stream, args, gen)
        loss = model(x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        last_loss = loss.item() if step == start_step else 0.9 * last_loss + 0.1 * loss.item()
        if args.probe and step + 1 - start_step >= args.probe:
            rate = tokens_per_step * args.probe / (time.time() - t0)
            print(
                f"probe: {rate:.0f} tokens/s, {(time.time() - t0) / args.probe:.2f} s/step",
                flush=True,
            )
            return history
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            entry = log_eval(
                model,
                train_stream,
                val_stream,
                args,
                step + 1,
                last_loss,
                t0,
                start_step,
            )
            history.append(entry)
            save_checkpoint(args.ckpt_dir / "last.pt", model, opt, step + 1, history)
    return history


def log_eval(model, train_stream, val_stream, args, step, smooth_loss, t0, start_step):
    entry = {
        "step": step,
        "lr": lr_at(step - 1, args),
        "train_loss_smoothed": smooth_loss,
        "train_loss": quick_loss(model, train_stream, args.block_size, args.eval_windows),
        "val_loss": quick_loss(model, val_stream, args.block_size, args.eval_windows),
        "elapsed_s": time.time() - t0,
    }
    rate = (step - start_step) / entry["elapsed_s"]
    eta = (args.steps - step) / max(rate, 1e-9)
    print(json.dumps(entry) + f"  eta {eta / 60:.1f} min", flush=True)
    return entry


def final_metrics(model, val_stream, counts, args) -> dict:
    stride = args.block_size // 2
    nll, top1, targets = window_stats(model, val_stream, args.block_size, stride)
    uni = unigram_nll(counts, targets)
    ppl, uni_ppl = math.exp(nll.mean().item()), math.exp(uni.mean().item())
    return {
        "val_tokens_scored": len(targets),
        "val_loss": nll.mean().item(),
        "val_ppl": ppl,
        "unigram_ppl": uni_ppl,
        "ppl_ratio_unigram_over_model": uni_ppl / ppl,
        "median_top1_prob": top1.median().item(),
        "window": args.block_size,
        "stride": stride,
    }


def write_heldout_sample(tok: Tokenizer, val_docs, folder: Path, per_book_tokens=400) -> str:
    """A few hundred tokens from the held-out chapters of every book, for tests."""
    parts = []
    for book in dict.fromkeys(d.book for d in val_docs):
        paras = next(d for d in val_docs if d.book == book).text.split("\n")
        chosen, n = [], 0
        for para in paras:
            if n >= per_book_tokens:
                break
            chosen.append(para)
            n += len(tok.encode(para).ids)
        parts.append("\n".join(chosen))
    folder.mkdir(parents=True, exist_ok=True)
    text = "\n\n".join(parts) + "\n"
    (folder / "prose_heldout.txt").write_text(text, encoding="utf-8")
    return text


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t_start = time.time()

    docs = corpus.load_documents(args.workdir)
    train_docs, val_docs = split_documents(docs, args.val_frac)
    tok = train_tokenizer([d.text for d in train_docs], args.vocab_size)
    train_stream, val_stream = (
        encode_stream(tok, train_docs),
        encode_stream(tok, val_docs),
    )
    print(
        f"docs train={len(train_docs)} val={len(val_docs)}; tokens train={len(train_stream)} "
        f"val={len(val_stream)}; vocab={tok.get_vocab_size()}",
        flush=True,
    )
    hf_tok = wrap_tokenizer(tok, args.block_size)
    model = build_model(args, tok.get_vocab_size(), hf_tok.eos_token_id)
    opt = make_optimizer(model, args)
    start_step, history = resume(model, opt, args)

    history = train(model, opt, train_stream, val_stream, args, start_step, history)
    if args.probe:
        return
    export(model, hf_tok, args.out)
    counts = unigram_counts(train_stream, tok.get_vocab_size())
    write_outputs(
        args,
        model,
        tok,
        docs,
        train_docs,
        val_docs,
        train_stream,
        val_stream,
        counts,
        history,
        t_start,
    )


def resume(model, opt, args):
    ckpt = args.ckpt_dir / "last.pt"
    if not (args.resume and ckpt.exists()):
        return 0, []
    state = torch.load(ckpt, weights_only=False)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    torch.set_rng_state(state["rng"])
    print(f"resumed at step {state['step']}", flush=True)
    return state["step"], state["history"]


def write_outputs(
    args,
    model,
    tok,
    docs,
    train_docs,
    val_docs,
    train_stream,
    val_stream,
    counts,
    history,
    t_start,
):
    metrics = final_metrics(model, val_stream, counts, args)
    print(json.dumps(metrics, indent=1), flush=True)
    args.test_data.mkdir(parents=True, exist_ok=True)
    (args.test_data / "prose_unigram_counts.json").write_text(
        json.dumps({"vocab_size": len(counts), "total": int(sum(counts)), "counts": counts}) + "\n"
    )
    write_heldout_sample(tok, val_docs, args.test_data)
    summary = {
        "args": {k: _portable(v) for k, v in vars(args).items()},
        "corpus": corpus_summary(docs, train_docs, val_docs, train_stream, val_stream),
        "params": sum(p.numel() for p in model.parameters()),
        "tokens_seen": args.steps * args.batch_size * args.block_size,
        "epochs": args.steps * args.batch_size * args.block_size / len(train_stream),
        "wall_time_s": time.time() - t_start,
        "hardware": {
            "cpu": cpu_name(),
            "torch_threads": args.threads,
            "gpu": "none",
            "python": platform.python_version(),
        },
        "versions": {
            "torch": torch.__version__,
            "transformers": __import__("transformers").__version__,
        },
        "history": history,
        "final": metrics,
    }
    args.metrics.write_text(json.dumps(summary, indent=1) + "\n")


def _portable(value):
    """Paths inside the repository are recorded relative to it (no machine-specific prefixes)."""
    if not isinstance(value, Path):
        return value
    return str(value.relative_to(REPO)) if value.is_relative_to(REPO) else str(value)


def corpus_summary(docs, train_docs, val_docs, train_stream, val_stream) -> dict:
    return {
        "packages": [f"{pkg}={ver}" for pkg, ver, _, _ in corpus.SOURCES],
        "books": list(dict.fromkeys(d.book for d in docs)),
        "words_total": sum(len(d.text.split()) for d in docs),
        "chars_total": sum(len(d.text) for d in docs),
        "docs_train": len(train_docs),
        "docs_val": len(val_docs),
        "tokens_train": len(train_stream),
        "tokens_val": len(val_stream),
    }


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    main()
