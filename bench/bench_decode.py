"""How much does recording a decoding cost over ``generate()`` with the same settings?

A random GPT-2-shaped model (12 layers, 12 heads, 768 wide, vocabulary 50257) loaded through
``explorer.load_model`` (so both sides use the same attention implementation), 32 new tokens, greedy
search (1 beam) and beam search with 4 and 8 beams, on a short and a long prompt. Interleaved runs;
medians; ratios of ``explorer.decode`` to ``model.generate()``. Target: within 1.1x.

It also prints what each keeps: the trace's bytes (top candidates per step, the whole beam tree)
against what ``generate(output_scores=True)`` holds (the full vocabulary for every beam and step).

Run:  python bench/bench_decode.py [--repeats 3] [--new-tokens 32] [--gpt2 12 12 768]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GPT2Config

import explorer
from explorer.models.decoding import generation_config_for
from explorer.models.loading import resolve_source

VOCAB = 50257
GPT2_SMALL = (12, 12, 768)  # layers, heads, width
PROMPT_WORDS = "It is a truth universally acknowledged, that a single man in possession of a good fortune "


def gpt2_shaped_folder(shape: tuple[int, int, int] = GPT2_SMALL) -> Path:
    """A GPT-2 of ``shape`` (layers, heads, width; GPT-2 small's by default) with random weights, saved with the
    bundled tokenizer (ids past it stay unused)."""
    folder = Path(tempfile.mkdtemp(prefix="bench-decode-"))
    tokenizer = AutoTokenizer.from_pretrained(resolve_source(explorer.DEFAULT_DECODER))
    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=shape[0],
        n_head=shape[1],
        n_embd=shape[2],
        n_positions=1024,
        vocab_size=VOCAB,
        eos_token_id=VOCAB - 1,
        bos_token_id=VOCAB - 1,  # an id the tokenizer never makes: all 32 steps run
    )
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    tokenizer.model_max_length = config.n_positions  # the bundled tokenizer says 256, its model's context
    tokenizer.save_pretrained(folder)
    return folder


def prompt_of_length(tokenizer, length: int) -> str:
    ids = tokenizer(PROMPT_WORDS * 40)["input_ids"][:length]
    return tokenizer.decode(ids)


def trace_bytes(trace) -> int:
    """Bytes of the arrays a trace keeps (steps' candidates and prefixes) plus its tree nodes (~100 B each)."""
    total = sum(array.nbytes for array in trace.sequences)
    for step in trace.steps:
        total += sum(
            getattr(step, name).nbytes
            for name in (
                "candidate_ids",
                "candidate_logprobs",
                "candidate_probs",
                "chosen_ids",
                "entropy",
                "raw_entropy",
            )
        )
        total += sum(prefix.nbytes for prefix in step.prefix_ids)
    return total + 100 * len(trace.tree)


def synchronize(device: str) -> None:
    """Wait for the GPU: its kernels run asynchronously, and a timer must stop when they are done."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def bench(lm, prompt: str, beams: int, new_tokens: int, repeats: int) -> dict:
    strategy = "greedy" if beams == 1 else "beam"
    settings = dict(strategy=strategy, max_new_tokens=new_tokens, num_beams=beams)
    trace = explorer.decode(lm, prompt, **settings)
    config = generation_config_for(lm, trace.settings)
    ids = lm.tokenizer(prompt, return_tensors="pt")["input_ids"].to(lm.device)

    def generated():
        with torch.inference_mode():
            return lm.model.generate(ids, generation_config=config)

    def decoded():
        return explorer.decode(lm, prompt, **settings)

    reference = generated()
    assert trace.sequences[0].tolist() == reference.sequences[0, : len(trace.sequences[0])].tolist()
    times = {"generate": [], "decode": []}
    for _ in range(repeats):  # interleaved, so machine noise hits both alike
        for name, fn in (("generate", generated), ("decode", decoded)):
            synchronize(str(lm.device))
            start = time.perf_counter()
            fn()
            synchronize(str(lm.device))
            times[name].append(time.perf_counter() - start)
    scores_bytes = sum(score.numel() * score.element_size() for score in reference.scores)
    return {
        "prompt": ids.shape[1],
        "beams": beams,
        "steps": trace.num_steps,
        "generate": statistics.median(times["generate"]),
        "decode": statistics.median(times["decode"]),
        "trace_bytes": trace_bytes(trace),
        "scores_bytes": scores_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--prompt-lengths", type=int, nargs="+", default=[8, 256])
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, ...")
    parser.add_argument(
        "--gpt2", type=int, nargs=3, default=GPT2_SMALL, metavar=("LAYERS", "HEADS", "WIDTH"),
        help="the random GPT-2's shape (default: GPT-2 small's, 12 12 768; the tests run a tiny one)",
    )  # fmt: skip
    args = parser.parse_args()
    lm = explorer.load_model(str(gpt2_shaped_folder(tuple(args.gpt2))), device=args.device)
    rows = [
        bench(lm, prompt_of_length(lm.tokenizer, length), beams, args.new_tokens, args.repeats)
        for length in args.prompt_lengths
        for beams in args.beams
    ]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {lm.device}, median of {args.repeats}")
    print(
        "| prompt tokens | beams | steps | generate() s | decode s | decode / generate | trace kB | "
        "generate scores kB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['prompt']} | {r['beams']} | {r['steps']} | {r['generate']:.2f} | {r['decode']:.2f} | "
            f"{r['decode'] / r['generate']:.2f}x | {r['trace_bytes'] / 1e3:.0f} | {r['scores_bytes'] / 1e3:,.0f} |"
        )
    ratios = [r["decode"] / r["generate"] for r in rows]
    print(f"geometric mean decode / generate: {float(np.exp(np.mean(np.log(ratios)))):.2f}x")


if __name__ == "__main__":
    main()
