"""Input attribution: which input tokens made the model predict a token, by three methods (Captum's).

Every method reads one function of the input embeddings, the log-probability of the target token:

- decoders: the next token after the text (the last position's logits; where the model's first generation pass
  appends the position it predicts, XLNet's, that pass, the appended token held fixed);
- encoder-decoders: the decoder's first token, from the encoder's input embeddings;
- encoders: the token at the text's ``[MASK]``, read through the masked-LM head its checkpoint carries.

The input embeddings are the token embeddings only (``inputs_embeds``): positions and token types are added by
the model itself, so the baseline (every input embedding zero) keeps them, and the attention mask, as for the
text. Gradients are taken with ``torch.autograd.grad`` (Captum's way), which fills no ``.grad`` of the shared
model's parameters: concurrent calls on one model leave nothing behind for each other.

- ``integrated_gradients``: ∫₀¹ ∇f(α·x)·x dα per token (summed over the hidden axis) with ``steps`` points on
  the straight path. A first batch of 16 forward reads tells whether f is smooth from α = 0 (LayerNorm models:
  positions and biases keep every norm's input off zero); then the points are Captum's, one Gauss-Legendre rule
  uniform in α. Otherwise (a model whose first norm sees the embeddings alone, Llama's and T5's bias-free RMSNorm,
  changes f over decades of α far below 0.01, where uniform points never land) Gauss-Legendre on panels of α
  placed where f changes, written here; where the model runs a ReLU (T5's feed-forward: f' jumps at hundreds of
  points), the trapezoid rule in log α on cells split where they miss their own completeness, which converges
  there faster than any polynomial rule. Every batch carries the points of all panels it can. Σ scores = f(x) −
  f(0) up to ``delta``; ``jumps`` is what of the change f makes in jumps (a mixture of experts switching experts
  along the path), which no gradient sees and no number of steps closes.
- ``gradient_x_input``: ∇f(x)·x per token.
- ``occlusion``: f(x) − f(x with that token's embedding zero), one token at a time.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from captum.attr import FeatureAblation, InputXGradient

from explorer.checks import given_text
from explorer.compute.quadrature import (
    GRID,
    MOST_SUSPECTS,
    NOISE,
    PROBES,
    ROUNDS,
    SECTIONS,
    bisected_trapezoid,
    panel_points,
    quadrature,
    sections,
    smooth_from_zero,
    suspect_cells,
)
from explorer.data.attribution import Attribution, Candidates
from explorer.errors import InputError
from explorer.models.architectures import KIND_DECODER, KIND_ENCODER, KIND_ENCODER_DECODER, routes_to_experts
from explorer.models.capture import encode_text
from explorer.models.distribution import appended_positions, prediction_inputs
from explorer.models.head_effects import last_position_only
from explorer.models.tokens import token_labels

METHODS = ("integrated_gradients", "gradient_x_input", "occlusion")
MIN_STEPS, MAX_STEPS = 8, 512
INTERNAL_BATCH = 16  # path points per forward pass: bounds integrated gradients' memory (Captum batches all)
# The jump search starts from the panels that miss too where the completeness error is over this share of the
# change (the page's "Verified" bound): below it, no jump changes what the check line says.
SEARCH_PANELS_PAST = 0.01


def attribute(lm, prompt: str, *, target=None, method: str = "integrated_gradients", steps: int = 64) -> Attribution:
    """One score per input token of ``prompt`` for the log-probability of ``target`` (a token id or a token's
    text; default: the model's own top prediction), by ``method`` (see the module docstring)."""
    _check(method, steps)
    encoded, predict, embeddings, mask = _prediction(lm, prompt)
    with torch.no_grad():
        logprobs = predict(embeddings, mask)[0]
        target_id = int(logprobs.argmax()) if target is None else _target_id(lm, target)
        baseline = float(predict(torch.zeros_like(embeddings), mask)[0, target_id])
    scorer = _SCORERS[method]
    if method == "integrated_gradients":
        scorer = functools.partial(scorer, kinks=kinked(lm.model))
    scores, delta, jumps = scorer(predict, embeddings, mask, target_id, steps)
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
        jumps=jumps,
        steps=steps if method == "integrated_gradients" else None,
        routed=method == "integrated_gradients" and routes_to_experts(lm.model.config),
        held=_held(lm),
    )


def _held(lm) -> str:
    """What the pass reads after the text and the scores leave out, in the visitor's words ("" where nothing)."""
    appended = appended_positions(lm)
    if not appended:
        return ""
    return (
        f"{lm.name} predicts at {'a token' if appended == 1 else f'{appended} tokens'} its generation appends after "
        "the text, hidden from it: that token is no text, so it gets no score, and it keeps its own embedding on "
        "the whole path (the baseline included), as the model's positions do."
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
    prepared = prediction_inputs(lm, encoded["input_ids"])
    if prepared is not None:
        return _decoder_beyond_the_text(lm, prepared, encoded["input_ids"].shape[1], only_last)

    def predict(embeddings, mask):
        logits = lm.model(inputs_embeds=embeddings, attention_mask=mask, use_cache=False, **only_last).logits
        return torch.log_softmax(logits[:, -1].float(), dim=-1)

    return predict


def _decoder_beyond_the_text(lm, prepared: dict, text: int, only_last: dict):
    """A decoder that predicts at positions its first generation pass appends after the text (XLNet: the token to
    predict, hidden by its permutation mask): that pass as generate() prepares it, the text's embeddings those of
    the path, the appended token's its own embedding, held fixed on the whole path (it is no text, so it gets no
    score, and the baseline keeps it as the model's positions are kept)."""
    appended = lm.model.get_input_embeddings()(prepared["input_ids"][:, text:]).detach()
    further = {name: value for name, value in prepared.items() if name != "input_ids"}

    def predict(embeddings, mask):
        rows = embeddings.shape[0]
        whole = torch.cat([embeddings, appended.to(embeddings.dtype).expand(rows, -1, -1)], dim=1)
        batch = {name: value.expand(rows, *value.shape[1:]) for name, value in further.items()}
        logits = lm.model(inputs_embeds=whole, **batch, use_cache=False, **only_last).logits
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


def kinked(model: torch.nn.Module) -> bool:
    """Whether the model runs a ReLU (T5's feed-forward): f' jumps wherever a ReLU's input changes sign along the
    path, and Gauss-Legendre panels then converge at first order only."""
    return any(isinstance(module, torch.nn.ReLU) for module in model.modules())


def _integrated_gradients(predict, embeddings, mask, target_id, steps, kinks=False):
    """∫₀¹ ∇f(α·x)·x dα with ``steps`` points: one Gauss-Legendre rule on [0, 1], as Captum's, where the scan finds
    f smooth down to α = 0 (``smooth_from_zero``), else panels placed where f changes (``plan_panels``), or, where
    the model runs a ReLU (``kinks``), the trapezoid rule on cells split where they miss (``bisected_trapezoid``)."""
    path = _Path(predict, embeddings, mask, target_id)
    along = np.full(len(GRID), np.nan)
    along[PROBES] = path.values(GRID[PROBES])
    if smooth_from_zero(along):
        parts = path.integrals([panel_points(0, len(GRID) - 1, steps)])
    else:
        unread = np.isnan(along)
        along[unread] = path.values(GRID[unread])
        cells = bisected_trapezoid(along, steps, path.slopes) if kinks else None
        panels = {} if cells is not None else quadrature(along, steps, path.panels)
        parts = (cells or panels).values()
    scores = sum(parts)
    change = along[-1] - along[0]
    delta = float(scores.sum()) - change
    searched = not smooth_from_zero(along) and abs(delta) > SEARCH_PANELS_PAST * abs(change)
    missed = _missed(panels, along, delta) if searched else []
    return scores, delta, path.jumps(delta, missed)


def _missed(panels: dict, along: np.ndarray, delta: float) -> list:
    """(first α, last α, f there, f there) of each panel that misses its own completeness (Σ its part = f(end) −
    f(start)) by a sixteenth of ``delta`` or more, either way: where a jump may hide between its points (each jump
    adds −jump to the miss of the panel it falls in, and jumps of both signs make up ``delta``)."""
    return [
        (GRID[low], GRID[high], along[low], along[high])
        for (low, high, _), part in panels.items()
        if abs(float(part.sum()) - (along[high] - along[low])) >= abs(delta) / 16
    ]


class _Path:
    """f(α·x), the target's log-probability on the straight path, read in batches of points."""

    def __init__(self, predict, embeddings, mask, target_id):
        self.predict, self.embeddings, self.mask, self.target_id = predict, embeddings, mask, target_id
        self.samples = []  # (α, f, df/dα) at every point a gradient was taken: what the jump search starts from

    def _tensor(self, values) -> torch.Tensor:
        return torch.as_tensor(np.asarray(values), dtype=self.embeddings.dtype, device=self.embeddings.device)

    def _at(self, points: torch.Tensor) -> torch.Tensor:
        return self.predict(points, self.mask.expand(len(points), -1))[:, self.target_id]

    def values(self, alphas: np.ndarray) -> np.ndarray:
        """f at each α (forward passes only): float64."""
        with torch.no_grad():
            chunks = [
                self._at(chunk.view(-1, 1, 1) * self.embeddings) for chunk in self._tensor(alphas).split(INTERNAL_BATCH)
            ]
        return torch.cat(chunks).double().cpu().numpy()

    def panels(self, panels: list[tuple[int, int, int]]) -> list[torch.Tensor]:
        """``integrals`` of each panel's Gauss-Legendre rule (``panel_points``)."""
        return self.integrals([panel_points(*panel) for panel in panels])

    def slopes(self, alphas: np.ndarray) -> list[tuple[torch.Tensor, float]]:
        """(df/dα per token [1, token], f) at each α."""
        read = len(self.samples)
        parts = self.integrals([(np.array([alpha]), np.ones(1)) for alpha in alphas])
        values = torch.cat([chosen for _, chosen, _ in self.samples[read:]]).double().cpu().tolist()
        return list(zip(parts, values, strict=True))

    def integrals(self, rules: list[tuple[np.ndarray, np.ndarray]]) -> list[torch.Tensor]:
        """Σ sizes·∇f(α·x)·x per token for each rule (points α, sizes), all rules' points in one stream of batches:
        one [1, token] tensor per rule."""
        alphas = self._tensor(np.concatenate([points for points, _ in rules]))
        sizes = self._tensor(np.concatenate([weights for _, weights in rules]))
        owners = torch.repeat_interleave(torch.arange(len(rules)), torch.tensor([len(p) for p, _ in rules]))
        totals = torch.zeros(len(rules), self.embeddings.shape[1], dtype=self.embeddings.dtype, device=alphas.device)
        for start in range(0, len(alphas), INTERNAL_BATCH):
            batch = slice(start, start + INTERNAL_BATCH)
            points = (alphas[batch].view(-1, 1, 1) * self.embeddings).requires_grad_()
            chosen = self._at(points)
            (gradients,) = torch.autograd.grad(chosen.sum(), points)
            per_point = (gradients * self.embeddings).sum(-1)  # [point, token]: df/dα's share of each token
            totals.index_add_(0, owners[batch].to(alphas.device), sizes[batch].view(-1, 1) * per_point)
            self.samples.append([alphas[batch], chosen.detach(), per_point.sum(-1)])
        return list(totals.detach().split(1))

    def jumps(self, delta: float, missed=()) -> float:
        """Σ of f's jumps along the path (a mixture of experts switching experts at some α, say), searched for
        where the sampled points' values and slopes disagree (``suspect_cells``), or, where none do, in the panels
        that miss their own completeness (``missed``: (first α, last α, f there, f there) each): each cell is cut in
        ``SECTIONS``, ``ROUNDS`` times, following every part where f still moves by a sixteenth of ``delta`` (the
        ``MOST_SUSPECTS`` that move most): a continuous f moves by about a 4,096th of the cell's change in the last
        parts, a jump by all of it. A gradient never sees a jump, so no number of steps closes it: ``delta`` ≈
        −Σ jumps. 0 where none is found."""
        read = [torch.cat(column).double().cpu().numpy() for column in zip(*self.samples, strict=True)]
        alphas, values, slopes = (column[np.argsort(read[0])] for column in read)
        cells = suspect_cells(alphas, values, slopes, delta)
        lows, highs, at_low, at_high = alphas[cells], alphas[cells + 1], values[cells], values[cells + 1]
        if len(missed) and not len(cells):  # no two points disagree: the panels that miss are where to look
            lows, highs, at_low, at_high = (
                np.r_[mine, theirs]
                for mine, theirs in zip((lows, highs, at_low, at_high), np.array(missed).T, strict=True)
            )
        least = abs(delta) / 16 + NOISE * (1 + np.abs(values).max())
        for _ in range(ROUNDS):
            moving = np.argsort(-np.abs(at_high - at_low))[:MOST_SUSPECTS]
            moving = moving[np.abs(at_high - at_low)[moving] >= least]
            if not len(moving):
                return 0.0
            cuts = sections(lows[moving], highs[moving], SECTIONS)
            inner = self.values(cuts[:, 1:-1].ravel()).reshape(len(moving), SECTIONS - 1)
            along = np.column_stack([at_low[moving], inner, at_high[moving]])
            lows, highs, at_low, at_high = cuts[:, :-1], cuts[:, 1:], along[:, :-1], along[:, 1:]
            lows, highs, at_low, at_high = (column.ravel() for column in (lows, highs, at_low, at_high))
        found = at_high - at_low
        return float(found[np.abs(found) >= least].sum())


def _gradient_x_input(predict, embeddings, mask, target_id, steps):
    inputs = embeddings.clone().requires_grad_()  # Captum would set it on the caller's tensor, with a warning
    attributions = InputXGradient(predict).attribute(inputs, target=target_id, additional_forward_args=(mask,))
    return attributions.sum(-1), None, None


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
    return drops[..., 0], None, None


_SCORERS = {
    "integrated_gradients": _integrated_gradients,
    "gradient_x_input": _gradient_x_input,
    "occlusion": _occlusion,
}
