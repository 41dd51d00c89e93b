"""The compute layer: pure arithmetic on the arrays of ``explorer.data``, in NumPy (no torch, no figures, no
Streamlit).

How it works: every function takes arrays or data records and returns arrays, numbers or plain rows (a table is a
list of dicts); nothing runs a model. So a page recomputes what a control changes from one cached result, at
every move: the sampling pipeline from cached logits, one head's score stages from cached queries and keys, a
beam search as it stood at any step from its recorded tree. ``explorer.models`` calls it where recording needs the
same arithmetic (sampling settings, a beam's path, probe scores); ``explorer.render`` and the pages call the
rest. Tests hold it to hand-computed matrices and to torch's and transformers' own code.

Shapes use the axis names of ``explorer.data``: attention weights [layer, head, query, key], logits and
probabilities [vocab].

What each module holds:

- ``attention``: one head's score stages (q·k, scaled, capped, biased, masked, weights), recomputed from its
  queries and keys.
- ``statistics``: head statistics (entropy, distance, shares) and view transforms (tokens hidden, rollout).
- ``positions``: sinusoidal and rotary position signals; how context changes a token, layer by layer.
- ``sampling``: transformers' sampling pipeline (temperature, top-k, top-p, min-p) on a logits vector; ranks.
- ``decoding``: the decoding pages' tables (greedy, forced, sampled, finished pool, n-gram bans), the beam tree
  (node positions, paths, the tree at a step, status counts) and repetition checks.
- ``probes``: head-type probe scores, their names and meanings, and what an evenly spreading head scores.
- ``anatomy``: the lecture's parameter counts from a model's sizes.
- ``quadrature``: where integrated gradients' points go on the path (one plain rule, or panels where f changes).
"""
