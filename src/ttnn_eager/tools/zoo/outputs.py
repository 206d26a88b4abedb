"""Comparing a model's outputs with the CPU's (`compare_outputs`: shapes, dtypes, Pearson and max
error on the valid positions) and the failure classes of a result (`classify`, CLASSES)."""
from __future__ import annotations

import torch

from ..models import pcc


def leaves(x, prefix: str = "out") -> list:
    """(path, tensor) of every tensor in a model's output (ModelOutput, dicts, lists, tuples; caches and
    other objects are skipped)."""
    if isinstance(x, torch.Tensor):
        return [(prefix, x)]
    if isinstance(x, dict):  # ModelOutput is an OrderedDict
        return [leaf for k, v in x.items() for leaf in leaves(v, f"{prefix}.{k}")]
    if isinstance(x, (list, tuple)):
        return [leaf for i, v in enumerate(x) for leaf in leaves(v, f"{prefix}[{i}]")]
    return []


def _to(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_to(v, device) for v in x)
    return x


def _valid(t: torch.Tensor, mask) -> torch.Tensor:
    """The positions of a (batch, seq, ...) output that the attention mask keeps."""
    if mask is not None and t.dim() >= 2 and tuple(t.shape[:2]) == tuple(mask.shape):
        return t[mask.bool()]
    return t


def _pearson(o: torch.Tensor, r: torch.Tensor) -> float:
    o, r = o.double().flatten(), r.double().flatten()
    finite = torch.isfinite(r)
    if not torch.equal(finite, torch.isfinite(o)):
        return float("nan")
    o, r = o[finite], r[finite]
    if o.numel() == 0 or torch.equal(o, r):
        return 1.0
    if o.numel() == 1 or float(r.std()) == 0.0 or float(o.std()) == 0.0:
        return 1.0 if torch.allclose(o, r, rtol=1e-2, atol=1e-2) else 0.0
    return pcc(o, r)


def _fmt_p(p) -> str:
    return "-" if p is None else f"{p:.5f}"


def compare_outputs(out, ref, mask=None) -> dict:
    """Every output tensor of `out` (on any device) against `ref` (CPU): shapes, dtypes, Pearson (the
    lowest over float outputs; an empty output of the CPU's shape is equal to it: 1.0), max absolute error,
    on the valid positions."""
    o_leaves, r_leaves = leaves(out), leaves(ref)
    mismatches, pearsons, max_err = [], [], 0.0
    if [p for p, _ in o_leaves] != [p for p, _ in r_leaves]:
        mismatches.append(f"outputs {[p for p, _ in o_leaves]} vs CPU {[p for p, _ in r_leaves]}")
    for (path, o), (_, r) in zip(o_leaves, r_leaves):
        if tuple(o.shape) != tuple(r.shape):
            mismatches.append(f"{path}: shape {tuple(o.shape)} vs CPU {tuple(r.shape)}")
            continue
        if o.dtype != r.dtype:
            mismatches.append(f"{path}: dtype {o.dtype} vs CPU {r.dtype}")
        o = _valid(o.detach().cpu(), mask)
        r = _valid(r.detach(), mask)
        if r.is_complex() or o.is_complex():
            continue
        if r.numel() == 0:  # the same empty shape (a detector keeping no box on either side): equal outputs
            pearsons.append(1.0)
            continue
        pearsons.append(_pearson(o, r))
        if r.dtype.is_floating_point or o.dtype.is_floating_point:
            fin = torch.isfinite(r) & torch.isfinite(o.to(r.dtype))
            if fin.any():
                max_err = max(max_err, float((o.double()[fin] - r.double()[fin]).abs().max()))
    return {"pearson": min(pearsons) if pearsons else None, "max_abs_err": max_err,
            "outputs": len(r_leaves), "same_shapes_dtypes": not mismatches, "mismatches": mismatches[:5]}


CLASSES = ("clean", "fallback ops", "low accuracy", "shape/dtype differs", "error", "crash", "timeout",
           "cpu fails")
PEARSON_MIN = 0.999


def classify(r: dict) -> str:
    """clean: 0 fallbacks, Pearson >= 0.999, every output's shape and dtype the CPU's."""
    status = r.get("status")
    if status != "ran":
        return status
    if not r.get("same_shapes_dtypes", False):
        return "shape/dtype differs"
    if r.get("fallbacks"):
        return "fallback ops"
    p = r.get("pearson")
    if p is None or not p >= PEARSON_MIN:  # (NaN too)
        return "low accuracy"
    return "clean"
