"""The capture layer: the only part of the explorer that talks to torch and transformers.

``loading`` turns a name into a ``LoadedModel`` switched to the recording attention of ``recorder``;
``capture`` runs one forward pass inside a recording and assembles the frozen arrays of ``explorer.data``
(``transfer`` brings them to the host, once per capture on a GPU); ``verification`` recomputes the weights from
those arrays on the model's device (what ``verify()`` returns). Everything downstream (``explorer.compute``,
``explorer.render``, the pages) works on the arrays alone.
"""
