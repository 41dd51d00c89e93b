"""The capture layer: the only part of the explorer that talks to torch and transformers.

How it works: ``loading`` turns a name into a ``LoadedModel`` whose attention modules are switched to the recording
attention of ``recorder`` (the quirks of each architecture are rows of the table in ``architectures``). Every
model run then happens inside a recording: ``capture`` runs one forward pass and assembles the frozen arrays of
``explorer.data`` (``transfer`` brings them to the host, once per capture on a GPU); ``verification`` recomputes
the weights from those arrays on the model's device (what ``verify()`` returns). Everything downstream
(``explorer.compute``, ``explorer.render``, the pages, a notebook) works on the arrays alone; ``explorer`` exports
the functions below as its public API, and the app reaches them through ``explorer.ui``.

Tensors here carry the axis names of ``explorer.data`` too ([batch, head, query, key] inside a forward pass, one
layer at a time); what leaves this package is NumPy on the CPU.

What each module holds:

- ``loading`` (models and tokenizers, with failures a person can act on), ``architectures`` (the quirks table),
  ``recorder`` (the recording attention), ``ablation`` (heads zeroed inside it), ``tokens`` (readable labels).
- ``capture`` (one forward pass), ``transfer`` (the one host copy), ``verification`` (``verify()``),
  ``local_attention`` (LongT5's blocked local attention as [query, key] maps), ``reference`` (torch's own
  attention, for tests).
- ``decoding`` (``decode``: greedy, beam and sampling exactly as ``generate()``, step by step), ``beam_search``
  (its beam steps and tree), ``generation_attention`` (attention while generating, stitched),
  ``distribution`` (next-token logits and the sampling pipeline).
- ``lens`` (the logit lens), ``probes`` (head-type probes), ``head_effects`` (each head ablated alone),
  ``anatomy`` (sizes, norms, positions, parameters), ``inputs`` (tokenization and embeddings).
"""
