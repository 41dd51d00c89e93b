"""The decoding pages' "KV cache" section: what the model's own cache holds after each pass of greedy search from
the page's prompt, what each pass computes with the cache and without it (counted), and each pass's time both
ways, measured on the model now loaded (medians of repeated runs).

The section is a lazy expander (``ui.expander_ui``, ``kv=true`` in the link while open): closed, it runs nothing.
Open, it asks the gateway for one measurement to the Steps slider's maximum (``views.kv_cache.MEASURED_STEPS``),
shared by the whole server, and shows its first ``steps`` steps: moving the slider never runs the model again.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import explorer
from explorer import views
from explorer.compute.kv_cache import SHAPE_AXES, cache_rows, cost_rows, kib
from explorer.data.kv_cache import KVCacheTrace
from explorer.ui.results import run_view, show_view
from explorer.ui.text import literal, literal_table
from explorer.ui.widgets import expander_ui

KEY = "kv"  # the expander's key and link parameter


def kv_cache_section(model_name: str, prompt: str, steps: int, *, rows: int = 1) -> None:
    """The section, for greedy search from ``prompt`` to ``steps`` steps; ``rows``: the sequences a strategy runs
    at once (beam search keeps one cache row per beam)."""
    section = expander_ui("KV cache: what generation keeps, and what it saves", key=KEY, icon=":material/memory:")
    if not section.open:
        return
    with section:
        size = views.kv_cache.CacheSize(model_name, prompt, steps)
        try:
            trace = run_view(size)
        except explorer.InputError as error:
            st.info(literal(error))
            return
        _explain(trace, rows)
        show_view(size, trace, key="kv-size")
        st.table(literal_table(pd.DataFrame(cache_rows(trace))), hide_index=True)
        st.caption(f"Shape: {SHAPE_AXES}, read from the model's own cache object after the last step.")
        work = views.kv_cache.PassWork(model_name, prompt, steps)
        show_view(work, trace, key="kv-work")
        st.caption(work.caption(trace))
        times = views.kv_cache.PassTimes(model_name, prompt, steps)
        show_view(times, trace, key="kv-times")
        st.table(literal_table(pd.DataFrame(cost_rows(trace))), hide_index=True)
        st.caption(f"{times.caption(trace)} {_verified(trace)}")


def _explain(trace: KVCacheTrace, rows: int) -> None:
    """What the cache is, in this decoding's numbers."""
    decoder = trace.decoder
    prompt_tokens, steps = len(trace.prefill_tokens), trace.steps
    held = int(decoder.tokens[-1].max())
    prefill = (
        f"the encoder over the prompt's {trace.encoder_tokens} tokens and the decoder over its start token"
        if trace.encoder_tokens
        else f"the prompt's {prompt_tokens} tokens"
    )
    lines = [
        f"Greedy search from this prompt, pass by pass, for all {steps} steps (an end of sequence does not stop "
        "it). Each layer keeps the keys and values of every token it has read, so a step runs only the newest "
        f"token: its query meets the cached keys. The prefill ran {prefill} at once; after {steps} one-token steps "
        f"the decoder's cache holds {held} tokens, {kib(int(decoder.total_bytes[-1]))} at {trace.dtype} "
        f"({kib(trace.bytes_per_token)} per token: {decoder.num_layers} layers × keys and values × "
        f"{decoder.shape()[2]} KV heads × {decoder.shape()[4]} numbers × {_element_bytes(decoder)} bytes)."
    ]
    if trace.encoder_tokens:
        lines.append(
            f"The cross-attention cache holds the encoder's {trace.encoder_tokens} tokens: computed once by the "
            "prefill, read by every step, never grown."
        )
    if trace.grouping_saving > 1:
        lines.append(
            f"Grouped KV heads: {decoder.shape()[2]} KV heads serve {trace.num_heads} query heads, so the cache is "
            f"{trace.grouping_saving:g}× smaller than with a key and a value per query head."
        )
    else:
        lines.append(f"Each of the {trace.num_heads} query heads has its own keys and values (no grouped KV heads).")
    if rows > 1:
        lines.append(
            f"Beam search keeps one cache row per beam: {rows} × {kib(int(trace.total_bytes[-1]))} = "
            f"{kib(rows * int(trace.total_bytes[-1]))} after these steps."
        )
    lines.append(
        "Without the cache each pass runs the whole prefix again: the second chart counts what that computes, the "
        f"third times it on {literal(explorer.display_name(trace.model_name))} now."
    )
    st.markdown(" ".join([*trace.notes, *lines]))


def _element_bytes(stack) -> int:
    """Bytes per number in the cache, from its own sizes (layer 0's keys)."""
    return int(stack.nbytes[-1, 0, 0]) // int(stack.kv_heads[0] * stack.tokens[-1, 0] * stack.head_dim[0])


def _verified(trace: KVCacheTrace) -> str:
    largest = float(trace.logit_difference.max())
    verdict = "equal" if largest <= trace.tolerance else "NOT equal"
    return (
        f"Verified: at every pass the logits with the cache and without it are {verdict} (largest difference "
        f"{largest:.1e}, tolerance {trace.tolerance:g} for {trace.dtype}). Bytes are the cache tensors' own "
        "numel × element size. Times are wall-clock: they vary from run to run and with other work on the machine."
    )
