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

import math

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


# ----------------------------------------------------------------------------------------------- fused multi-tensor ops
# What GradScaler and fused optimizers call on CUDA, as loops of per-tensor ops (lowered), so they run on
# the device: torch.amp.GradScaler("ttnn") and torch.optim.Adam/AdamW(fused=True) -- the HF Trainer's
# default optimizer ("adamw_torch_fused") -- take them.

def _non_finite_check_and_unscale_(grads, found_inf, inv_scale):
    """found_inf = 1.0 if any gradient holds an inf or a NaN; every gradient *= inv_scale (as CUDA's kernel:
    unscaled even when found_inf is set; the step is then skipped)."""
    for g in grads:
        bad = torch.logical_not(torch.isfinite(g)).any().to(found_inf.dtype)
        found_inf.copy_(torch.maximum(found_inf, bad))
        g.mul_(inv_scale)


def _update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    """CUDA's amp_update_scale_: an inf/NaN step multiplies the scale by backoff_factor and resets the
    tracker; otherwise the tracker counts, and at growth_interval the scale grows (if it stays finite)."""
    found = found_inf > 0
    successful = growth_tracker + 1
    grown = scale * growth_factor
    grow = torch.logical_and(successful >= growth_interval, torch.isfinite(grown))
    new_scale = torch.where(found, scale * backoff_factor, torch.where(grow, grown, scale))
    reset = torch.logical_or(found, successful >= growth_interval)
    new_tracker = torch.where(reset, torch.zeros_like(successful), successful)
    scale.copy_(new_scale)
    growth_tracker.copy_(new_tracker)
    return scale


def _fused_adam(decoupled: bool):
    def fused(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1, beta2,
              weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
        """torch's fused Adam(W) kernel (aten/src/ATen/native/cuda/fused_adam_utils.cuh), per tensor. The
        steps (device tensors, already incremented) are read once for all tensors (one device-to-host
        transfer a step), for the bias corrections; a found_inf (GradScaler) skips the update on the device
        (where)."""
        if not params:
            return
        from . import layout
        from .tensor import handle_of, is_ttnn
        for s in state_steps:  # a step counter stored bfloat16 would stop at 256: kept float32 (exact to 2**24)
            if is_ttnn(s) and s.dtype == torch.float32:
                layout.train_storage(handle_of(s))
        steps = [float(s) for s in torch.stack([s.reshape(()) for s in state_steps]).cpu()]
        lr = float(lr)
        skip = None if found_inf is None else found_inf > 0
        for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
            step = steps[i]
            if grad_scale is not None:
                g = g / grad_scale
            if maximize:
                g = -g
            if weight_decay != 0 and not decoupled:
                g = g + p * weight_decay
            new_m = torch.lerp(m, g, 1 - beta1)
            new_v = v * beta2 + g * g * (1 - beta2)
            bias1 = 1 - beta1 ** step
            bias2_sqrt = math.sqrt(1 - beta2 ** step)
            if amsgrad:
                new_max = torch.maximum(max_exp_avg_sqs[i], new_v)
                denom = torch.sqrt(new_max) / bias2_sqrt + eps
            else:
                denom = torch.sqrt(new_v) / bias2_sqrt + eps
            update = (lr / bias1) * new_m / denom
            if weight_decay != 0 and decoupled:  # p * (1 - lr * wd) - update
                update = update + p * (lr * weight_decay)
            if skip is not None:
                update = torch.where(skip, torch.zeros_like(update), update)
                new_m, new_v = torch.where(skip, m, new_m), torch.where(skip, v, new_v)
                if amsgrad:
                    new_max = torch.where(skip, max_exp_avg_sqs[i], new_max)
            m.copy_(new_m)
            v.copy_(new_v)
            if amsgrad:
                max_exp_avg_sqs[i].copy_(new_max)
            p.sub_(update)  # an in-place update of the parameter: the training policy widens it to float32
    fused.__name__ = fused.__qualname__ = "_fused_adamw_" if decoupled else "_fused_adam_"
    return fused


def fused_table() -> dict:
    """The fused multi-tensor ops above (decompositions.table() serves them beside the _foreach_* loops)."""
    return {
        aten._amp_foreach_non_finite_check_and_unscale_.default: _non_finite_check_and_unscale_,
        aten._amp_update_scale_.default: _update_scale_,
        aten._fused_adam_.default: _fused_adam(False),
        aten._fused_adamw_.default: _fused_adam(True),
        aten._fused_adam_.tensor_lr: _fused_adam(False),
        aten._fused_adamw_.tensor_lr: _fused_adam(True),
    }
