"""User settings of the backend: `ttnn_eager.configure(...)` and the environment variables it reads.

    strict                TTNN_EAGER_STRICT=1: an aten op with no lowering raises instead of running on the CPU
    float32_storage       "bfloat16" (default) stores torch.float32 tensors as bfloat16 on the device, like a
                          TF32 switch: the torch-visible dtype stays float32. "float32" keeps them exact.
                          "mixed": module parameters (nn.Parameter) as bfloat16, every other float32 tensor
                          and every computed value as float32 -- the weights take their bfloat16 bytes, the
                          activations keep float32's precision (docs/numerics.md). With math_fidelity
                          "HiFi4", a matmul of float32-stored operands is computed at float32's precision (four
                          products of bfloat16 and float32 parts: the matrix engine reads float32 as TF32) unless
                          torch.set_float32_matmul_precision("high" or "medium") allows one TF32 product
    weight_dtype          "bfloat16" (default) or "bfloat8_b": the device dtype of matmul weights.
    math_fidelity         None (default: each op's choice in layout.COMPUTE) or "LoFi", "HiFi2", "HiFi3",
                          "HiFi4" for every op that takes a compute-kernel config (TTNN_EAGER_MATH_FIDELITY)
    fp32_dest_acc         None (per op) or True/False: accumulate in a 32-bit Dst (TTNN_EAGER_FP32_DEST_ACC)
    math_approx           None (per op) or True/False: the vector engine's approximate functions
    shadow_numerics       "hardware" (default): on a mock device, matrix-engine products are computed as the
                          Tensix hardware does for the config in use (numerics.py); "exact": float32 golden
                          functions (TTNN_EAGER_SHADOW_NUMERICS)
    float64               "refuse" (default): a float64 tensor on a ttnn device is a TypeError, as on MPS.
                          "float32": float64 tensors are kept as float64 to PyTorch (dtype, results, host
                          copies) but stored and computed as float32 on the device, with a one-time warning
                          saying so (as JAX does without x64; the int64-as-int32 policy's float twin)
                          (TTNN_EAGER_FLOAT64)
    train_dtype           "float32" (default) or "bfloat16": the device dtype of float32 parameters that
                          require grad, and of what is made like them (optimizer states). See layout.py and
                          docs/training.md: bfloat16 storage drops updates smaller than ~2^-8 of a weight.
    eager_fusion          True (default): in eager mode, with autograd not recording, a convolution's result is
                          deferred until its first reader, so that an eval batch norm and a ReLU/ReLU6/SiLU
                          that read it first fold into its one ttnn.conv2d (lowerings/conv.py, docs/vision.md);
                          False runs every op as it comes (TTNN_EAGER_FUSION=0)
"""
from __future__ import annotations

import contextlib
import os

_FLOAT32_STORAGE = ("bfloat16", "float32", "mixed")
_WEIGHT_DTYPES = ("bfloat16", "bfloat8_b")
FIDELITIES = ("LoFi", "HiFi2", "HiFi3", "HiFi4")  # ttnn.MathFidelity, fewest phases first
_SHADOW_NUMERICS = ("hardware", "exact")


def _env_bool(name: str):
    value = os.environ.get(name, "").strip().lower()
    return None if not value else value in ("1", "true", "yes", "on")
_TRAIN_DTYPES = ("float32", "bfloat16")
_FLOAT64 = ("refuse", "float32")


settings = {
    "strict": os.environ.get("TTNN_EAGER_STRICT", "0").strip().lower() in ("1", "true", "yes", "on"),
    "float32_storage": os.environ.get("TTNN_EAGER_FLOAT32_STORAGE", "bfloat16"),
    "weight_dtype": os.environ.get("TTNN_EAGER_WEIGHT_DTYPE", "bfloat16"),
    "math_fidelity": os.environ.get("TTNN_EAGER_MATH_FIDELITY") or None,
    "fp32_dest_acc": _env_bool("TTNN_EAGER_FP32_DEST_ACC"),
    "math_approx": _env_bool("TTNN_EAGER_MATH_APPROX"),
    "shadow_numerics": os.environ.get("TTNN_EAGER_SHADOW_NUMERICS", "hardware"),
    "train_dtype": os.environ.get("TTNN_EAGER_TRAIN_DTYPE", "float32"),
    "float64": os.environ.get("TTNN_EAGER_FLOAT64", "refuse"),
    "eager_fusion": _env_bool("TTNN_EAGER_FUSION") is not False,
}
_UNSET = object()  # configure's "not given" for settings where None is a value (None: each op's default)


def configure(*, strict: bool | None = None, float32_storage: str | None = None,
              weight_dtype: str | None = None, math_fidelity=_UNSET, fp32_dest_acc=_UNSET, math_approx=_UNSET,
              shadow_numerics: str | None = None, train_dtype: str | None = None,
              float64: str | None = None, eager_fusion: bool | None = None) -> dict:
    """Change settings; returns the previous ones (pass them back to restore: `configure(**previous)`).
    math_fidelity, fp32_dest_acc and math_approx take None for "each op's own choice" (layout.COMPUTE)."""
    previous = dict(settings)
    if math_fidelity is not _UNSET and math_fidelity is not None and math_fidelity not in FIDELITIES:
        raise ValueError(f"math_fidelity must be one of {FIDELITIES} (or None: each op's default), "
                         f"not {math_fidelity!r}")
    for name, value in (("fp32_dest_acc", fp32_dest_acc), ("math_approx", math_approx)):
        if value is not _UNSET and value is not None and not isinstance(value, bool):
            raise TypeError(f"{name} must be True, False or None (each op's default), not {value!r}")
    if shadow_numerics is not None and shadow_numerics not in _SHADOW_NUMERICS:
        raise ValueError(f"shadow_numerics must be one of {_SHADOW_NUMERICS}, not {shadow_numerics!r}")
    if float32_storage is not None and float32_storage not in _FLOAT32_STORAGE:
        raise ValueError(f"float32_storage must be one of {_FLOAT32_STORAGE}, not {float32_storage!r}")
    if weight_dtype is not None and weight_dtype not in _WEIGHT_DTYPES:
        raise ValueError(f"weight_dtype must be one of {_WEIGHT_DTYPES}, not {weight_dtype!r}")
    if train_dtype is not None and train_dtype not in _TRAIN_DTYPES:
        raise ValueError(f"train_dtype must be one of {_TRAIN_DTYPES}, not {train_dtype!r}")
    if float64 is not None and float64 not in _FLOAT64:
        raise ValueError(f"float64 must be one of {_FLOAT64}, not {float64!r}")
    if eager_fusion is not None and not isinstance(eager_fusion, bool):
        raise TypeError(f"eager_fusion must be True or False, not {eager_fusion!r}")
    for key, value in (("strict", strict), ("eager_fusion", eager_fusion), ("float32_storage", float32_storage), ("weight_dtype", weight_dtype),
                       ("shadow_numerics", shadow_numerics), ("train_dtype", train_dtype), ("float64", float64)):
        if value is not None:
            settings[key] = value
    for key, value in (("math_fidelity", math_fidelity), ("fp32_dest_acc", fp32_dest_acc),
                       ("math_approx", math_approx)):
        if value is not _UNSET:
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
