"""BertViz's head view and model view as standalone HTML that works with no internet and sends little data.

BertViz (Vig, 2019) draws attention as lines between tokens. Its own functions load require.js, d3 and
jQuery from a CDN (a blank frame offline) and serialise every weight as JSON text (~20 bytes a value).
Here the same BertViz JavaScript (read from the installed ``bertviz`` package, not copied) runs with:

- **Libraries from installed PyPI packages, inlined**: d3 v5 from ``mpld3``, jQuery 3.7 from
  ``xstatic-jquery``; BertViz's two ``require`` calls are answered by a three-line shim, so nothing is
  fetched from anywhere.
- **A compact payload**: weights are quantised to 8 bits (0..255 for 0..1; lines cannot show finer
  differences: the largest error is 1/510 ≈ 0.002) and sent base64-encoded, about 1.33 bytes a value.
  The sentence-pair filters (A→A, B→B, A→B, B→A) are sliced in the browser from the one full matrix
  instead of being sent five times.
- **Inert user text**: tokens travel inside a JSON string in a ``<script>``, with ``<``, ``>``, ``&`` and the
  line separators escaped, and BertViz writes them into the page with d3's ``.text()``.

Each function returns a complete HTML document for ``st.iframe(html, height=...)`` (srcdoc).
"""

from __future__ import annotations

import base64
import html
import importlib.util
import json
import uuid
from functools import lru_cache
from pathlib import Path

import numpy as np

from explorer.data import AttentionCapture

# The views' JavaScript and the libraries it needs: (package, path inside it).
BERTVIZ_JS = {"head": ("bertviz", "head_view.js"), "model": ("bertviz", "model_view.js")}
D3 = ("mpld3", "js/d3.v5.min.js")
JQUERY = ("xstatic.pkg.jquery", "data/jquery.min.js")
FILTER_NAMES = {"encoder": "Encoder", "decoder": "Decoder", "cross": "Cross"}

# Turns the compact payload back into BertViz's params before its code runs; answers its require calls.
_PRELUDE = """
(function () {
  const packed = JSON.parse(document.getElementById("bertviz-data").textContent);
  function unpack(block) {
    const bytes = Uint8Array.from(atob(block.b64), (c) => c.charCodeAt(0));
    const [L, H, Q, K] = block.shape;
    const out = [];
    for (let l = 0; l < L; l++) { const heads = [];
      for (let h = 0; h < H; h++) { const rows = [];
        for (let q = 0; q < Q; q++) { const row = new Array(K), base = ((l * H + h) * Q + q) * K;
          for (let k = 0; k < K; k++) row[k] = bytes[base + k] / 255;
          rows.push(row); }
        heads.push(rows); }
      out.push(heads); }
    return out;
  }
  const stacks = packed.stacks.map((s) => ({attn: unpack(s.attn), left: s.left_text, right: s.right_text}));
  packed.params.attention = packed.filters.map((f) => {
    const s = stacks[f.stack], [r0, r1] = f.rows, [c0, c1] = f.cols;
    return {name: f.name, left_text: s.left.slice(r0, r1), right_text: s.right.slice(c0, c1),
            attn: s.attn.map((heads) => heads.map((rows) => rows.slice(r0, r1).map((row) => row.slice(c0, c1))))};
  });
  window.__explorerBertvizParams = packed.params;
  window.require = {config: function () {}};
  window.requirejs = function (deps, body) { body(window.jQuery, window.d3); };
})();
"""


# Enlarged for a projector, the head view's lines are also drawn thicker (their opacity still gives the weight).
_THICK = " #vis line { stroke-width: 3px; }"


def head_view_html(
    capture: AttentionCapture,
    *,
    stacks: tuple[str, ...] | None = None,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
    layer: int | None = None,
    uid: str | None = None,
    zoom: float = 1.0,
) -> str:
    """BertViz's head view: one layer, lines from each token to those it attends to, one colour per head.

    ``stacks`` picks which of the capture's stacks to offer (default: all; encoder-decoder models get
    BertViz's Encoder / Decoder / Cross filter, sentence pairs its A/B filter). ``layers`` limits the
    layers sent (long inputs), ``heads`` the heads selected at first, ``layer`` the layer shown first.
    ``zoom`` enlarges the whole view (a projector); ``frame_height`` takes the same factor.
    """
    included = _layers(capture, layers)
    params = {
        "default_filter": "0",
        "root_div_id": uid or _uid(),
        # BertViz looks the layer *number* up in include_layers (an index here showed nothing for layer > 0).
        "layer": layer if layer in included else included[0],
        "heads": heads,
        "include_layers": included,
    }
    return _document("head", capture, stacks, included, None, params, zoom)


def model_view_html(
    capture: AttentionCapture,
    *,
    stacks: tuple[str, ...] | None = None,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
    uid: str | None = None,
    zoom: float = 1.0,
) -> str:
    """BertViz's model view: a thumbnail of every (layer, head), click one to enlarge it.

    ``layers`` and ``heads`` limit what is sent and drawn (long inputs); ``zoom`` as for the head view.
    """
    included = _layers(capture, layers)
    total_heads = capture.main.num_heads
    head_list = list(range(total_heads)) if heads is None else sorted(set(heads))
    params = {
        "default_filter": "0",
        "display_mode": "light",
        "root_div_id": uid or _uid(),
        "include_layers": included,
        "include_heads": head_list,
        "total_heads": total_heads,
    }
    return _document("model", capture, stacks, included, head_list, params, zoom)


def payload(capture: AttentionCapture, *, layers=None, heads=None, stacks=None) -> dict:
    """The data part of a view (what the weights cost to send), as the JSON object the page embeds."""
    included = _layers(capture, layers)
    return _payload(capture, stacks, included, heads, {})


def decode_payload(packed: dict) -> list[dict]:
    """Python's mirror of the page's unpacking (for tests): the filters BertViz receives, weights as floats."""
    stacks = []
    for block in packed["stacks"]:
        values = np.frombuffer(base64.b64decode(block["attn"]["b64"]), dtype=np.uint8).astype(np.float32) / 255
        stacks.append((values.reshape(block["attn"]["shape"]), block["left_text"], block["right_text"]))
    filters = []
    for f in packed["filters"]:
        attn, left, right = stacks[f["stack"]]
        (r0, r1), (c0, c1) = f["rows"], f["cols"]
        filters.append(
            {"name": f["name"], "attn": attn[..., r0:r1, c0:c1], "left_text": left[r0:r1], "right_text": right[c0:c1]}
        )
    return filters


def frame_height(view: str, capture: AttentionCapture, *, layers: int | None = None, zoom: float = 1.0) -> int:
    """Pixels the iframe needs so the view shows whole, from BertViz's own layout constants (times ``zoom``)."""
    return int(zoom * _natural_height(view, capture, layers))


def head_view_zoom(capture: AttentionCapture, height: int) -> float:
    """How much to enlarge the head view so that it is ``height`` pixels tall (between 1 and 3 times)."""
    return float(min(max(height / _natural_height("head", capture, None), 1.0), 3.0))


def _natural_height(view: str, capture: AttentionCapture, layers: int | None) -> float:
    tokens = max(max(len(s.query_tokens), len(s.key_tokens)) for s in capture.stacks.values())
    chrome = 60  # the selects above the drawing, and the page's padding
    if view == "head":
        return chrome + 30 + 22.5 * tokens + 20  # TEXT_TOP + BOXHEIGHT per token
    rows = layers if layers is not None else capture.main.num_layers
    thumbnail = tokens * 7 * 12 / capture.main.num_heads + 10  # thumbnailBoxHeight per token + padding
    detail = tokens * 18 + 2 * 15 + 25  # the enlarged head shown on click
    return chrome + 60 + max(rows * thumbnail, detail)


def _document(view: str, capture, stacks, included, heads, params, zoom: float = 1.0) -> str:
    packed = _payload(capture, stacks, included, heads, params)
    select = ""
    if len(packed["filters"]) > 1:
        options = "".join(
            f'<option value="{i}">{html.escape(f["name"])}</option>' for i, f in enumerate(packed["filters"])
        )
        select = f'Attention: <select id="filter">{options}</select>'
    layer_select = 'Layer: <select id="layer"></select>' if view == "head" else ""
    root = html.escape(params["root_div_id"])
    code = _read(*BERTVIZ_JS[view]).replace("PYTHON_PARAMS", "window.__explorerBertvizParams")
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>BertViz {view} view</title>
<style>body {{ margin: 0; padding: 8px; background: white; zoom: {zoom:g}; }}{_THICK if zoom > 1 else ""}</style></head>
<body>
<div id="{root}" style="font-family:'Helvetica Neue', Helvetica, Arial, sans-serif;">
  <span style="user-select:none">{layer_select} {select}</span>
  <div id="vis"></div>
</div>
<script type="application/json" id="bertviz-data">{_script_json(packed)}</script>
<script>{_read(*D3)}</script>
<script>{_read(*JQUERY)}</script>
<script>{_PRELUDE}</script>
<script>{code}</script>
</body></html>"""


def _payload(capture, stacks, included, heads, params) -> dict:
    names = [name for name in (stacks or tuple(capture.stacks)) if name in capture.stacks]
    blocks, filters = [], []
    for index, name in enumerate(names):
        stack = capture.stacks[name]
        weights = stack.attentions[included]
        if heads is not None:
            weights = weights[:, heads]
        blocks.append(
            {
                "attn": _pack(weights),
                "left_text": list(_pretty(stack.query_tokens)),
                "right_text": list(_pretty(stack.key_tokens)),
            }
        )
        rows, cols = len(stack.query_tokens), len(stack.key_tokens)
        if len(names) > 1:
            filters.append({"name": FILTER_NAMES.get(name, name), "stack": index, "rows": [0, rows], "cols": [0, cols]})
        else:
            filters += _pair_filters(capture.segment_b_start if name == "encoder" else None, index, rows, cols)
    return {"params": params, "stacks": blocks, "filters": filters}


def _pair_filters(b_start, stack: int, rows: int, cols: int) -> list[dict]:
    """BertViz's sentence-pair filter: All, then A→A, B→B, A→B, B→A as slices of the one matrix."""
    full = {"name": "All", "stack": stack, "rows": [0, rows], "cols": [0, cols]}
    if b_start is None:
        return [{**full, "name": None}]
    a, b = [0, b_start], [b_start, rows]
    return [
        full,
        {"name": "Sentence A -> Sentence A", "stack": stack, "rows": a, "cols": a},
        {"name": "Sentence B -> Sentence B", "stack": stack, "rows": b, "cols": b},
        {"name": "Sentence A -> Sentence B", "stack": stack, "rows": a, "cols": b},
        {"name": "Sentence B -> Sentence A", "stack": stack, "rows": b, "cols": a},
    ]


def _pack(weights: np.ndarray) -> dict:
    """8-bit quantisation of [layer, head, query, key] weights in [0, 1], base64 encoded."""
    quantised = np.clip(np.rint(np.nan_to_num(weights, nan=0.0) * 255), 0, 255).astype(np.uint8)
    return {"b64": base64.b64encode(quantised.tobytes()).decode("ascii"), "shape": list(quantised.shape)}


def _pretty(tokens) -> tuple[str, ...]:
    """As BertViz's ``prettify_tokens``: byte-level and SentencePiece space marks as spaces."""
    return tuple(t.replace("Ġ", " ").replace("▁", " ").replace("</w>", "") for t in tokens)


def _script_json(value) -> str:
    """JSON that cannot end its ``<script>`` element or start markup, whatever the tokens contain."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


def _layers(capture: AttentionCapture, layers) -> list[int]:
    count = capture.main.num_layers
    return list(range(count)) if layers is None else sorted({layer for layer in layers if 0 <= layer < count})


def _uid() -> str:
    return f"bertviz-{uuid.uuid4().hex}"


@lru_cache(maxsize=8)
def _read(package: str, relative: str) -> str:
    """A file shipped inside an installed package (found without importing it: mpld3 imports matplotlib)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"The {package} package is needed for BertViz's views offline: pip install it.")
    return (Path(next(iter(spec.submodule_search_locations))) / relative).read_text(encoding="utf-8")
