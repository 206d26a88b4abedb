"""What validate.py and sweep.py share: device results read back, and compared with float32 PyTorch on the CPU.

    to_cpu(x)            a device tensor's value as a CPU tensor (also inside lists, tuples and dicts)
    as_float32(x)        bfloat16/float16 CPU tensors as float32 (the reference is float32 PyTorch)
    compare(dev, ref)    max abs error, Pearson (and mismatches for exact dtypes) of a result against its reference
    pcc(a, b)            the Pearson correlation of two tensors' values (1.0 for equal ones), what every report
                         and test quotes
    fmt(x)               a figure as the reports print it
"""
from __future__ import annotations

import math

import torch


def to_cpu(x):
    """A device tensor's value as a CPU tensor (downloaded without dispatching), other values as they are."""
    from ..device import api
    from ..core.dispatch import refresh
    from ..core.tensor import handle_of, is_ttnn
    if is_ttnn(x):  # same strides as PyTorch sees, so that views behave as on the device
        value = api.download(refresh(handle_of(x)))
        if 0 in x.stride():  # an expanded view: its elements share memory, which a CPU copy cannot have
            return value
        return torch.empty_strided(x.shape, x.stride(), dtype=value.dtype).copy_(value)
    if isinstance(x, (list, tuple)):
        return type(x)(to_cpu(y) for y in x)
    if isinstance(x, dict):
        return {k: to_cpu(v) for k, v in x.items()}
    if isinstance(x, torch.device) or (isinstance(x, str) and x.startswith("ttnn")):
        return torch.device("cpu")
    return x


def compare(dev, ref) -> dict:
    """max abs error and Pearson of a device result against the reference; for an integer or bool reference
    also the count of mismatching elements; `scale`: the largest finite |reference| (for relative bounds)."""
    if dev.shape != ref.shape:
        return {"max_abs_err": math.inf, "pearson": math.nan,
                "note": f"shape {list(dev.shape)}, expected {list(ref.shape)}"}
    exact = not ref.is_floating_point()
    dev, ref = dev.detach().double().flatten(), ref.detach().double().flatten()
    extra = {"mismatches": int((dev != ref).sum())} if exact else {}
    if not dev.numel():
        return {"max_abs_err": 0.0, "pearson": 1.0, **extra}
    both_finite = torch.isfinite(dev) & torch.isfinite(ref)
    same_special = (dev == ref) | (torch.isnan(dev) & torch.isnan(ref))
    if not bool((both_finite | same_special).all()):
        return {"max_abs_err": math.inf, "pearson": math.nan, "note": "non-finite values differ"}
    d, r = dev[both_finite], ref[both_finite]
    err = float((d - r).abs().max()) if d.numel() else 0.0
    if d.numel() < 2 or float(r.std()) == 0 or float(d.std()) == 0:
        pearson = 1.0 if err == 0 else math.nan
    else:
        pearson = float(torch.corrcoef(torch.stack([d, r]))[0, 1])
    scale = float(r.abs().max()) if r.numel() else 0.0
    return {"max_abs_err": err, "pearson": pearson, "scale": scale, **extra}


def pcc(a: torch.Tensor, b: torch.Tensor) -> float:
    """The Pearson correlation of two tensors' values, in float64; 1.0 for equal tensors (whose Pearson is
    undefined when they are constant)."""
    a, b = a.detach().double().flatten(), b.detach().double().flatten()
    if torch.equal(a, b):
        return 1.0
    return float(torch.corrcoef(torch.stack([a, b]))[0, 1])


def as_float32(x):
    """bfloat16/float16 CPU tensors as float32: the reference is float32 PyTorch."""
    if isinstance(x, torch.Tensor) and x.dtype in (torch.bfloat16, torch.float16):
        return x.float()
    if isinstance(x, (list, tuple)):
        return type(x)(as_float32(y) for y in x)
    if isinstance(x, dict):
        return {k: as_float32(v) for k, v in x.items()}
    return x


def fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return "nan" if math.isnan(x) else f"{x:.6f}" if abs(x) < 10 else f"{x:.4g}"
    return str(x)
