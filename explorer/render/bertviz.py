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

Each ``*_view_html`` function returns a complete HTML document for ``st.iframe(html, height=...)`` (srcdoc);
``head_view_slide`` and ``model_view_slide`` lay the same view out as a 1920×1080 slide with the house title,
as an ``HtmlFigure`` that ``explorer.render.export`` turns into PNG, SVG and HTML (BertViz itself cannot export
images: its issues #13 and #33).
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
from explorer.render.export import HtmlFigure
from explorer.render.style import FONT, HEAD_COLOURS, INK, MUTED, SLIDE, FigureInfo, Look, escape

# The views' JavaScript and the libraries it needs: (package, path inside it).
BERTVIZ_JS = {"head": ("bertviz", "head_view.js"), "model": ("bertviz", "model_view.js")}
D3 = ("mpld3", "js/d3.v5.min.js")
JQUERY = ("xstatic.pkg.jquery", "data/jquery.min.js")
FILTER_NAMES = {"encoder": "Encoder", "decoder": "Decoder", "cross": "Cross"}
# BertViz's head view layout (head_view.js): a token column, the lines between, a token column.
BOX_WIDTH = 110
MATRIX_WIDTH = 115
PADDING = 8  # the frame's body padding, each side
MODEL_WIDTH = 970  # model_view.js's DIV_WIDTH
# The head view's line area is a constant of BertViz's code; made a parameter so the view can fill a wide window.
_MATRIX_CONSTANT = "const MATRIX_WIDTH = 115;"

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
  // BertViz colours heads (head view) and layers (model view) with d3's ten categorical colours: an eleventh head
  // would take the first one's. As many distinct colours as there are heads and layers instead.
  window.d3.schemeCategory10 = packed.colours;
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
    width: int | None = None,
) -> str:
    """BertViz's head view: one layer, lines from each token to those it attends to, one colour per head.

    ``stacks`` picks which of the capture's stacks to offer (default: all; encoder-decoder models get
    BertViz's Encoder / Decoder / Cross filter, sentence pairs its A/B filter). ``layers`` limits the
    layers sent (long inputs), ``heads`` the heads selected at first, ``layer`` the layer shown first.
    ``zoom`` enlarges the whole view (a projector); ``frame_height`` takes the same factor. ``width`` (the
    frame's CSS pixels) stretches the lines between the two token columns so that the view fills it.
    """
    included = _layers(capture, layers)
    params = _head_params(capture, included, heads, layer, uid)
    if width is not None:
        params["matrix_width"] = matrix_width(width / zoom - 2 * PADDING)
    return _document("head", capture, stacks, included, None, params, zoom)


def matrix_width(drawing_width: float) -> float:
    """The width of the line area that makes the head view ``drawing_width`` wide (BertViz's own at least)."""
    return max(MATRIX_WIDTH, drawing_width - 2 * BOX_WIDTH)


def _head_params(capture: AttentionCapture, included: list[int], heads, layer, uid) -> dict:
    numbers = _layer_numbers(capture, included)
    return {
        "default_filter": "0",
        "root_div_id": uid or _uid(),
        # BertViz looks the layer *number* up in include_layers (an index here showed nothing for layer > 0).
        "layer": numbers[included.index(layer) if layer in included else 0],
        "heads": heads,
        "include_layers": numbers,
    }


def _layer_numbers(capture: AttentionCapture, included: list[int]) -> list[int]:
    """The labels BertViz shows for the ``included`` layers (it reads their data by position): the model's own
    numbers, which differ from the indices where layers are left out (Funnel's pooled layers)."""
    return [capture.main.layer_number(layer) for layer in included]


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
    params = _model_params(_layer_numbers(capture, included), head_list, total_heads, uid)
    return _document("model", capture, stacks, included, head_list, params, zoom)


def _model_params(layer_numbers: list[int], head_list: list[int], total_heads: int, uid) -> dict:
    return {
        "default_filter": "0",
        "display_mode": "light",
        "root_div_id": uid or _uid(),
        "include_layers": layer_numbers,
        "include_heads": head_list,
        "total_heads": total_heads,
    }


def head_view_slide(
    capture: AttentionCapture,
    *,
    info: FigureInfo,
    look: Look = SLIDE,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
    layer: int | None = None,
) -> HtmlFigure:
    """The head view as a ``look``-sized slide: the house title, BertViz's layer menu, then the lines of
    ``layer`` for ``heads`` (as the page draws them) enlarged to the slide's height and stretched to its width."""
    included = _layers(capture, layers)
    params = _head_params(capture, included, heads, layer, None)
    room_width, room_height = _room(look)
    zoom = min(room_height / _drawing_height("head", capture, len(included)), 4.0)
    params["matrix_width"] = matrix_width(room_width / zoom)
    return HtmlFigure(_slide_document("head", capture, included, None, params, zoom, info, look))


def model_view_slide(
    capture: AttentionCapture,
    *,
    info: FigureInfo,
    look: Look = SLIDE,
    layers: list[int] | None = None,
    heads: list[int] | None = None,
) -> HtmlFigure:
    """The model view as a ``look``-sized slide: the house title above every layer's and head's thumbnail,
    enlarged to fit the slide (click one in the HTML export to enlarge it)."""
    included = _layers(capture, layers)
    total_heads = capture.main.num_heads
    head_list = list(range(total_heads)) if heads is None else sorted(set(heads))
    params = _model_params(_layer_numbers(capture, included), head_list, total_heads, None)
    room_width, room_height = _room(look)
    zoom = min(room_height / _drawing_height("model", capture, len(included)), room_width / MODEL_WIDTH, 3.0)
    return HtmlFigure(_slide_document("model", capture, included, head_list, params, zoom, info, look))


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
    root = html.escape(params["root_div_id"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>BertViz {view} view</title>
<style>body {{ margin: 0; padding: {PADDING}px; background: white; zoom: {zoom:g}; }}{_THICK if zoom > 1 else ""}
</style></head>
<body>
<div id="{root}" style="font-family:'Helvetica Neue', Helvetica, Arial, sans-serif;">
  <span style="user-select:none">{_menus(view, packed)}</span>
  <div id="vis"></div>
</div>
{_scripts(view, packed)}
{_FIT_WIDTH.replace("ZOOM", f"{zoom:g}") if view == "model" else ""}
</body></html>"""


# BertViz draws the model view 970 px wide whatever the window: narrower, the frame scrolled sideways. Scaled down
# to the frame's width instead (never up: its thumbnails are drawn for 970 px).
_FIT_WIDTH = f"""<script>
(function () {{
  function fit() {{
    const room = document.documentElement.clientWidth / ZOOM - 2 * {PADDING};
    document.getElementById("vis").style.zoom = Math.min(1, room / {MODEL_WIDTH});
  }}
  fit();
  window.addEventListener("resize", fit);
}})();
</script>"""


def _slide_document(view: str, capture, included, heads, params, zoom: float, info: FigureInfo, look: Look) -> str:
    """A ``look``-sized page: the house title and subtitle (an <svg>, so the SVG export keeps them), BertViz's
    menus at the slide's text size, and the view's drawing enlarged by ``zoom``."""
    packed = _payload(capture, None, included, heads, params)
    root = html.escape(params["root_div_id"])
    thick = " #vis line { stroke-width: 3px; }" if view == "head" and zoom > 1 else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(info.title())}</title>
<style>body {{ margin: 0; background: white; }}
#slide {{ width: {look.width}px; height: {look.height}px; overflow: hidden; background: white; }}
#slide-title {{ display: block; }}
#{root} {{ padding: 0 {_SIDE}px; font: {look.font_size}px 'Helvetica Neue', Helvetica, Arial, sans-serif; }}
#{root} select {{ font-size: {look.font_size}px; }}
#vis {{ zoom: {zoom:.4f}; margin-top: 8px; }}{thick}</style></head>
<body>
<div id="slide">
{_title_svg(info, look)}
<div id="{root}">
  <span style="user-select:none; color: {MUTED}">{_menus(view, packed)}</span>
  <div id="vis"></div>
</div>
</div>
{_scripts(view, packed)}
</body></html>"""


_SIDE = 28  # the slide's left and right margin, CSS pixels


def _room(look: Look) -> tuple[float, float]:
    """(width, height) left on a ``look``-sized slide for the view's drawing: below the title and the menus."""
    menus = 2 * look.font_size + 8
    return look.width - 2 * _SIDE, look.height - look.title_band - menus - 12


def _drawing_height(view: str, capture: AttentionCapture, layers: int) -> float:
    """The height of BertViz's <svg> (its own layout constants), before any zoom."""
    tokens = max(max(len(s.query_tokens), len(s.key_tokens)) for s in capture.stacks.values())
    if view == "head":
        return 30 + 22.5 * tokens  # TEXT_TOP + BOXHEIGHT per token
    axis = 15 + 5 + 13 + 5  # HEADING_TEXT_SIZE + HEADING_PADDING + TEXT_SIZE + TEXT_PADDING
    thumbnail = tokens * 7 * 12 / capture.main.num_heads + 10
    detail = tokens * 18 + 2 * 15 + 25
    return max(layers * thumbnail + axis, detail)


def _title_svg(info: FigureInfo, look: Look) -> str:
    """The house title and subtitle (as ``style.finish`` places them on every figure), drawn as an <svg>."""
    left, top = look.width * 0.015, 8
    title_y = top + look.title_size
    subtitle_y = title_y + look.subtitle_size * 1.5
    font = html.escape(FONT, quote=True)
    return (
        f'<svg id="slide-title" xmlns="http://www.w3.org/2000/svg" width="{look.width}" height="{look.title_band}">'
        f'<text x="{left:g}" y="{title_y:g}" font-family="{font}" font-size="{look.title_size}" fill="{INK}">'
        f"{escape(info.title())}</text>"
        f'<text x="{left:g}" y="{subtitle_y:g}" font-family="{font}" font-size="{look.subtitle_size}" '
        f'fill="{MUTED}">{escape(info.subtitle())}</text></svg>'
    )


def _menus(view: str, packed: dict) -> str:
    """BertViz's menus: the layer (head view) and, where there is a choice, the attention filter."""
    select = ""
    if len(packed["filters"]) > 1:
        options = "".join(
            f'<option value="{i}">{html.escape(f["name"])}</option>' for i, f in enumerate(packed["filters"])
        )
        select = f'<label>Attention: <select id="filter">{options}</select></label>'
    layer_select = '<label>Layer: <select id="layer"></select></label>' if view == "head" else ""
    return f"{layer_select} {select}"


def _scripts(view: str, packed: dict) -> str:
    """The payload, the libraries, the shim and BertViz's own code, inlined."""
    code = _read(*BERTVIZ_JS[view]).replace("PYTHON_PARAMS", "window.__explorerBertvizParams")
    if view == "head":
        if _MATRIX_CONSTANT not in code:
            raise RuntimeError("This bertviz version lays the head view out differently: install bertviz 1.4.1.")
        code = code.replace(_MATRIX_CONSTANT, "const MATRIX_WIDTH = params.matrix_width || 115;")
    return f"""<script type="application/json" id="bertviz-data">{_script_json(packed)}</script>
<script>{_read(*D3)}</script>
<script>{_read(*JQUERY)}</script>
<script>{_PRELUDE}</script>
<script>{code}</script>"""


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
    count = max(capture.main.num_heads, capture.main.num_layers)
    return {"params": params, "stacks": blocks, "filters": filters, "colours": head_colours(count)}


def head_colours(count: int) -> list[str]:
    """``count`` colours for BertViz's heads and layers, all different while ``HEAD_COLOURS`` lasts."""
    return [HEAD_COLOURS[i % len(HEAD_COLOURS)] for i in range(count)]


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
