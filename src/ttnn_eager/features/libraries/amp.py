"""torch.amp.GradScaler("ttnn").

GradScaler does its arithmetic with aten ops on the scale's device: `_amp_foreach_non_finite_check_and_unscale_`
and `_amp_update_scale_` (what it calls on CUDA) are loops of lowered per-tensor ops (core/foreach.py), so the
inf check, the unscaling and the scale update stay on the device. One line of `GradScaler.unscale_` does not
fit: it computes the inverse scale as `self._scale.double().reciprocal().float()`, and ttnn devices have no
float64 (the layout policy refuses it, on purpose). For a scaler whose scale is on a ttnn device, `unscale_`
here takes the reciprocal in float32 instead -- the same value whenever the scale is a power of two, which
GradScaler's own arithmetic keeps it (init 2**16, growth 2, backoff 0.5) -- and is PyTorch's otherwise (the
torch_npu approach: the device package adjusts the torch.amp entry point). Every other scaler is untouched.
"""
from __future__ import annotations

import torch

_ORIGINAL = None


def _unscale_(self, optimizer) -> None:
    scale = getattr(self, "_scale", None)
    if not self._enabled or scale is None or scale.device.type != "ttnn":
        return _ORIGINAL(self, optimizer)
    from torch.amp.grad_scaler import OptState
    self._check_scale_growth_tracker("unscale_")
    state = self._per_optimizer_states[id(optimizer)]
    if state["stage"] is OptState.UNSCALED:
        raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
    if state["stage"] is OptState.STEPPED:
        raise RuntimeError("unscale_() is being called after step().")
    inv_scale = scale.reciprocal()  # float32 on the device (no float64 on ttnn)
    found_inf = torch.full((), 0.0, dtype=torch.float32, device=scale.device)
    state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf, False)
    state["stage"] = OptState.UNSCALED


def install() -> None:
    global _ORIGINAL
    from torch.amp.grad_scaler import GradScaler
    if getattr(GradScaler.unscale_, "_ttnn_eager", False):
        return
    _ORIGINAL = GradScaler.unscale_
    _unscale_.__doc__ = _ORIGINAL.__doc__
    _unscale_._ttnn_eager = True
    GradScaler.unscale_ = _unscale_
