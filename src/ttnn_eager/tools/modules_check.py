"""PyTorch's own ModuleInfo samples (`torch.testing._internal.common_modules.module_db`, every torch.nn
module class) run on ttnn:0 against the CPU.

    results = run(max_samples=4)       # one record per module class
    write(results)                     # docs/modules.json, from which `ttnn-eager docs` makes docs/modules.md

Per sample: the module is built on the CPU under a fixed seed (lazy modules initialized by a first CPU
forward), copied, one copy moved to ttnn:0; both run the sample's forward in float32 under no_grad, in eval
mode (and in training mode for the batch-norm family, whose running statistics are compared too). A
sample passes when every output has PyTorch's shape and dtype and its values agree within bfloat16
tolerance (|got - ref| <= atol * max(1, max|ref|) + rtol * |ref|; integer outputs exactly, except where
TOLERANCES says why not). Fallbacks are the aten ops run on the CPU during the device copy's move and
forward. Samples are capped per module (`max_samples`, the first ones in module_db's order) to keep the run
short; the record says how many exist.
"""
from __future__ import annotations

import collections
import copy
import json
import os
import time

import torch

from .. import counters

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                       "docs", "modules.json")
ATOL, RTOL = 0.03, 0.03
REFUSED = "refused by design"
TRAIN_TOO = ("nn.BatchNorm1d", "nn.BatchNorm2d", "nn.BatchNorm3d")
# Looser tolerances, each with its reason (module name -> (atol, rtol, reason)); none needed today.
TOLERANCES: dict = {}
# Max-pool indices (output 1) may differ from the CPU's where the bfloat16-rounded input has ties: they
# must then still point at a maximum. Module -> number of pooled (spatial) dimensions.
INDEX_OUTPUTS = {"nn.MaxPool1d": 1, "nn.MaxPool2d": 2, "nn.MaxPool3d": 3, "nn.AdaptiveMaxPool1d": 1,
                 "nn.AdaptiveMaxPool2d": 2, "nn.AdaptiveMaxPool3d": 3}


def _tree_to(x, device):
    if isinstance(x, torch.Tensor):
        return x.detach().clone().to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_tree_to(y, device) for y in x)
    if isinstance(x, dict):
        return {k: _tree_to(v, device) for k, v in x.items()}
    return x


def _flat(x) -> list:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in _flat(y)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _flat(v)]
    return []


def compare(got, ref, atol=ATOL, rtol=RTOL, index_ok=None) -> str | None:
    """None when got (outputs from the device, any tree) matches ref, else the reason."""
    gs, rs = _flat(got), _flat(ref)
    if len(gs) != len(rs):
        return f"{len(gs)} outputs, expected {len(rs)}"
    for i, (g, r) in enumerate(zip(gs, rs)):
        if g.shape != r.shape:
            return f"output {i}: shape {list(g.shape)}, expected {list(r.shape)}"
        if g.dtype != r.dtype:
            return f"output {i}: dtype {g.dtype}, expected {r.dtype}"
        g = g.detach().cpu()
        if not r.dtype.is_floating_point:
            if not torch.equal(g, r) and not (index_ok and index_ok(i, g)):
                return f"output {i}: {int((g != r).sum())} of {r.numel()} integer values differ"
            continue
        if not r.numel():
            continue
        scale = max(float(r.abs().nan_to_num(0, 0, 0).max()), 1.0)
        both_nan = g.isnan() & r.isnan()
        bad = ~(((g - r).abs() <= atol * scale + rtol * r.abs()) | both_nan | (g == r))
        if bad.any():
            err = float((g - r).abs()[bad].nan_to_num(float("inf")).max())
            return f"output {i}: {int(bad.sum())} of {r.numel()} values off (max error {err:.3g}, scale {scale:.3g})"
    return None


def _pool_index_check(x, values, k: int):
    """Indices that differ from the CPU's must point at the maximum of their window (ties after the input is
    rounded to bfloat16)."""
    def ok(i, idx):
        if i != 1:
            return False
        plane = x.detach().cpu().to(torch.bfloat16).float().flatten(-k)
        got = plane.gather(-1, idx.flatten(-k).clamp(0, plane.shape[-1] - 1))
        return bool(torch.equal(got, values.detach().cpu().to(torch.bfloat16).float().flatten(-k)))
    return ok


def _build(mi, sample, training: bool):
    torch.manual_seed(0)
    c = sample.constructor_input
    m = mi.module_cls(*c.args, **c.kwargs)
    m.train(training)
    if any(isinstance(p, torch.nn.parameter.UninitializedParameter) for p in m.parameters()):
        with torch.no_grad():
            m(*_tree_to(sample.forward_input.args, "cpu"), **_tree_to(sample.forward_input.kwargs, "cpu"))
    return m


def check_sample(mi, sample, training: bool, device: str = "ttnn:0") -> tuple[str | None, collections.Counter]:
    """(failure reason or None, fallbacks by aten op name) of one sample."""
    name = mi.name
    m0 = _build(mi, sample, training)
    cpu, dev = copy.deepcopy(m0), copy.deepcopy(m0)
    args, kwargs = sample.forward_input.args, sample.forward_input.kwargs
    cpu_error = None
    try:
        with torch.no_grad():
            ref = cpu(*_tree_to(args, "cpu"), **_tree_to(kwargs, "cpu"))
    except Exception as e:  # noqa: BLE001 - a sample PyTorch itself rejects: the device must reject it too
        cpu_error = e
    before = counters.fallback_by_op.copy()
    try:
        with torch.no_grad():
            dev.to(device)
            got = dev(*_tree_to(args, device), **_tree_to(kwargs, device))
    except Exception as e:  # noqa: BLE001 - recorded as the sample's failure
        fallbacks = _names(counters.fallback_by_op - before)
        if cpu_error is not None and isinstance(e, type(cpu_error)):
            return None, fallbacks  # the same error as on the CPU
        if isinstance(e, TypeError) and "torch.float64" in str(e):
            return f"{REFUSED}: float64 (the sample builds a float64 tensor)", fallbacks
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200]}", fallbacks
    if cpu_error is not None:
        return f"the CPU raises {type(cpu_error).__name__} ({str(cpu_error)[:100]}); the device did not", \
            _names(counters.fallback_by_op - before)
    fallbacks = _names(counters.fallback_by_op - before)
    atol, rtol, _ = TOLERANCES.get(name, (ATOL, RTOL, ""))
    index_ok = None
    if name in INDEX_OUTPUTS and isinstance(ref, tuple):
        index_ok = _pool_index_check(_flat(args)[0], _flat(got)[0], INDEX_OUTPUTS[name])
    reason = compare(got, ref, atol, rtol, index_ok)
    if reason is None and training:  # running statistics
        reason = compare([t for t in dev.state_dict().values()], [t for t in cpu.state_dict().values()], atol, rtol)
        reason = reason and "state after forward: " + reason
    return reason, fallbacks


def _names(c: collections.Counter) -> collections.Counter:
    return collections.Counter({str(k): v for k, v in c.items()})


def check_module(mi, max_samples: int | None = None) -> dict:
    modes = (False, True) if mi.name in TRAIN_TOO else (False,)
    rec = {"module": mi.name, "samples": 0, "samples_available": 0, "passed": 0, "refused": 0, "on_device": 0,
           "fallback_ops": collections.Counter(), "failures": [], "seconds": 0.0}
    start = time.perf_counter()
    for training in modes:
        samples = mi.module_inputs_func(mi, device="cpu", dtype=torch.float32, requires_grad=False,
                                        training=training)
        rec["samples_available"] += len(samples)
        for i, sample in enumerate(samples[:max_samples]):
            reason, fallbacks = check_sample(mi, sample, training)
            rec["samples"] += 1
            rec["fallback_ops"].update(fallbacks)
            if not fallbacks:
                rec["on_device"] += 1
            if reason is None:
                rec["passed"] += 1
            elif reason.startswith(REFUSED):
                rec["refused"] += 1
                rec["failures"].append({"sample": i, "mode": "train" if training else "eval", "reason": reason})
            else:
                rec["failures"].append({"sample": i, "mode": "train" if training else "eval", "reason": reason})
    rec["fallback_ops"] = dict(rec["fallback_ops"])
    rec["seconds"] = round(time.perf_counter() - start, 2)
    return rec


def module_infos():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_modules import module_db
    return list(module_db)


def run(max_samples: int | None = 4, names=None) -> list:
    import warnings
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mi in module_infos():
            if names is None or mi.name in names:
                out.append(check_module(mi, max_samples))
    return out


def summary(results: list) -> dict:
    return {"modules": len(results),
            # every sample right, and run with no CPU fallback
            "modules_without_fallbacks": sum(1 for r in results if r["samples"] and not r["fallback_ops"]
                                             and r["passed"] == r["samples"]),
            "modules_all_passed": sum(1 for r in results if r["passed"] + r["refused"] == r["samples"]),
            "samples": sum(r["samples"] for r in results), "passed": sum(r["passed"] for r in results),
            "refused": sum(r["refused"] for r in results),
            "samples_on_device": sum(r["on_device"] for r in results)}


def write(results: list, max_samples, path: str = RESULTS) -> None:
    from ..device import api as device_api
    data = {"max_samples_per_module": max_samples, "torch": torch.__version__.split("+")[0],
            "device": device_api.device_name(0),
            "summary": summary(results), "tolerances": {k: v[2] for k, v in TOLERANCES.items()},
            "modules": results}
    with open(path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")
