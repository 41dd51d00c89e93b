"""A class poll beside the model: each choice's share of the class's answers next to the model's own share.

HTML bars rather than a chart: a poll sits in a narrow column beside a slide's view on every student's screen,
and forty students redraw it at once when the teacher reveals, so it is plain markup with no script to load.
The choices come from the model's tokens and the visitor's text: every label is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from explorer.labels import visible

CLASS_COLOUR = "#2a6fb0"  # the app's primary colour: the class
MODEL_COLOUR = "#8c8c8c"  # the model, quieter: it is the reference, not the news


def class_shares(counts: Mapping[int, int], choices: int) -> list[float]:
    """Each choice's share of the class's answers (0 for all when nobody answered); answers beyond the choices
    (a poll of a slide whose choices changed) are left out."""
    counted = [max(int(counts.get(index, 0)), 0) for index in range(choices)]
    total = sum(counted)
    return [count / total if total else 0.0 for count in counted]


def poll_html(choices: Sequence[str], counts: Mapping[int, int], model: Sequence[float], answer: str) -> str:
    """Rows of ``choice · the class's bar · the model's bar``, the model's answer marked ✓."""
    shares = class_shares(counts, len(choices))
    total = sum(max(int(counts.get(index, 0)), 0) for index in range(len(choices)))
    rows = "".join(
        _row(choice, shares[index], counts.get(index, 0), model[index], choice == answer)
        for index, choice in enumerate(choices)
    )
    people = "1 answer" if total == 1 else f"{total} answers"
    return (
        '<div class="explorer-poll" style="font-size:max(15px,0.95vw);line-height:1.3">'
        f'<div style="margin-bottom:0.3em"><span style="color:{CLASS_COLOUR};font-weight:600">■ The class</span>'
        f' ({people}) &nbsp; <span style="color:{MODEL_COLOUR};font-weight:600">■ The model</span></div>'
        f"{rows}</div>"
    )


def _row(choice: str, share: float, count: int, model: float, right: bool) -> str:
    label = html.escape(visible(choice)) + (" ✓" if right else "")
    weight = "700" if right else "400"
    return (
        f'<div style="margin:0.25em 0"><div style="font-weight:{weight}">{label}</div>'
        f"{_bar(share, CLASS_COLOUR, f'{share:.0%} ({count})')}{_bar(model, MODEL_COLOUR, f'{model:.0%}')}</div>"
    )


def _bar(share: float, colour: str, text: str) -> str:
    # A light track under each bar: a small share still reads as a part of the whole, its number right beside it.
    width = f"{max(min(share, 1.0), 0.0) * 100:.1f}%"
    return (
        '<div style="display:flex;align-items:center;gap:0.4em">'
        '<div style="flex:1;background:#eef2f6;border-radius:2px">'
        f'<div style="width:{width};min-width:2px;height:0.8em;background:{colour};border-radius:2px"></div></div>'
        f'<span style="min-width:4.5em;font-size:0.85em">{html.escape(text)}</span></div>'
    )
