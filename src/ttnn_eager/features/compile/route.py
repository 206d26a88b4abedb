"""torch.compile(model) with the default backend, on ttnn tensors: Dynamo's graph goes to the "ttnn" backend.

PyTorch's default backend is inductor, which has no code generator for a ttnn device (it stops in its
wrapper code generation with `KeyError: 'ttnn'`), and PyTorch offers no per-device default. So inductor's
entry (torch._TorchCompileInductorWrapper.__call__, what backend="inductor" resolves to) is wrapped: a graph
with a ttnn tensor among its example inputs is compiled by compiler.backend, every
other graph by inductor as before. Cheap: no import of Dynamo or inductor here.
"""
from __future__ import annotations

import functools

import torch


def install() -> None:
    wrapper = torch._TorchCompileInductorWrapper
    call = wrapper.__call__
    if getattr(call, "_ttnn_eager_routed", False):
        return

    @functools.wraps(call)
    def __call__(self, model_, inputs_, **kwargs):
        if any(isinstance(x, torch.Tensor) and x.device.type == "ttnn" for x in inputs_):
            from .compiler import backend
            return backend(model_, inputs_)  # (every mode replays: compiler.py)
        return call(self, model_, inputs_, **kwargs)

    __call__._ttnn_eager_routed = True
    wrapper.__call__ = __call__
    compile_ = torch.compile

    @functools.wraps(compile_)
    def compile(*args, **kwargs):  # noqa: A001  (torch.compile's own name)
        from . import skip_in_dynamo
        skip_in_dynamo()  # before Dynamo sees a frame (torch.compile imports Dynamo anyway)
        return compile_(*args, **kwargs)
    torch.compile = compile
