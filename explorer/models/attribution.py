"""Input attribution: which input tokens made the model predict a token, by three methods (Captum's).

Every method reads one function of the input embeddings, the log-probability of the target token:

- decoders: the next token after the text (the last position's logits);
- encoder-decoders: the decoder's first token, from the encoder's input embeddings;
- encoders: the token at the text's ``[MASK]``, read through the masked-LM head its checkpoint carries.

The input embeddings are the token embeddings only (``inputs_embeds``): positions and token types are added by
the model itself, so the baseline (every input embedding zero) keeps them, and the attention mask, as for the
text. Gradients are taken with ``torch.autograd.grad`` (Captum's way), which fills no ``.grad`` of the shared
model's parameters: concurrent calls on one model leave nothing behind for each other.

- ``integrated_gradients``: ∫₀¹ ∇f(α·x)·x dα per token (summed over the hidden axis) with ``steps`` points on
  the straight path, Gauss-Legendre on panels of α placed where f changes (written here: Captum's points are uniform
  in α, and a model whose first norm sees the embeddings alone, Llama's and T5's bias-free RMSNorm, changes f over
  decades of α far below 0.01, where uniform points never land); Σ scores = f(x) − f(0) up to ``delta``.
- ``gradient_x_input``: ∇f(x)·x per token.
- ``occlusion``: f(x) − f(x with that token's embedding zero), one token at a time.
"""

from __future__ import annotations

import numpy as np
import torch
from captum.attr import FeatureAblation, InputXGradient

from explorer.checks import given_text
from explorer.data.attribution import Attribution, Candidates
from explorer.errors import InputError
from explorer.models.architectures import KIND_DECODER, KIND_ENCODER, KIND_ENCODER_DECODER
from explorer.models.capture import encode_text
from explorer.models.head_effects import last_position_only
from explorer.models.tokens import token_labels

METHODS = ("integrated_gradients", "gradient_x_input", "occlusion")
MIN_STEPS, MAX_STEPS = 8, 512
INTERNAL_BATCH = 16  # path points per forward pass: bounds integrated gradients' memory (Captum batches all)


def attribute(lm, prompt: str, *, target=None, method: str = "integrated_gradients", steps: int = 64) -> Attribution:
    """One score per input token of ``prompt`` for the log-probability of ``target`` (a token id or a token's
    text; default: the model's own top prediction), by ``method`` (see the module docstring)."""
    _check(method, steps)
    encoded, predict, embeddings, mask = _prediction(lm, prompt)
    with torch.no_grad():
        logprobs = predict(embeddings, mask)[0]
        target_id = int(logprobs.argmax()) if target is None else _target_id(lm, target)
        baseline = float(predict(torch.zeros_like(embeddings), mask)[0, target_id])
    scores, delta = _SCORERS[method](predict, embeddings, mask, target_id, steps)
    return Attribution(
        model_name=lm.name,
        method=method,
        tokens=token_labels(lm.tokenizer, encoded["input_ids"][0].tolist()),
        scores=scores.detach().float().cpu().numpy()[0],
        target_id=target_id,
        target_token=token_labels(lm.tokenizer, [target_id])[0],
        logprob=float(logprobs[target_id]),
        baseline_logprob=baseline,
        delta=delta,
        steps=steps if method == "integrated_gradients" else None,
    )


def top_targets(lm, prompt: str, k: int = 10) -> Candidates:
    """The ``k`` most likely tokens of the prediction ``attribute(lm, prompt)`` explains (its default target
    first), with their probabilities: one forward pass, the targets a page offers."""
    _, predict, embeddings, mask = _prediction(lm, prompt)
    with torch.no_grad():
        best = predict(embeddings, mask)[0].topk(k)
    ids = best.indices.cpu().numpy()
    return Candidates(
        model_name=lm.name,
        ids=ids,
        tokens=token_labels(lm.tokenizer, ids.tolist()),
        probabilities=best.values.exp().float().cpu().numpy(),
    )


def unexplained(lm) -> str | None:
    """Why ``attribute`` cannot read this model's predictions (an encoder saved without its masked-LM head), or
    None when it can."""
    if lm.kind != KIND_ENCODER:
        return None
    from explorer.models.lens import masked_lm_head  # the head the lens reads an encoder through

    try:
        masked_lm_head(lm)
    except InputError as error:
        return str(error)
    return None


def _prediction(lm, prompt: str):
    """(the encoded prompt, its target's log-probabilities as a function of (input embeddings, attention mask),
    the prompt's input embeddings, its attention mask)."""
    encoded, _ = encode_text(lm, given_text(prompt, "prompt"), None)
    predict = _PREDICTORS[lm.kind](lm, encoded)
    embeddings = lm.model.get_input_embeddings()(encoded["input_ids"]).detach().float()
    return encoded, predict, embeddings, encoded["attention_mask"]


def _check(method: str, steps: int) -> None:
    if method not in METHODS:
        raise InputError(f"Attribution methods: {', '.join(METHODS)} (got {method!r}).")
    if isinstance(steps, bool) or not isinstance(steps, int) or not MIN_STEPS <= steps <= MAX_STEPS:
        raise InputError(f"Integrated gradients takes {MIN_STEPS} to {MAX_STEPS} steps (got {steps!r}).")


def _target_id(lm, target) -> int:
    if isinstance(target, int) and not isinstance(target, bool):
        if not 0 <= target < lm.model.get_output_embeddings().weight.shape[0]:
            raise InputError(f"Token id {target} is not in this model's vocabulary.")
        return target
    ids = lm.tokenizer(str(target), add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise InputError(f"“{target}” is {len(ids)} tokens for this model: the target must be one token.")
    return int(ids[0])


# -- what is attributed: the target's log-probability as a function of the input embeddings, per model kind ----


def _decoder(lm, encoded):
    only_last = last_position_only(lm.model)  # the path's points need no other position's vocabulary

    def predict(embeddings, mask):
        logits = lm.model(inputs_embeds=embeddings, attention_mask=mask, use_cache=False, **only_last).logits
        return torch.log_softmax(logits[:, -1].float(), dim=-1)

    return predict


def _encoder_decoder(lm, encoded):
    start = torch.tensor([[lm.model.config.decoder_start_token_id]], device=encoded["input_ids"].device)

    def predict(embeddings, mask):
        decoder_ids = start.expand(embeddings.shape[0], 1)
        logits = lm.model(
            inputs_embeds=embeddings, attention_mask=mask, decoder_input_ids=decoder_ids, use_cache=False
        ).logits
        return torch.log_softmax(logits[:, -1].float(), dim=-1)

    return predict


def _encoder(lm, encoded):
    from explorer.models.lens import masked_lm_head  # the head the lens reads an encoder through

    head = masked_lm_head(lm)
    masked = (encoded["input_ids"][0] == lm.tokenizer.mask_token_id).nonzero()
    if lm.tokenizer.mask_token_id is None or len(masked) != 1:
        raise InputError(f"Put one {lm.tokenizer.mask_token or '[MASK]'} in the text: the encoder predicts that token.")
    position = int(masked[0])
    types = encoded.get("token_type_ids")

    def predict(embeddings, mask):
        extra = {"token_type_ids": types.expand(embeddings.shape[0], -1)} if types is not None else {}
        hidden = lm.model(inputs_embeds=embeddings, attention_mask=mask, **extra).last_hidden_state
        return torch.log_softmax(head(hidden[:, position]).float(), dim=-1)

    return predict


_PREDICTORS = {KIND_DECODER: _decoder, KIND_ENCODER_DECODER: _encoder_decoder, KIND_ENCODER: _encoder}


# -- the three methods ---------------------------------------------------------------------------------------------


def _integrated_gradients(predict, embeddings, mask, target_id, steps):
    """∫₀¹ ∇f(α·x)·x dα with ``steps`` points, placed where f changes along the path (``plan_panels``)."""
    grid = torch.tensor(GRID, dtype=embeddings.dtype, device=embeddings.device)
    with torch.no_grad():
        along = torch.cat(
            [
                predict(chunk.view(-1, 1, 1) * embeddings, mask.expand(len(chunk), -1))[:, target_id]
                for chunk in grid.split(INTERNAL_BATCH)
            ]
        )
    along = along.double().cpu().numpy()

    def integrate(panel):
        return _path_integral(predict, embeddings, mask, target_id, *panel_points(*panel))

    scores = sum(quadrature(along, steps, integrate).values())
    return scores, float(scores.sum()) - (along[-1] - along[0])


def quadrature(along: np.ndarray, steps: int, integrate) -> dict:
    """``integrate(panel)`` (an array whose sum is the panel's part of ∫ df) for the panels of ``steps`` points
    in all: three quarters placed by ``plan_panels``, then the rest, a panel at a time, where a panel's own
    completeness (its sum = f(end) − f(start), read off ``along``) is missed most."""
    first = plan_panels(along, steps * FIRST_SHARE // 4)
    done = {panel: integrate(panel) for panel in first}
    left = steps - sum(count for _, _, count in first)
    while True:
        error = {p: abs(float(s.sum()) - (along[p[1]] - along[p[0]])) for p, s in done.items()}
        worst = max(error, key=error.get)
        finer = refine(worst)
        cost = sum(count for _, _, count in finer)
        if cost > left:
            return done
        left -= cost
        del done[worst]
        done.update({panel: integrate(panel) for panel in finer})


def _path_integral(predict, embeddings, mask, target_id, alphas, sizes):
    """Σ sizes·∇f(α·x) over the points α, times x and summed over the hidden axis: [1, token]."""
    total = torch.zeros_like(embeddings)
    for start in range(0, len(alphas), INTERNAL_BATCH):
        chunk = torch.tensor(alphas[start : start + INTERNAL_BATCH], dtype=embeddings.dtype, device=embeddings.device)
        size = torch.tensor(sizes[start : start + INTERNAL_BATCH], dtype=embeddings.dtype, device=embeddings.device)
        points = (chunk.view(-1, 1, 1) * embeddings).requires_grad_()
        chosen = predict(points, mask.expand(len(chunk), -1))[:, target_id]
        (gradients,) = torch.autograd.grad(chosen.sum(), points)
        total += (size.view(-1, 1, 1) * gradients).sum(0, keepdim=True)
    return (total * embeddings).sum(-1).detach()


# Where f(α·x) is read before any gradient: α = 0, then three points a decade from 10⁻³⁰ to 1 (a stack of
# RMSNorms without biases, T5's, scales each layer up by 1/√eps while its input is small: f moves over decades).
GRID = np.concatenate([[0.0], np.logspace(-30, 0, 91)])
PANEL_POINTS = 8  # Gauss-Legendre points per panel of the first plan, on average
FIRST_SHARE = 3  # quarters of the points placed first; the rest where panels still miss
MAX_PANEL_CELLS = 6  # two decades
FLOOR = 1e-3  # share of the whole change every grid cell counts as, however flat f is there


def plan_panels(along: np.ndarray, steps: int) -> list[tuple[int, int, int]]:
    """Panels (first grid index, last grid index, points): neighbouring grid cells merged while their share of
    how much f changes (``along`` = f at ``GRID``) stays under one panel's and they span at most two decades,
    with points in proportion to each panel's share."""
    cells = np.abs(np.diff(along))
    shares = (cells + FLOOR * max(cells.sum(), 1e-12)) / (cells.sum() + FLOOR * len(cells) * max(cells.sum(), 1e-12))
    most = PANEL_POINTS / steps
    widest = max(MAX_PANEL_CELLS, -(-len(cells) // max(steps // 2 - 1, 1)))  # few steps: wider panels
    edges, share = [0], 0.0
    for cell, cell_share in enumerate(shares):
        if cell > edges[-1] and (share + cell_share > most or cell - edges[-1] >= widest or cell == 1):
            edges.append(cell)  # [0, 10⁻³⁰] is a panel of its own: points uniform in α there miss every decade
            share = 0.0
        share += cell_share
    edges.append(len(cells))
    counts = _counts(np.add.reduceat(shares, edges[:-1]), steps)
    return [(low, high, int(count)) for low, high, count in zip(edges[:-1], edges[1:], counts, strict=True)]


def refine(panel: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    """A panel's two halves with as many points each, or, within one grid cell, twice its points."""
    low, high, count = panel
    if high - low >= 2:
        middle = (low + high) // 2
        return [(low, middle, count), (middle, high, count)]
    return [(low, high, 2 * count)]


def panel_points(low: int, high: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre points α and weights on [GRID[low], GRID[high]]: uniform in log α, or in α from 0."""
    nodes, weights = np.polynomial.legendre.leggauss(count)
    start, end = GRID[low], GRID[high]
    if start == 0:
        return end * (nodes + 1) / 2, end * weights / 2
    logs = np.log(start) + (np.log(end) - np.log(start)) * (nodes + 1) / 2
    return np.exp(logs), np.exp(logs) * (np.log(end) - np.log(start)) * weights / 2  # dα = α d(log α)


def _counts(shares: np.ndarray, steps: int) -> np.ndarray:
    """Points per panel: at least one each, the rest in proportion to the panels' shares (largest remainders)."""
    counts = np.ones(len(shares), dtype=int)
    wanted = shares / shares.sum() * (steps - len(shares))
    counts += np.floor(wanted).astype(int)
    rest = steps - counts.sum()
    counts[np.argsort(-(wanted - np.floor(wanted)))[:rest]] += 1
    return counts


def _gradient_x_input(predict, embeddings, mask, target_id, steps):
    inputs = embeddings.clone().requires_grad_()  # Captum would set it on the caller's tensor, with a warning
    attributions = InputXGradient(predict).attribute(inputs, target=target_id, additional_forward_args=(mask,))
    return attributions.sum(-1), None


def _occlusion(predict, embeddings, mask, target_id, steps):
    # One feature per token (all of its hidden units together), ablated to zero one at a time.
    tokens = embeddings.shape[1]
    features = torch.arange(tokens, device=embeddings.device).view(1, tokens, 1).expand_as(embeddings)
    with torch.no_grad():
        drops = FeatureAblation(predict).attribute(
            embeddings,
            baselines=0.0,
            target=target_id,
            additional_forward_args=(mask,),
            feature_mask=features,
            perturbations_per_eval=min(tokens, INTERNAL_BATCH),
        )
    return drops[..., 0], None


_SCORERS = {
    "integrated_gradients": _integrated_gradients,
    "gradient_x_input": _gradient_x_input,
    "occlusion": _occlusion,
}
