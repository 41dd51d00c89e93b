"""What limits integrated gradients on T5 at 64 points: the path's integrand, measured (issue 30, part 1).

For the tiny T5 built from a config (the tests' ``tiny_models``) and the bundled dates-t5, along the straight
path from the all-zero input embeddings, f(α) = log p(target | α·x) (``explorer.models.attribution``'s own
function) and the integrand α·f'(α) = Σ_tokens ∇f(α·x)·x · α. Prints, per model:

  where f moves     Σ|Δf| per two decades of α (read at 100 points a decade), against the change f(1) − f(0)
  float64           a float64 copy of the model (its RMSNorms' variance in float64 too): the largest gaps of f and
                    of α·f' from float32's on the same points
  ReLU kinks        sign changes of the feed-forward ReLUs' inputs along the path (200 points a decade): each is a
                    jump of f', which no polynomial rule integrates faster than first order
  a fine rule       on the panel where 16 Gauss-Legendre points miss most: midpoint rules of 128 … 8192 points
                    against f(end) − f(start) (continuous f: a fine enough rule closes completeness)
  the floor         2-point Gauss-Legendre panels placed by the integrand's roughness (read off the 100-a-decade
                    forward reads), shifted at random 8 times: the relative completeness error's rms at 64, 256
                    and 1,024 points, what an unbiased rule of that size can promise
  attribute         ``explorer.attribute``'s own delta / change at 64 and 256 steps

Run:  python bench/bench_ig_path.py [--model dates-t5]   (a few minutes on a CPU core; --model, repeatable, picks
      one of the two, and the tests run the tiny T5 alone)
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import itertools
import os
import sys
import tempfile
import types
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch

import explorer
from explorer.models import attribution
from tests.tiny_models import save_tiny

TEXTS = {"tiny T5": "the cat sat on the mat and the dog ran to", "dates-t5": "Thursday, March 5, 2021"}
DENSE = np.logspace(-20, 0, 2001)  # f is flat below 10⁻²⁰ in both models (|Δf| < 2e-5 from 10⁻⁴⁰ up to there)


def rms_norm_in_float64(module, hidden):
    # T5LayerNorm takes the variance in float32 whatever the dtype: the copy's must not, or it is no float64 copy
    return module.weight * (hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + module.variance_epsilon))


def float64_copy(lm):
    model = copy.deepcopy(lm.model).double()
    for module in model.modules():
        if type(module).__name__ == "T5LayerNorm":
            module.forward = types.MethodType(rms_norm_in_float64, module)
    return dataclasses.replace(lm, model=model)


def path_function(lm, text: str, dtype=torch.float32):
    """(f at a batch of α, α·∇f·x per token at a batch of α, the ReLUs' input signs at a batch of α)."""
    _, _, embeddings, mask = attribution._prediction(lm, text)
    start = torch.tensor([[lm.model.config.decoder_start_token_id]])

    def logprobs(inputs):
        decoder_ids = start.expand(len(inputs), 1)
        kwargs = {"inputs_embeds": inputs, "attention_mask": mask.expand(len(inputs), -1), "use_cache": False}
        return torch.log_softmax(lm.model(decoder_input_ids=decoder_ids, **kwargs).logits[:, -1].to(dtype), -1)

    x = embeddings.to(dtype)
    with torch.no_grad():
        target = int(logprobs(x)[0].argmax())

    def scaled(alphas):
        return torch.tensor(alphas, dtype=dtype).view(-1, 1, 1) * x

    def f(alphas):
        with torch.no_grad():
            return np.concatenate([logprobs(scaled(a))[:, target].double().numpy() for a in _chunks(alphas)])

    def integrand(alphas):
        rows = []
        for chunk in _chunks(alphas):
            points = scaled(chunk).requires_grad_()
            (gradient,) = torch.autograd.grad(logprobs(points)[:, target].sum(), points)
            rows.append((gradient * x).sum(-1).double().numpy())
        return np.concatenate(rows)

    def relu_signs(alphas):
        seen = []
        hooks = [
            module.act.register_forward_hook(lambda _, inputs, out: seen.append(inputs[0].flatten(1) > 0))
            for module in lm.model.modules()
            if type(module).__name__ == "T5DenseActDense"
        ]
        rows = []
        with torch.no_grad():
            for chunk in _chunks(alphas):
                seen.clear()
                logprobs(scaled(chunk))
                rows.append(torch.cat(seen, 1).numpy())
        for hook in hooks:
            hook.remove()
        return np.concatenate(rows)

    return f, integrand, relu_signs


def _chunks(alphas, size: int = 64):
    return [alphas[start : start + size] for start in range(0, len(alphas), size)]


def gauss_legendre(edges: np.ndarray, count: int, in_log: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``count`` points a panel, uniform in log α (in α on a panel from 0, or everywhere), and their weights."""
    nodes, weights = np.polynomial.legendre.leggauss(count)
    alphas, sizes = [], []
    for low, high in itertools.pairwise(edges):
        if low == 0 or not in_log:
            alphas.append(low + (high - low) * (nodes + 1) / 2)
            sizes.append((high - low) * weights / 2)
            continue
        logs = np.log(low) + (np.log(high) - np.log(low)) * (nodes + 1) / 2
        alphas.append(np.exp(logs))
        sizes.append(np.exp(logs) * (np.log(high) - np.log(low)) * weights / 2)
    return np.concatenate(alphas), np.concatenate(sizes)


def report(name: str, lm, text: str, rng) -> None:
    f, integrand, relu_signs = path_function(lm, text)
    along = f(DENSE)
    change = float(f(np.array([1.0]))[0] - f(np.array([0.0]))[0])
    steps = np.abs(np.diff(along))
    decades = np.log10(DENSE[1:])
    print(f"\n## {name}: “{text}”, change f(1) − f(0) = {change:.4f}, Σ|Δf| on the path = {steps.sum():.3f}")

    finer = np.logspace(-20, 0, 4001)
    signs = relu_signs(finer)
    kinks, kink_decades = (signs[1:] != signs[:-1]).sum(1), np.log10(finer[1:])
    print("| α from | Σ|Δf| | ReLU sign changes |\n|---|---|---|")
    for low in range(-20, 0, 2):
        cells, turns = (decades > low) & (decades <= low + 2), (kink_decades > low) & (kink_decades <= low + 2)
        print(f"| 1e{low} | {steps[cells].sum():.2e} | {kinks[turns].sum()} |")

    wide_f, wide_integrand, _ = path_function(float64_copy(lm), text, torch.float64)
    gap_f = np.abs(wide_f(DENSE) - along).max()
    wide = DENSE * wide_integrand(DENSE).sum(1)
    narrow = DENSE * integrand(DENSE).sum(1)
    print(
        f"float32 against float64: max |Δf| {gap_f:.1e}, max |Δ(α·f')| {np.abs(wide - narrow).max():.1e} "
        f"(max |α·f'| {np.abs(wide).max():.2f})"
    )

    sixths = np.concatenate([[0.0], np.logspace(-32, 0, 193)])
    alphas, sizes = gauss_legendre(sixths, 16, in_log=False)  # the test's exact_path_integral, point for point
    per_panel = (sizes * integrand(alphas).sum(1)).reshape(-1, 16).sum(1)
    misses = per_panel - np.diff(f(sixths))
    worst = int(np.argmax(np.abs(misses)))
    low, high = sixths[worst], sixths[worst + 1]
    fine = [f"GL16 {misses[worst]:+.1e}"]
    for count in (128, 1024, 8192):
        middles = low + (np.arange(count) + 0.5) * (high - low) / count
        fine.append(
            f"{count} {(high - low) / count * integrand(middles).sum() - np.diff(f(np.array([low, high])))[0]:+.1e}"
        )
    print(
        f"the 3,088-point rule misses {(per_panel.sum() - change) / change:+.2%}; on [{low:.2e}, {high:.2e}]: "
        + ", ".join(fine)
    )

    slope = np.diff(along) / np.diff(np.log10(DENSE))
    roughness = np.sqrt(np.abs(np.gradient(slope)))
    cumulative = np.concatenate([[0.0], np.cumsum(roughness + 1e-4 * roughness.mean())])
    floors = []
    for points in (64, 256, 1024):
        errors = []
        for _ in range(8):
            quantiles = (np.arange(points // 2 - 1) + rng.uniform()) / (points // 2 - 1) * cumulative[-1]
            edges = np.concatenate([[0.0, DENSE[0]], 10.0 ** np.interp(quantiles, cumulative, np.log10(DENSE)), [1.0]])
            alphas, sizes = gauss_legendre(np.unique(edges), 2)
            errors.append((sizes @ integrand(alphas).sum(1) - change) / change)
        floors.append(f"{points}: {np.sqrt(np.mean(np.square(errors))):.1e}")
    print("rms relative error of randomly shifted 2-point rules, " + ", ".join(floors))

    ours = [
        f"{steps}: {(result := explorer.attribute(lm, text, steps=steps)).delta / result.change:+.1e}"
        for steps in (64, 256)
    ]
    print("explorer.attribute delta / change, " + ", ".join(ours))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", choices=list(TEXTS), help="repeatable; default: both")
    models = parser.parse_args().model or list(TEXTS)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    if "tiny T5" in models:
        with tempfile.TemporaryDirectory() as folder:
            tiny = explorer.load_model(str(save_tiny("t5", Path(folder) / "t5")))
            report("tiny T5", tiny, TEXTS["tiny T5"], rng)
    if "dates-t5" in models:
        report("dates-t5", explorer.load_model(explorer.DEFAULT_SEQ2SEQ), TEXTS["dates-t5"], rng)


if __name__ == "__main__":
    main()
