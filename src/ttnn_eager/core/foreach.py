"""The `_foreach_*` ops (optimizers with foreach=True, clip_grad_norm_) as a loop of their per-tensor ops --
PyTorch's own "slow path" for devices without fused multi-tensor kernels. Each per-tensor op is then lowered
(or decomposed) as usual, so the update runs on the device. decompositions.table() serves these beside
PyTorch's decompositions.

    _foreach_add_.List(self, other, alpha=a)     ->  add_(self[i], other[i], alpha=a)   for each i
    _foreach_addcdiv_.ScalarList(s, t1, t2, v)   ->  addcdiv_(s[i], t1[i], t2[i], value=v[i])
    _foreach_norm.Scalar(self, ord)              ->  [linalg_vector_norm(self[i], ord)]

A list argument (Tensor[] or Scalar[]) gives its i-th element to the i-th call; anything else (a Scalar, a
single Tensor such as clip_grad_norm_'s clip coefficient) is passed to every call.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten

# foreach name -> per-tensor op name (functional); in-place forms add a trailing "_"
_PER_TENSOR = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "div", "addcmul": "addcmul", "addcdiv": "addcdiv",
    "lerp": "lerp", "sqrt": "sqrt", "neg": "neg", "abs": "abs", "exp": "exp", "reciprocal": "reciprocal",
    "maximum": "maximum", "minimum": "minimum", "clamp_min": "clamp_min", "clamp_max": "clamp_max",
    "pow": "pow", "sign": "sign", "norm": "linalg_vector_norm",
}
_VALUE_KW = ("addcmul", "addcdiv")  # their per-tensor scalar is keyword-only (value=)


def _loop(name: str, inplace: bool):
    per = getattr(aten, _PER_TENSOR[name])
    per_ = getattr(aten, _PER_TENSOR[name] + "_", None) if inplace else None

    def foreach(tensors, *args, **kwargs):
        out = []
        for i, t in enumerate(tensors):
            a = [x[i] if isinstance(x, (list, tuple)) else x for x in args]
            kw = {k: (v[i] if isinstance(v, (list, tuple)) else v) for k, v in kwargs.items()}
            if name in _VALUE_KW and len(a) == 3:
                kw["value"] = a.pop()
            if per_ is not None:
                per_(t, *a, **kw)  # the in-place op (so the precision rule for trainable leaves applies)
            elif inplace:
                t.copy_(per(t, *a, **kw))  # no in-place form (maximum, minimum)
            else:
                out.append(per(t, *a, **kw))
        return None if inplace else out
    foreach.__name__ = foreach.__qualname__ = f"_foreach_{name}{'_' if inplace else ''}"
    return foreach


def _zero_(tensors):
    for t in tensors:
        t.zero_()


def table() -> dict:
    """aten _foreach_* OpOverload -> its loop over per-tensor ops."""
    out = {aten._foreach_zero_.default: _zero_}
    for name in _PER_TENSOR:
        for inplace in (False, True):
            packet = getattr(aten, f"_foreach_{name}{'_' if inplace else ''}", None)
            if packet is None:
                continue
            fn = _loop(name, inplace)
            for overload in packet.overloads():
                if overload.endswith("out") or overload == "ScalarAndTensor" or \
                        (name in _VALUE_KW and overload == "Tensor"):
                    continue  # out= forms, a Scalar base, scalars given as a tensor: the CPU fallback
                out[getattr(packet, overload)] = fn
    return out
