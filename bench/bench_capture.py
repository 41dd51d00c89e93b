"""How much does capture cost over the forward pass it records?

For each model and input length this times, interleaved on the same input:
  reference  a plain eager forward with ``output_attentions=True`` (a separate copy of the model that
             never saw the explorer's recording attention)
  capture    ``explorer.capture`` (forward + copying queries, keys and weights into the data contract)
  + verify   ``capture(...).verify()`` on top
and prints medians and ratios against the reference. Target: capture within 1.2x of the reference.

Run:  python bench/bench_capture.py [--repeats 5] [--lengths 16 128 512] [--gpt2 12 12 768]
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

import torch
from transformers import AutoModel, AutoModelForCausalLM, GPT2Config

import explorer
from explorer.models.loading import resolve_source

GPT2_SMALL = (12, 12, 768)  # layers, heads, width


def text_of_length(tokenizer, num_tokens: int) -> str:
    """Prose that tokenizes to exactly ``num_tokens`` tokens (special tokens included)."""
    words = ("the quick brown fox jumps over the lazy dog while time flies like an arrow " * 200).split()
    special = len(tokenizer("x")["input_ids"]) - len(tokenizer("x", add_special_tokens=False)["input_ids"])
    ids = tokenizer(" ".join(words), add_special_tokens=False)["input_ids"][: num_tokens - special]
    text = tokenizer.decode(ids)
    assert len(tokenizer(text)["input_ids"]) == num_tokens, "text does not round-trip to the asked length"
    return text


def gpt2_shaped_folder(tokenizer, shape: tuple[int, int, int] = GPT2_SMALL) -> Path:
    """A random GPT-2 of ``shape`` (layers, heads, width; GPT-2 small's by default) saved with a tokenizer, so it
    loads like any model."""
    folder = Path(tempfile.mkdtemp(prefix="bench-gpt2-"))
    torch.manual_seed(0)
    layers, heads, width = shape
    config = GPT2Config(n_layer=layers, n_head=heads, n_embd=width, n_positions=1024, vocab_size=len(tokenizer))
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def synchronize(device: str) -> None:
    """Wait for the GPU: its kernels run asynchronously, and a timer must stop when they are done."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_seconds(fn, repeats: int, device: str = "cpu") -> list[float]:
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return times


def bench_model(label, lm, reference, lengths, repeats):
    rows = []
    for length in lengths:
        text = text_of_length(lm.tokenizer, length)
        inputs = lm.tokenizer(text, return_tensors="pt").to(lm.device)
        if lm.kind == "decoder":
            inputs.pop("token_type_ids", None)

        def plain(inputs=inputs):
            with torch.inference_mode():
                out = reference(**inputs, output_attentions=True)
            assert len(out.attentions) == lm.num_layers

        def captured(text=text):
            explorer.capture(lm, text)

        def verified(text=text):
            explorer.capture(lm, text).verify()

        for fn in (plain, captured, verified):  # warm-up
            fn()
        samples = {"reference": [], "capture": [], "capture+verify": []}
        for _ in range(repeats):  # interleaved, so machine noise hits all three alike
            for name, fn in (("reference", plain), ("capture", captured), ("capture+verify", verified)):
                samples[name] += median_seconds(fn, 1, str(lm.device))
        med = {name: statistics.median(values) for name, values in samples.items()}
        rows.append((label, length, med["reference"], med["capture"], med["capture+verify"]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 128, 512])
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, ...: where both sides run")
    parser.add_argument(
        "--gpt2", type=int, nargs=3, default=GPT2_SMALL, metavar=("LAYERS", "HEADS", "WIDTH"),
        help="the random GPT-2's shape (default: GPT-2 small's, 12 12 768; the tests run a tiny one)",
    )  # fmt: skip
    args = parser.parse_args()

    minilm = explorer.load_model(explorer.DEFAULT_ENCODER, device=args.device)
    minilm_ref = AutoModel.from_pretrained(resolve_source(explorer.DEFAULT_ENCODER), attn_implementation="eager")
    gpt2_folder = gpt2_shaped_folder(minilm.tokenizer, tuple(args.gpt2))
    gpt2 = explorer.load_model(str(gpt2_folder), device=args.device)
    gpt2_ref = AutoModelForCausalLM.from_pretrained(gpt2_folder, attn_implementation="eager").to(args.device)
    minilm_ref.to(args.device)
    rows = bench_model("MiniLM-L6 (6x12)", minilm, minilm_ref.eval(), args.lengths, args.repeats)
    shape = f"GPT-2-shaped ({args.gpt2[0]}x{args.gpt2[1]})"
    rows += bench_model(shape, gpt2, gpt2_ref.eval(), args.lengths, args.repeats)

    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else f"{torch.get_num_threads()} threads"
    print(f"torch {torch.__version__}, {args.device} ({where}), median of {args.repeats}")
    print("| model | tokens | reference ms | capture ms | capture+verify ms | capture / ref | +verify / ref |")
    print("|---|---|---|---|---|---|---|")
    for label, length, ref, cap, ver in rows:
        print(
            f"| {label} | {length} | {ref * 1e3:.1f} | {cap * 1e3:.1f} | {ver * 1e3:.1f} | "
            f"{cap / ref:.2f}x | {ver / ref:.2f}x |"
        )


if __name__ == "__main__":
    main()
