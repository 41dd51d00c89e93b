"""The logit lens for the pages: one reading per (model, text, target) for the whole server."""

from __future__ import annotations

import explorer
from explorer.ui.captures import run_shared
from explorer.ui.models import cached_model


def cached_lens(model_name: str, text: str, target: str | None = None) -> explorer.LogitLens:
    """``explorer.logit_lens`` of the cached model, once per distinct input (moving the position slider reuses it)."""
    lm = cached_model(model_name)
    key = ("logit lens", model_name, text, target)
    return run_shared(
        key, lambda: explorer.logit_lens(lm, text, target=target), "Reading every layer through the lens…"
    )
