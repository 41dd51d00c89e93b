"""Head-type probes for the pages: scored once per (model, n, seed) for the whole server."""

from __future__ import annotations

import explorer
from explorer.ui.captures import run_shared
from explorer.ui.models import cached_model


def cached_probes(model_name: str, n: int, seed: int) -> explorer.HeadProbes:
    lm = cached_model(model_name)
    key = ("head probes", model_name, n, seed)
    return run_shared(key, lambda: explorer.head_probes(lm, n=n, seed=seed), "Running the model on the probe…")
