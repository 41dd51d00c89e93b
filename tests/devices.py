"""The device the library tests run their models on, from ``EXPLORER_TEST_DEVICE`` (default ``cpu``).

``EXPLORER_TEST_DEVICE=cuda python3 -m pytest`` runs every library test with its model, inputs, references and
random generators on the GPU. Tests that drive the app (AppTest, the browser) stay on the CPU, as the app
loads its models itself.
"""

from __future__ import annotations

import os

import numpy as np
import torch

DEVICE = os.environ.get("EXPLORER_TEST_DEVICE", "cpu")


def on_device(values, **options) -> torch.Tensor:
    """A copy of ``values`` as a tensor on the test device."""
    return torch.tensor(np.asarray(values), device=DEVICE, **options)


def host(tensor: torch.Tensor) -> np.ndarray:
    """A tensor's values as a NumPy array on the host, in its own dtype."""
    return tensor.detach().cpu().numpy()
