"""Integrated gradients at 64 points against Captum and a float64 reference (issue 40), and what limits it on T5:
the path's integrand, measured (issue 30, part 1).

Against Captum, for each model asked (the bundled prose-llama, prose-gpt2 and dates-t5, the tests' tiny T5 and tiny
Llama), a table row: the change Δ = f(1) − f(0); the reference, a float64 copy of the model (its RMSNorms in float64
too) integrated with 16 Gauss-Legendre points on each sixth of a decade of α from 10⁻³² to 10⁻³ and each 48th of a
decade from there to 1 (5,104 points), and its own completeness error; the largest error of a token's score
against it, for ``explorer.attribute`` at 64 steps and for Captum's ``IntegratedGradients`` (Gauss-Legendre, 64
points, 16 a batch) of the same function; the forward calls and the rows they carry; the fastest of 3 runs
(``--repeats``), alternated (the machine is shared: the fastest is the least disturbed), and their ratio.

Then for the tiny T5 built from a config (the tests' ``tiny_models``) and the bundled dates-t5, along the straight
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

Run:  python bench/bench_ig_path.py [--model dates-t5] [--repeats 3]   (a few minutes on a CPU core; --model,
      repeatable, picks the models, and the tests run the tiny T5 alone, once)
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import itertools
import os
import sys
import tempfile
import time
import types
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch
from captum.attr import IntegratedGradients

import explorer
from explorer.models import attribution
from tests.tiny_models import save_tiny

TINY_TEXT = "the cat sat on the mat and the dog ran to"
TEXTS = {
    "prose-llama": "Elizabeth knew that",
    "prose-gpt2": "Elizabeth knew that",
    "tiny T5": TINY_TEXT,
    "dates-t5": "Thursday, March 5, 2021",
}
TEXTS["tiny Llama"] = TINY_TEXT
PATH_STUDIED = ("tiny T5", "dates-t5")  # the integrand's analysis below reads T5's own modules
RMS_NORMS = {"T5LayerNorm", "LlamaRMSNorm"}  # weight · x / √(mean x² + eps), variance taken in float32 whatever
DENSE = np.logspace(-20, 0, 2001)  # f is flat below 10⁻²⁰ in both models (|Δf| < 2e-5 from 10⁻⁴⁰ up to there)


def rms_norm_in_float64(module, hidden):
    # T5's and Llama's RMSNorms take the variance in float32 whatever the dtype: the copy's must not, or it is no
    # float64 copy
    return module.weight * (hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + module.variance_epsilon))


def float64_copy(lm):
    model = copy.deepcopy(lm.model).double()
    for module in model.modules():
        if type(module).__name__ in RMS_NORMS:
            module.forward = types.MethodType(rms_norm_in_float64, module)
    return dataclasses.replace(lm, model=model)


def log_probabilities(lm, text: str, dtype):
    """(input embeddings, f: a batch of them -> the target's log-probabilities over the vocabulary, in ``dtype``),
    the function ``explorer.attribute`` integrates, its logits left in ``dtype``."""
    _, _, embeddings, mask = attribution._prediction(lm, text)
    extra = {}
    if lm.kind == "encoder-decoder":
        extra["decoder_input_ids"] = torch.tensor([[lm.model.config.decoder_start_token_id]])

    def f(inputs):
        batch = {name: ids.expand(len(inputs), -1) for name, ids in extra.items()}
        logits = lm.model(inputs_embeds=inputs, attention_mask=mask.expand(len(inputs), -1), use_cache=False, **batch)
        return torch.log_softmax(logits.logits[:, -1].to(dtype), -1)

    return embeddings.to(dtype), f


REFERENCE_EDGES = np.concatenate([[0.0], np.logspace(-32, -3, 175), np.logspace(-3, 0, 145)[1:]])


def reference(lm, text: str, target: int) -> tuple[np.ndarray, float, float]:
    """(each token's score, Δ, the rule's completeness error), in float64: 16 points on each of
    ``REFERENCE_EDGES``' panels."""
    wide = float64_copy(lm)
    x, f = log_probabilities(wide, text, torch.float64)
    alphas, sizes = gauss_legendre(REFERENCE_EDGES, 16, in_log=False)
    total = torch.zeros_like(x)
    for start in range(0, len(alphas), 64):
        alpha = torch.tensor(alphas[start : start + 64], dtype=torch.float64).view(-1, 1, 1)
        points = (alpha * x).requires_grad_()
        (gradient,) = torch.autograd.grad(f(points)[:, target].sum(), points)
        total += (torch.tensor(sizes[start : start + 64]).view(-1, 1, 1) * gradient).sum(0, keepdim=True)
    scores = (total * x).sum(-1)[0].numpy()
    with torch.no_grad():
        change = float(f(x)[0, target] - f(torch.zeros_like(x))[0, target])
    return scores, change, float(scores.sum()) - change


class Forwards:
    """Forward calls of a model and the rows they carry, counted by a pre-hook."""

    def __init__(self, model):
        self.calls = self.rows = 0
        self.hook = model.register_forward_pre_hook(self.count, with_kwargs=True)

    def count(self, module, args, kwargs):
        self.calls += 1
        self.rows += len(kwargs["inputs_embeds"])


def against_captum(name: str, lm, text: str, steps: int = 64, repeats: int = 3) -> str:
    """The table's row for one model (see the module docstring)."""
    ours = explorer.attribute(lm, text, steps=steps)
    expected, change, own_error = reference(lm, text, ours.target_id)
    _, predict, embeddings, mask = attribution._prediction(lm, text)
    captum = IntegratedGradients(predict)

    def theirs():
        scores = captum.attribute(
            embeddings, torch.zeros_like(embeddings), target=ours.target_id, additional_forward_args=(mask,),
            n_steps=steps, internal_batch_size=16, return_convergence_delta=True,
        )[0]  # fmt: skip
        return scores.sum(-1)[0].detach().numpy()

    runs = {"ours": lambda: explorer.attribute(lm, text, steps=steps).scores, "Captum": theirs}
    times, counts, errors = {key: [] for key in runs}, {}, {}
    for _ in range(repeats):
        for key, run in runs.items():
            forwards = Forwards(lm.model)
            start = time.perf_counter()
            scores = run()
            times[key].append(time.perf_counter() - start)
            forwards.hook.remove()
            counts[key], errors[key] = forwards, np.abs(scores - expected).max()
    ms = {key: 1000 * min(values) for key, values in times.items()}
    return (
        f"| {name} | {change:+.4f} | {own_error:+.1e} | {errors['ours']:.1e} | {errors['Captum']:.1e} | "
        f"{counts['ours'].calls} / {counts['ours'].rows} | {counts['Captum'].calls} / {counts['Captum'].rows} | "
        f"{ms['ours']:.0f} | {ms['Captum']:.0f} | {ms['ours'] / ms['Captum']:.2f}x |"
    )


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
    parser.add_argument("--model", action="append", choices=list(TEXTS), help="repeatable; default: all")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each, alternated (the median)")
    arguments = parser.parse_args()
    models = arguments.model or list(TEXTS)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        loaded = {name: load(name, Path(folder)) for name in models}
        print(
            "## Integrated gradients at 64 points against Captum's and a float64 reference\n"
            "| model | Δ | reference's completeness | ours: max error | Captum: max error | ours: calls / rows "
            "| Captum: calls / rows | ours ms | Captum ms | ours / Captum |\n|---|---|---|---|---|---|---|---|---|---|"
        )
        for name, lm in loaded.items():
            print(against_captum(name, lm, TEXTS[name], repeats=arguments.repeats))
        for name in PATH_STUDIED:
            if name in loaded:
                report(name, loaded[name], TEXTS[name], rng)


def load(name: str, folder: Path):
    """One of the models ``TEXTS`` names: bundled, or tiny and saved under ``folder``."""
    bundled = {
        "prose-llama": explorer.DEFAULT_DECODER,
        "prose-gpt2": explorer.PROSE_GPT2,
        "dates-t5": explorer.DEFAULT_SEQ2SEQ,
    }
    if name in bundled:
        return explorer.load_model(bundled[name])
    tiny = {"tiny T5": "t5", "tiny Llama": "llama"}[name]
    return explorer.load_model(str(save_tiny(tiny, folder / tiny)))


if __name__ == "__main__":
    main()
