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

In Jupyter every result shows itself as the figure its page draws (its page's view, ``explorer.views.display``,
imported here). Importing ``explorer`` never imports Streamlit; only
``explorer.ui`` and the app's pages do.
"""

from explorer.data import (
    AttentionCapture,
    AttentionStack,
    DecodeTrace,
    HeadAblationEffects,
    NextTokenLogits,
    TokenDistribution,
)
from explorer.data.lens import LogitLens
from explorer.data.probes import HeadProbes
from explorer.errors import InputError, ModelLoadError
from explorer.models.anatomy import model_anatomy
from explorer.models.capture import capture
from explorer.models.decoding import MAX_BEAMS, MAX_NEW_TOKENS, decode
from explorer.models.distribution import next_token_distribution, next_token_logits
from explorer.models.head_effects import head_ablation_effects
from explorer.models.inputs import embeddings, first_layer_input, summed_embeddings, tokenize
from explorer.models.lens import logit_lens
from explorer.models.loading import DEFAULT_DECODER, DEFAULT_ENCODER, DEFAULT_SEQ2SEQ, LoadedModel, load_model
from explorer.models.probes import head_probes
from explorer.models.reference import torch_attention
from explorer.views import display as _display  # noqa: F401  (results display as their pages' views)

__all__ = [
    "DEFAULT_DECODER",
    "DEFAULT_ENCODER",
    "DEFAULT_SEQ2SEQ",
    "MAX_BEAMS",
    "MAX_NEW_TOKENS",
    "AttentionCapture",
    "AttentionStack",
    "DecodeTrace",
    "HeadAblationEffects",
    "HeadProbes",
    "InputError",
    "LoadedModel",
    "LogitLens",
    "ModelLoadError",
    "NextTokenLogits",
    "TokenDistribution",
    "capture",
    "decode",
    "embeddings",
    "first_layer_input",
    "head_ablation_effects",
    "head_probes",
    "load_model",
    "logit_lens",
    "model_anatomy",
    "next_token_distribution",
    "next_token_logits",
    "summed_embeddings",
    "tokenize",
    "torch_attention",
]
