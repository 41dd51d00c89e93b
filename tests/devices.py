"""Where the library tests run their models: ``EXPLORER_TEST_DEVICE`` ("cpu" by default, "cuda" on a GPU machine).

    EXPLORER_TEST_DEVICE=cuda python3 -m pytest

Models, their inputs, the references they are compared with and the random generators of sampling all live on
that device. Tests of the Streamlit app and the browser always run the app as a visitor gets it, on the CPU
(``tests/conftest.py`` sets the app's ``EXPLORER_DEVICE`` to ``cpu`` and gives them a CPU MiniLM).
"""

from __future__ import annotations

import os

import numpy as np
import torch

DEVICE = os.environ.get("EXPLORER_TEST_DEVICE", "cpu")


def on_device(model: torch.nn.Module) -> torch.nn.Module:
    """A reference model on the test device, in evaluation mode."""
    return model.to(DEVICE).eval()


def as_numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy()
