"""How a result shows itself in Jupyter, without the data contract importing the figures.

Every result class with a page of its own derives from ``Displayed``. Its ``_repr_mimebundle_`` hands the result
to the one display function that ``explorer.views.display`` registers here when ``explorer`` is imported; that
function draws the result as its page does (the page's view). The data layer stays below the render and view
layers: nothing here imports them.
"""

from __future__ import annotations

from collections.abc import Callable

# Filled once by explorer.views.display (imported by explorer/__init__.py): (result, include, exclude) -> bundle.
_DISPLAY: dict[str, Callable[..., dict]] = {}


def register_display(mimebundle: Callable[..., dict]) -> None:
    """Make ``mimebundle(result, include, exclude)`` what every ``Displayed`` result shows in Jupyter."""
    _DISPLAY["mimebundle"] = mimebundle


class Displayed:
    """A result Jupyter draws as the app draws it (a mixin: no fields, no state)."""

    __slots__ = ()

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The figure its page draws, as plotly data and HTML, with a one-line summary (``explorer.render.notebook``
        says which mime types and why)."""
        mimebundle = _DISPLAY.get("mimebundle")
        if mimebundle is None:  # only while explorer itself is still being imported
            return {"text/plain": repr(self)}
        return mimebundle(self, include, exclude)
