"""Input attribution views: which input tokens made the model predict its target, the text shaded by each token's
score (HTML) and the scores as bars, with integrated gradients' completeness as the check. One gateway result per
(model, text, target, method, steps) serves both."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from explorer import gateway
from explorer.data.attribution import Attribution
from explorer.render.attribution import attribution_bars, shaded_text_html
from explorer.render.style import FigureInfo
from explorer.views import Builder, builder

INTEGRATED_GRADIENTS = "integrated_gradients"
METHODS = {
    INTEGRATED_GRADIENTS: "Integrated gradients",
    "gradient_x_input": "Gradient × input",
    "occlusion": "Occlusion",
}
DEFAULT_STEPS = 64
# What the page's Steps slider offers: explorer.attribute's bounds.
MIN_STEPS, MAX_STEPS = 8, 512
COMPLETE = 0.01  # a completeness error within this share of the change explained reads as verified
SCORE_TITLES = {  # short: the y axis of a chart a projector leaves 500 px for
    INTEGRATED_GRADIENTS: "contribution to Δ log p",  # the bars are contributions; together they make Δ log p
    "gradient_x_input": "gradient × input",
    "occlusion": "drop in log p",
}


@dataclass(frozen=True)
class Scores:
    """Each input token's score for the log-probability of ``target`` (a token id, a typed token, or None: the
    model's top prediction) by ``method``; ``steps`` counts only for integrated gradients."""

    model: str
    text: str
    target: int | str | None = None
    method: str = INTEGRATED_GRADIENTS
    steps: int = DEFAULT_STEPS

    @classmethod
    def for_result(cls, attribution: Attribution) -> Scores:
        steps = attribution.steps or DEFAULT_STEPS
        return cls(attribution.model_name, "".join(attribution.tokens), None, attribution.method, steps)

    @property
    def run_steps(self) -> int:
        """The steps the result is keyed by: the other methods take none, so moving the slider reruns nothing."""
        return self.steps if self.method == INTEGRATED_GRADIENTS else DEFAULT_STEPS

    def result(self, progress=None) -> Attribution:
        inputs = (self.text, self.target, self.method, self.run_steps)
        return gateway.run("attribution", self.model, *inputs, progress=progress)

    def where(self) -> tuple[str, ...]:
        steps = (f"{self.run_steps} steps",) if self.method == INTEGRATED_GRADIENTS else ()
        return (METHODS.get(self.method, self.method), *steps)

    def info(self, attribution: Attribution | None = None) -> FigureInfo:
        target = (f"target {attribution.target_token!r}",) if attribution is not None else ()
        return FigureInfo("Why this token?", model=self.model, text=self.text, where=(*self.where(), *target))

    def figure(self, attribution: Attribution) -> Builder:
        return builder(
            attribution_bars,
            attribution.tokens,
            attribution.scores,
            score_title=SCORE_TITLES.get(attribution.method, "score"),
            info=self.info(attribution),
        )

    def html(self, attribution: Attribution, *, font_size: int = 18) -> str:
        """The text shaded by each token's score: an HTML string, every label escaped."""
        return shaded_text_html(
            attribution.tokens, attribution.scores, target_token=attribution.target_token, font_size=font_size
        )

    def caption(self, attribution: Attribution) -> str:
        """The check: "Verified" only where integrated gradients' completeness error is within ``COMPLETE`` of the
        change, else "Not verified" and what lowers it, or, where f's jumps along the path make up half the error
        or more, that steps do not; or what the other methods are checked against."""
        line = attribution.verification()
        if attribution.delta is None:
            return (
                f"Check: {line}; its scores equal a reference written with torch's autograd and explicit re-runs "
                f"within 1e-5 in the tests. Here they sum to {float(attribution.scores.sum()):.4f}, while log "
                f"p(text) − log p(baseline) = {attribution.change:.4f}: only integrated gradients' scores are "
                "built to add up to that change."
            )
        if abs(attribution.delta) <= COMPLETE * abs(attribution.change):
            return f"Verified: {line}, within {COMPLETE:.0%}."
        # A gap over the threshold is not a verification: the line says so first, then whether steps close it.
        said = f"Not verified, the scores miss the change by over {COMPLETE:.0%}: {line}."
        if attribution.routed or abs(attribution.jumps or 0.0) >= abs(attribution.delta) / 2:
            return f"{said} {_jumps_told(attribution)}"
        return (
            f"{said} More steps lower it (up to {MAX_STEPS}; T5-family models need about 256 for under {COMPLETE:.0%})."
        )


def _jumps_told(attribution: Attribution) -> str:
    """Why steps do not close the gap: log p jumps along the path, which no gradient sees. A mixture of experts
    jumps wherever a token's experts switch, whether the search finds each jump or not (it may miss one: the tiny
    Mixtral's −2.8e-3), so the jumps found are said as such, never as the total."""
    where = (
        "This model routes each token to a few experts: log p jumps where they switch along the path"
        if attribution.routed
        else "log p jumps along the path (as where a mixture of experts switches experts)"
    )
    found = f"; the jumps found add up to {attribution.jumps:+.2e}" if attribution.jumps else ""
    return f"{where}, and a gradient never sees a jump, so more steps do not close this gap{found}."


def strongest(attribution: Attribution, *, skip_last: bool = True) -> int:
    """The input position with the largest score, the last token left out (``skip_last``: the token right before
    the prediction usually leads; the question is which earlier word matters)."""
    scores = attribution.scores[:-1] if skip_last and len(attribution.scores) > 1 else attribution.scores
    return int(scores.argmax())


def strongest_caption(attribution: Attribution, *, skip_last: bool, label: Callable[[str], str] = repr) -> str:
    """The target's log-probability at the text and the baseline, and which token scores the most: with
    ``skip_last`` (a decoder's last token, right before the prediction), whether that token leads and which
    earlier one does. ``label`` writes a token (the page's escapes it)."""
    target, logprob = label(attribution.target_token), attribution.logprob
    said = (
        f"Target {target}: log p = {logprob:.3f} (p = {math.exp(logprob):.1%}) at the text, "
        f"{attribution.baseline_logprob:.3f} at the all-zero baseline."
    )
    last = len(attribution.tokens) - 1
    top, first = strongest(attribution, skip_last=skip_last), strongest(attribution, skip_last=False)
    name = f"{label(attribution.tokens[top])} (#{top}, {float(attribution.scores[top]):+.3f})"
    if not skip_last or last == 0:
        return f"{said} {name} scores the most."
    final = f"the last token, {label(attribution.tokens[last])} ({float(attribution.scores[last]):+.3f})"
    if first == last:
        return f"{said} {final[0].upper()}{final[1:]}, scores the most; before it, {name} does."
    return f"{said} {name} scores the most, more than {final}."


def summary(attribution: Attribution) -> str:
    top = strongest(attribution, skip_last=False)
    check = f"; completeness error {attribution.delta:+.1e}" if attribution.delta is not None else ""
    return (
        f"Attribution: {attribution.model_name}, {METHODS.get(attribution.method, attribution.method).lower()} of "
        f"log p({attribution.target_token!r}) = {attribution.logprob:.3f} over {len(attribution.tokens)} tokens; "
        f"the largest score: #{top} {attribution.tokens[top]!r} ({float(attribution.scores[top]):+.3f}){check}"
    )
