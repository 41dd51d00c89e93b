"""Attention & Decoding Explorer: see what a transformer attends to and how it picks the next token.

The public API, for notebooks and other programs::

    import explorer
    lm = explorer.load_model(explorer.DEFAULT_ENCODER)      # or any Hub id / local folder
    cap = explorer.capture(lm, "time flies like an arrow")
    cap.attentions          # [layer, head, query, key], the model's own weights
    cap.queries, cap.keys   # the vectors those weights were computed from
    cap.verify()            # max |softmax(scale * q . k + bias) - attentions|

    gen = explorer.load_model(explorer.DEFAULT_DECODER)
    trace = explorer.decode(gen, "It is a truth", strategy="beam", num_beams=4)   # = generate(), recorded
    dist = explorer.next_token_distribution(gen, "It is a truth", temperature=0.7, top_p=0.9)
    ablated = explorer.next_token_logits(gen, "It is a truth", ablate=((0, 1),))  # layer 0, head 1 zeroed
    effects = explorer.head_ablation_effects(gen, "It is a truth")  # [layer, head]: each head's effect
    cache = explorer.kv_cache(gen, "It is a truth", steps=8)  # the KV cache pass by pass, timed with and without
    patched = explorer.patch(gen, "The girl was sure that", "The boy was sure that")  # .residual [layer, position]
    why = explorer.attribute(gen, "Elizabeth knew that")  # .scores [token] for the top next token's log p
    why.verification()      # integrated gradients' completeness: Σ scores against log p(text) − log p(baseline)

In Jupyter every result shows itself as the figure its page draws (its page's view, ``explorer.views.display``,
imported here). Importing ``explorer`` never imports Streamlit; only
``explorer.ui`` and the app's pages do.
"""

import importlib

from explorer.data import (
    AttentionCapture,
    AttentionStack,
    DecodeTrace,
    HeadAblationEffects,
    NextTokenLogits,
    TokenDistribution,
)
from explorer.data.attribution import Attribution
from explorer.data.kv_cache import KVCacheTrace
from explorer.data.lens import LogitLens
from explorer.data.patching import Patching
from explorer.data.probes import HeadProbes
from explorer.errors import InputError, ModelLoadError, NotApplicable
from explorer.views import display as _display  # noqa: F401  (results display as their pages' views)

# The model-facing functions import torch and transformers (about 6 s): loaded at first use, so that the app can
# draw its first line (explorer.ui.loading) before a server's first visitor waits for them.
_LAZY = {
    "model_anatomy": "explorer.models.anatomy",
    "attribute": "explorer.models.attribution",
    "capture": "explorer.models.capture",
    "decode": "explorer.models.decoding",
    "decode_together": "explorer.models.decoding",
    "next_token_distribution": "explorer.models.distribution",
    "next_token_logits": "explorer.models.distribution",
    "head_ablation_effects": "explorer.models.head_effects",
    "embeddings": "explorer.models.inputs",
    "first_layer_input": "explorer.models.inputs",
    "summed_embeddings": "explorer.models.inputs",
    "tokenize": "explorer.models.inputs",
    "kv_cache": "explorer.models.kv_cache",
    "logit_lens": "explorer.models.lens",
    "patch": "explorer.models.patching",
    "DEFAULT_DECODER": "explorer.models.loading",
    "DEFAULT_ENCODER": "explorer.models.loading",
    "DEFAULT_SEQ2SEQ": "explorer.models.loading",
    "PROSE_GPT2": "explorer.models.loading",
    "LoadedModel": "explorer.models.loading",
    "load_model": "explorer.models.loading",
    "head_probes": "explorer.models.probes",
    "torch_attention": "explorer.models.reference",
    "MAX_BEAMS": "explorer.models.decoding",
    "MAX_NEW_TOKENS": "explorer.models.decoding",
    "display_name": "explorer.models.loading",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'explorer' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # once: later reads find it without this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "DEFAULT_DECODER",
    "DEFAULT_ENCODER",
    "DEFAULT_SEQ2SEQ",
    "MAX_BEAMS",
    "MAX_NEW_TOKENS",
    "PROSE_GPT2",
    "AttentionCapture",
    "AttentionStack",
    "Attribution",
    "DecodeTrace",
    "HeadAblationEffects",
    "HeadProbes",
    "InputError",
    "KVCacheTrace",
    "LoadedModel",
    "LogitLens",
    "ModelLoadError",
    "NextTokenLogits",
    "NotApplicable",
    "Patching",
    "TokenDistribution",
    "attribute",
    "capture",
    "decode",
    "decode_together",
    "embeddings",
    "first_layer_input",
    "head_ablation_effects",
    "head_probes",
    "kv_cache",
    "load_model",
    "logit_lens",
    "model_anatomy",
    "next_token_distribution",
    "next_token_logits",
    "patch",
    "summed_embeddings",
    "tokenize",
    "torch_attention",
]
