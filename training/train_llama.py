"""Train the second bundled decoder (``explorer/assets/prose-llama``): a small Llama (RoPE, RMSNorm, grouped KV
heads, 512 positions) on ``corpus_v2.py``'s novels and Bible, with repeated passages mixed in so that induction
heads form (Olsson et al., 2022).

Two steps, so that the GPU gets only numbers::

    python training/train_llama.py prepare                    # CPU: corpus, split, tokenizer, token ids
    python training/train_llama.py train --device cuda --out /tmp/run   # GPU: --steps steps, then stops

``prepare`` writes ``--prep`` (default ``.llama_prep/``, ignored by git): ``train.npy`` / ``val.npy`` (uint16
token ids, chapters separated by ``<|endoftext|>``), the tokenizer files and ``corpus.json``. ``train`` reads
only that folder and writes the model folder (float16 safetensors, tokenizer, generation config) and
``metrics.json`` (settings, corpus, loss history, wall time, hardware) under ``--out``. The weights exported are
those of the evaluation with the lowest held-out loss (the corpus is small: later steps may overfit); with
``--export-last`` also the last step's. On a CPU, ``--ckpt-dir`` + ``--resume`` continue an interrupted run.

Reproducible: the learning rate depends on the step alone, the initial weights on ``--seed`` (drawn on the CPU,
whatever the device) and the batches on ``--seed`` alone; on a GPU, deterministic kernels are asked for
(``_make_repeatable``) and attention is the eager path (plain matrix products; under ``warn_only`` the fused
SDPA kernels would keep their non-deterministic backward). ``--time-limit`` is only a safety cap: a run it stops
is reported incomplete, the schedule never sees it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_decoder  # sibling module: split, tokenizer and stream helpers shared with prose-gpt2

REPO = Path(__file__).resolve().parent.parent
EOS = train_decoder.EOS
WORD_EDGES = ".,;:!?\"'()-"  # stripped from a word's ends before it is looked up (tests do the same)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stage", choices=("prepare", "train"))
    p.add_argument("--workdir", type=Path, default=Path("/tmp/prose_corpus"), help="corpus download dir")
    p.add_argument("--prep", type=Path, default=REPO / ".llama_prep", help="prepared token ids + tokenizer")
    p.add_argument("--out", type=Path, default=Path("/tmp/prose_llama_run"), help="model folder + metrics.json")
    p.add_argument("--test-data", type=Path, default=REPO / "tests/data", help="held-out sample + word list")
    p.add_argument("--ckpt-dir", type=Path, default=None, help="checkpoint at every evaluation (CPU runs)")
    p.add_argument("--resume", action="store_true", help="continue from --ckpt-dir/last.pt")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--device", default="cpu")
    p.add_argument("--val-frac", type=float, default=0.05, help="held-out tail of every book")
    p.add_argument("--vocab-size", type=int, default=8192)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--intermediate", type=int, default=704)
    p.add_argument("--context", type=int, default=512)
    p.add_argument("--dropout", type=float, default=0.0, help="attention dropout (Llama has no other)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=1300, help="the run's length, and the cosine schedule's")
    p.add_argument("--time-limit", type=float, default=None, help="safety cap in seconds (an incomplete run)")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr-frac", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--repeat-frac", type=float, default=0.3, help="rows of a batch that repeat a passage")
    p.add_argument("--random-frac", type=float, default=0.5, help="of those, passages of random tokens")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--export-last", action="store_true", help="also export the last step's weights (to --out/last)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (GPU)")
    p.add_argument("--attn", choices=("eager", "sdpa"), default="eager", help="attention kernel while training")
    return p.parse_args(argv)


# --------------------------------------------------------------------------- prepare (CPU)
def prepare(args) -> None:
    import corpus_v2  # needs apt-get and dpkg-deb: only this stage does

    docs = corpus_v2.load_documents(args.workdir)
    train_docs, val_docs = train_decoder.split_documents(docs, args.val_frac)
    tok = train_decoder.train_tokenizer([d.text for d in train_docs], args.vocab_size)
    train_ids = train_decoder.encode_stream(tok, train_docs).numpy().astype(np.uint16)
    val_ids = train_decoder.encode_stream(tok, val_docs).numpy().astype(np.uint16)
    args.prep.mkdir(parents=True, exist_ok=True)
    np.save(args.prep / "train.npy", train_ids)
    np.save(args.prep / "val.npy", val_ids)
    train_decoder.wrap_tokenizer(tok, args.context).save_pretrained(args.prep / "tokenizer")
    books = list(dict.fromkeys(d.book for d in docs))
    info = {
        "packages": corpus_v2.PACKAGES,
        "books": books,
        "words": {b: sum(len(d.text.split()) for d in docs if d.book == b) for b in books},
        "docs_train": len(train_docs),
        "docs_val": len(val_docs),
        "tokens_train": len(train_ids),
        "tokens_val": len(val_ids),
        "val_first_chapter": {b: next(d.text[:80] for d in val_docs if d.book == b) for b in books},
    }
    (args.prep / "corpus.json").write_text(json.dumps(info, indent=1))
    write_test_data(tok, train_docs, val_docs, args)
    print(json.dumps(info, indent=1), flush=True)


def write_test_data(tok, train_docs, val_docs, args) -> None:
    """For tests/test_prose_llama.py: ~350 tokens of the first held-out chapter of every book, and the words
    that occur at least 3 times in the training split (lower case, outer punctuation stripped)."""
    # The helper names its file as prose-gpt2's sample: it writes into --prep, never over that sample.
    sample = train_decoder.write_heldout_sample(tok, val_docs, args.prep, per_book_tokens=350)
    folder = args.test_data
    (folder / "prose_llama_heldout.txt").write_text(sample, encoding="utf-8")
    counts = Counter(w.strip(WORD_EDGES).lower() for d in train_docs for w in d.text.split())
    words = sorted(w for w, c in counts.items() if c >= 3 and w)
    (folder / "prose_llama_words.txt").write_text("\n".join(words) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- model
def build_model(args, vocab_size: int, eos_id: int) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=args.hidden,
        intermediate_size=args.intermediate,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        max_position_embeddings=args.context,
        rope_theta=10000.0,
        attention_dropout=args.dropout,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
        tie_word_embeddings=True,
        attn_implementation=args.attn,  # not saved in config.json: a loader picks its own
    )
    # Drawn on the CPU (then moved), so the initial weights depend on the seed, not on the device.
    return LlamaForCausalLM(config)


def make_optimizer(model, args):
    # No weight decay on norms' gains and the (tied) embedding, as for prose-gpt2.
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embed" not in n)]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), fused=args.device.startswith("cuda"))


def lr_at(step: int, args) -> float:
    """Linear warmup, then cosine decay to min_lr_frac * lr at ``args.steps``: a function of the step alone."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    done = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    floor = args.lr * args.min_lr_frac
    return floor + 0.5 * (args.lr - floor) * (1 + math.cos(math.pi * done))


# --------------------------------------------------------------------------- batches
def repeated_row(stream: np.ndarray, length: int, vocab: int, rng: np.random.Generator, random_frac: float):
    """One row that repeats a passage until ``length`` + 1 tokens: the text an induction head can predict.

    The passage (8-256 tokens) is real training text, or (``random_frac`` of rows) random tokens; a stretch of
    real text leads in so the first copy starts anywhere. Labels of a random passage's first copy are -100:
    nothing there can be predicted.
    """
    size = int(rng.integers(8, 257))
    if rng.random() < random_frac:
        passage, first_unpredictable = rng.integers(1, vocab, size), True
    else:
        start = int(rng.integers(0, len(stream) - size))
        passage, first_unpredictable = stream[start : start + size], False
    lead = int(rng.integers(0, size))
    s = int(rng.integers(0, len(stream) - lead))
    reps = math.ceil((length + 1) / size) + 1
    row = np.concatenate([stream[s : s + lead], np.tile(passage, reps)])[: length + 1].astype(np.int64)
    labels = row.copy()
    if first_unpredictable:
        labels[: lead + size] = -100
    return row, labels


def get_batch(stream: np.ndarray, args, vocab: int, rng: np.random.Generator):
    """(input_ids, labels) [batch, context]: random windows of the training text, some rows repeated passages."""
    rows, labels = [], []
    for _ in range(args.batch_size):
        if rng.random() < args.repeat_frac:
            row, label = repeated_row(stream, args.context, vocab, rng, args.random_frac)
        else:
            s = int(rng.integers(0, len(stream) - args.context - 1))
            row = stream[s : s + args.context + 1].astype(np.int64)
            label = row
        rows.append(row[:-1])
        labels.append(label[1:])  # shifted here: the model's own shift would drop the last token
    return torch.from_numpy(np.stack(rows)), torch.from_numpy(np.stack(labels))


def loss_of(model, x, y):
    logits = model(input_ids=x).logits
    return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), y.flatten(), ignore_index=-100)


@torch.no_grad()
def val_loss(model, val: torch.Tensor, context: int, device: str) -> float:
    """Mean loss over every non-overlapping window of the held-out chapters."""
    model.eval()
    n = (len(val) - 1) // context
    losses = []
    for chunk in torch.arange(n).split(32):
        x = torch.stack([val[i * context : (i + 1) * context] for i in chunk]).to(device)
        y = torch.stack([val[i * context + 1 : (i + 1) * context + 1] for i in chunk]).to(device)
        with _autocast(device):
            losses.append(loss_of(model, x, y).item() * len(chunk))
    model.train()
    return sum(losses) / n


def _autocast(device: str):
    # bf16 matrix products on the GPU, fp32 weights and optimizer state; plain fp32 on the CPU.
    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda"))


# --------------------------------------------------------------------------- train (GPU or CPU)
def _make_repeatable() -> None:
    """Ask for the same numbers on every run of the same settings on the same GPU, where that is cheap."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS starts: before any CUDA work
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)  # an op without such a kernel warns, never stops


def train(args) -> None:
    _make_repeatable()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)  # the batches: their order depends on the seed alone
    train_ids, val = np.load(args.prep / "train.npy"), torch.from_numpy(np.load(args.prep / "val.npy").astype(np.int64))
    hf_tok = PreTrainedTokenizerFast.from_pretrained(args.prep / "tokenizer")
    vocab = len(hf_tok)
    model = build_model(args, vocab, hf_tok.eos_token_id).to(args.device)
    opt = make_optimizer(model, args)
    step, history, best, losses = 0, [], {"val_loss": float("inf")}, []
    if args.resume:
        step, history, best, rng, losses = _resume(args, model, opt)
    forward = torch.compile(model) if args.compile else model
    t0, elapsed_before = time.time(), (history[-1]["elapsed_s"] if history else 0.0)
    last = history[-1]["train_loss"] if history else float("nan")
    model.train()
    while step < args.steps:
        if args.time_limit is not None and elapsed_before + time.time() - t0 >= args.time_limit:
            print(f"time limit: stopped at step {step} of {args.steps} (an incomplete run)", flush=True)
            break
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args)
        x, y = get_batch(train_ids, args, vocab, rng)
        with _autocast(args.device):
            loss = loss_of(forward, x.to(args.device, non_blocking=True), y.to(args.device, non_blocking=True))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        step, last = step + 1, loss.item()
        losses.append(last)
        if step % args.eval_every == 0:
            entry = _evaluate(model, val, args, step, last, elapsed_before + time.time() - t0, opt)
            history.append(entry)
            if entry["val_loss"] < best["val_loss"]:
                best = {"step": step, "val_loss": entry["val_loss"], "state": _cpu_state(model)}
            if args.ckpt_dir:
                _checkpoint(args, model, opt, step, history, best, rng, losses)
    wall = elapsed_before + time.time() - t0
    if not history or history[-1]["step"] != step:  # the last step, unless just evaluated
        entry = _evaluate(model, val, args, step, last, wall, opt)
        history.append(entry)
        if entry["val_loss"] < best["val_loss"]:
            best = {"step": step, "val_loss": entry["val_loss"], "state": _cpu_state(model)}
    if args.ckpt_dir:
        _checkpoint(args, model, opt, step, history, best, rng, losses)
    if args.export_last:
        export(model.float().cpu(), hf_tok, args.out / "last")
    model.load_state_dict(best["state"])
    export(model.float().cpu(), hf_tok, args.out / "model")
    _write_metrics(args, model, history, best, step, wall, losses)


def _evaluate(model, val, args, step, train_loss, elapsed, opt) -> dict:
    entry = {
        "step": step,
        "lr": opt.param_groups[0]["lr"],
        "train_loss": train_loss,
        "val_loss": val_loss(model, val, args.context, args.device),
        "elapsed_s": round(elapsed, 2),
    }
    print(json.dumps(entry), flush=True)
    return entry


def _cpu_state(model) -> dict:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def _checkpoint(args, model, opt, step, history, best, rng, losses) -> None:
    args.ckpt_dir.mkdir(parents=True, exist_ok=True)
    state = {"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "history": history}
    state["train_losses"] = losses
    state |= {"best": best, "rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state()}
    tmp = args.ckpt_dir / "last.tmp"
    torch.save(state, tmp)
    tmp.replace(args.ckpt_dir / "last.pt")  # atomic: a crash never leaves a half-written checkpoint


def _resume(args, model, opt):
    state = torch.load(args.ckpt_dir / "last.pt", weights_only=False)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    torch.set_rng_state(state["torch_rng"])
    rng = np.random.default_rng()
    rng.bit_generator.state = state["rng"]
    print(f"resumed at step {state['step']}", flush=True)
    return state["step"], state["history"], state["best"], rng, state.get("train_losses", [])


def export(model, hf_tok, folder: Path) -> None:
    """The self-contained folder: float16 safetensors (half the bytes; explorer loads them as float32)."""
    folder.mkdir(parents=True, exist_ok=True)
    eos = hf_tok.eos_token_id
    model.config.attention_dropout = 0.0  # trained with it; inference never drops, and the config says so
    model.generation_config = GenerationConfig(bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    model.half().save_pretrained(folder, safe_serialization=True)
    model.float()
    hf_tok.save_pretrained(folder)


def _write_metrics(args, model, history, best, step, wall, losses) -> None:
    gpu = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "none"
    metrics = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "corpus": json.loads((args.prep / "corpus.json").read_text()),
        "params": sum(p.numel() for p in model.parameters()),
        "steps": step,
        "complete": step == args.steps,  # False: --time-limit stopped it before --steps
        "tokens_seen": step * args.batch_size * args.context,
        "best_step": best["step"],
        "best_val_loss": best["val_loss"],
        "wall_time_s": round(wall, 1),
        "hardware": {
            "gpu": gpu,
            "cpu": platform.processor() or platform.machine(),
            "python": platform.python_version(),
        },
        "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__},
        "history": history,
        "train_losses": losses,  # every step's batch loss: two runs of the same settings compare step by step
    }
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=1))
    print(f"done: {step} steps in {wall:.0f} s; best val loss {best['val_loss']:.4f} at step {best['step']}")


def main(argv=None) -> None:
    args = parse_args(argv)
    prepare(args) if args.stage == "prepare" else train(args)


if __name__ == "__main__":
    main()
