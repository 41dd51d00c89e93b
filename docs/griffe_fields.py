"""A griffe extension for the API reference (mkdocs.yml loads it): the docstrings' aligned field lists as tables.

The data contract's docstrings list their fields in two aligned columns, a name and what it holds, continued on
indented lines::

    tokens           display labels of the input
    hidden_states    [layer + 1, token, hidden] or None: the residual stream after the
                     embeddings and after each layer

Markdown would run those lines into one paragraph; here each such block becomes a table of name and meaning
(continuation lines joined), and reStructuredText's ``::`` before a literal block becomes ``:`` (Markdown's
indented block is already code).
"""

from __future__ import annotations

import re

import griffe

FIELD = re.compile(r"^(\S.*?)\s{2,}(\S.*)$")  # a name, two spaces or more, what it holds
CONTINUED = re.compile(r"^\s+\S")


def field_tables(text: str) -> str:
    """``text`` with every run of aligned field lines (two rows or more) written as a Markdown table."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        rows = []
        j = i
        while j < len(lines) and (FIELD.match(lines[j]) or (rows and CONTINUED.match(lines[j]))):
            if FIELD.match(lines[j]):
                rows.append(list(FIELD.match(lines[j]).groups()))
            else:
                rows[-1][1] += " " + lines[j].strip()
            j += 1
        if len(rows) >= 2:
            if out and out[-1].strip():
                out.append("")
            out += ["| name | holds |", "|---|---|"]
            out += [f"| {_cell(name)} | {_cell(meaning)} |" for name, meaning in rows]
            i = j
            continue
        out.append(re.sub(r"(\S)::$", r"\1:", lines[i]))
        i += 1
    return "\n".join(out)


def _cell(text: str) -> str:
    return re.sub(r"\s+", " ", text).replace("|", "\\|")


class FieldTables(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = field_tables(obj.docstring.value)
