"""Records are cached and shared by every session: their arrays are made read-only once built."""

from __future__ import annotations

import numpy as np


def freeze_arrays(record) -> None:
    """Make every NumPy array field of a dataclass instance read-only."""
    for value in vars(record).values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
