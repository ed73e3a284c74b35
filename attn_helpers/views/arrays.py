"""Tensors and arrays in, float numpy arrays out: what every picture of this room draws from (torch only read)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["to_numpy"]


def to_numpy(values: Any) -> np.ndarray:
    """Lessons 04 and 06: A float numpy array from a tensor (any device, with or without grad), array or nested list."""
    if isinstance(values, torch.Tensor):
        return values.detach().to("cpu", torch.float64).numpy()
    return np.asarray(values, dtype=np.float64)


def _matrix(values: Any, name: str) -> np.ndarray:
    array = to_numpy(values)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix (N_q, N_k), got shape {list(array.shape)}; "
                         "select one batch element and one head first, e.g. weights[0, h]")
    return array


def _check_labels(labels: Sequence[str] | None, n: int, name: str, shape: Sequence[int]) -> None:
    if labels is not None and len(labels) != n:
        raise ValueError(f"{name} has {len(labels)} labels but the matrix of shape {list(shape)} needs {n}")
