"""Bytes each view sends the browser, against BertViz's default payload for the same capture.

For all-MiniLM-L6-v2 (6 layers x 12 heads) at 64, 128 and 512 tokens: BertViz's own ``head_view`` and
``model_view`` HTML (``html_action="return"``: every weight as JSON text, all layers and heads) against this
app's views of the same content: the BertViz frames with their 8-bit base64 payload (with and without the
~330 kB of inlined JavaScript, which a browser caches per frame but the server sends each time), one head's
heatmap, the all-heads thumbnail figure and the step-by-step figure. At 512 tokens the app's line views are
limited to one layer (as the page does, with a notice), so that row also prints BertViz's size for that layer.

Run:  python bench/bench_payload.py [--lengths 64 128 512]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

import explorer
from explorer.compute.attention import score_stages
from explorer.render.bertviz import head_view_html, model_view_html, payload
from explorer.render.grid import heads_grid
from explorer.render.heatmap import attention_heatmap
from explorer.render.style import SCREEN, FigureInfo
from explorer.render.vectors import step_by_step_figure

LONG = 128  # the page limits line views to one layer past this many tokens


def text_of_length(tokenizer, count: int) -> str:
    words = ("the quick brown fox jumps over the lazy dog while time flies like an arrow " * 200).split()
    ids = tokenizer(" ".join(words), add_special_tokens=False)["input_ids"][: count - 2]
    return tokenizer.decode(ids)


def bertviz_default(view: str, capture, layers=None) -> int:
    from bertviz import head_view, model_view

    attention = [torch.tensor(a)[None] for a in capture.attentions]
    function = head_view if view == "head" else model_view
    kwargs = {"include_layers": layers} if layers else {}
    return len(function(attention=attention, tokens=list(capture.tokens), html_action="return", **kwargs).data)


def views(capture) -> dict[str, int]:
    """Bytes of each of the app's views of ``capture`` (figures as the JSON Streamlit sends)."""
    stack = capture.main
    long = len(capture.tokens) > LONG
    layers = [0] if long else None
    info = FigureInfo("bench")
    head_html = head_view_html(capture, layers=layers)
    model_html = model_view_html(capture, layers=layers)
    data = len(json.dumps(payload(capture, layers=layers)))
    stages = score_stages(stack, 0, 0)
    return {
        "head view frame": len(head_html),
        "model view frame": len(model_html),
        "line-view data only": data,
        "heatmap (one head)": len(attention_heatmap(stack, 0, 0, info=info, look=SCREEN).to_json()),
        "all-heads figure": len(heads_grid(stack.attentions, stack.masks_by_layer(), info=info).to_json()),
        "step-by-step figure": len(
            step_by_step_figure(
                stages, stack.queries[0, 0, 1], stack.keys[0, 0], stack.values[0, 0], stack.key_tokens, 1, info=info
            ).to_json()
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 512])
    args = parser.parse_args()
    lm = explorer.load_model(explorer.DEFAULT_ENCODER, device="cpu")
    print(
        "| tokens | BertViz head view | BertViz model view | our head view (JS incl.) | our model view (JS incl.) "
        "| our line-view data | head view ratio | data-only ratio | heatmap | all heads | step by step |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for length in args.lengths:
        capture = explorer.capture(lm, text_of_length(lm.tokenizer, length))
        layers = [0] if length > LONG else None
        head_default = bertviz_default("head", capture, layers)
        model_default = bertviz_default("model", capture, layers)
        ours = views(capture)
        note = " (layer 0 only, both sides)" if layers else ""
        print(
            f"| {len(capture.tokens)}{note} | {head_default / 1e3:,.0f} kB | {model_default / 1e3:,.0f} kB | "
            f"{ours['head view frame'] / 1e3:,.0f} kB | {ours['model view frame'] / 1e3:,.0f} kB | "
            f"{ours['line-view data only'] / 1e3:,.0f} kB | {head_default / ours['head view frame']:.1f}x | "
            f"{head_default / ours['line-view data only']:.1f}x | {ours['heatmap (one head)'] / 1e3:,.0f} kB | "
            f"{ours['all-heads figure'] / 1e3:,.0f} kB | {ours['step-by-step figure'] / 1e3:,.0f} kB |"
        )


if __name__ == "__main__":
    main()
