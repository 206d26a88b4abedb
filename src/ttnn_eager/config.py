"""User settings of the backend: `ttnn_eager.configure(...)` and the environment variables it reads.

    strict                TTNN_EAGER_STRICT=1: an aten op with no lowering raises instead of running on the CPU
    float32_storage       "bfloat16" (default) stores torch.float32 tensors as bfloat16 on the device, like a
                          TF32 switch: the torch-visible dtype stays float32. "float32" keeps them exact.
    weight_dtype          "bfloat16" (default) or "bfloat8_b": the device dtype of matmul weights.
    train_dtype           "float32" (default) or "bfloat16": the device dtype of float32 parameters that
                          require grad, and of what is made like them (optimizer states). See layout.py and
                          docs/training.md: bfloat16 storage drops updates smaller than ~2^-8 of a weight.
"""
from __future__ import annotations

import contextlib
import os

_FLOAT32_STORAGE = ("bfloat16", "float32")
_WEIGHT_DTYPES = ("bfloat16", "bfloat8_b")
_TRAIN_DTYPES = ("float32", "bfloat16")

settings = {
    "strict": os.environ.get("TTNN_EAGER_STRICT", "0").strip().lower() in ("1", "true", "yes", "on"),
    "float32_storage": os.environ.get("TTNN_EAGER_FLOAT32_STORAGE", "bfloat16"),
    "weight_dtype": os.environ.get("TTNN_EAGER_WEIGHT_DTYPE", "bfloat16"),
    "train_dtype": os.environ.get("TTNN_EAGER_TRAIN_DTYPE", "float32"),
}


def configure(*, strict: bool | None = None, float32_storage: str | None = None,
              weight_dtype: str | None = None, train_dtype: str | None = None) -> dict:
    """Change settings; returns the previous ones (pass them back to restore)."""
    previous = dict(settings)
    if float32_storage is not None and float32_storage not in _FLOAT32_STORAGE:
        raise ValueError(f"float32_storage must be one of {_FLOAT32_STORAGE}, not {float32_storage!r}")
    if weight_dtype is not None and weight_dtype not in _WEIGHT_DTYPES:
        raise ValueError(f"weight_dtype must be one of {_WEIGHT_DTYPES}, not {weight_dtype!r}")
    if train_dtype is not None and train_dtype not in _TRAIN_DTYPES:
        raise ValueError(f"train_dtype must be one of {_TRAIN_DTYPES}, not {train_dtype!r}")
    for key, value in (("strict", strict), ("float32_storage", float32_storage), ("weight_dtype", weight_dtype),
                       ("train_dtype", train_dtype)):
        if value is not None:
            settings[key] = value
    return previous


@contextlib.contextmanager
def strict(enabled: bool = True):
    """Within this block an aten op with no lowering raises (naming the op) instead of falling back."""
    previous = configure(strict=enabled)
    try:
        yield
    finally:
        settings.update(previous)
