"""The card backend: a Tenstorrent card through ttnn. The card computes every value; a result is read back
from the device (ttnn.to_torch), and graphs are recorded as ttnn traces (a trace region is reserved when a
device opens). Same interface as the mock backend (mock.py); device/api.py picks one of the two once."""
from __future__ import annotations

import contextlib

import torch

from .base import Handle, ttnn

TRACE_REGION_BYTES = 256 << 20  # device memory set aside for captured ttnn traces (features/graphs.py)


class Card:
    traces = True      # graphs capture a ttnn trace and replay it with no per-op host work
    shadowing = False  # no values are computed on the host

    def __init__(self, runtime):
        self.runtime = runtime
        self.mesh = None  # (rows, columns) once a mesh of chips is open (mesh mode)

    def device_count(self) -> int:
        return ttnn.GetNumAvailableDevices()

    def open_options(self) -> dict:
        return {"trace_region_size": TRACE_REGION_BYTES}

    def device_name(self, index: int) -> str:
        return f"{ttnn.get_arch_name()} (device {index})"

    def stored(self, value: torch.Tensor, tt_dtype):
        return None

    def rounded(self, value: torch.Tensor, tt_dtype, layout) -> torch.Tensor:
        """A staged tensor's host value (api.stage): what the card would hold, by ttnn's host conversion."""
        return ttnn.to_torch(ttnn.from_torch(value, dtype=tt_dtype, layout=layout))

    def value(self, op: str, args, kwargs, out):
        return None

    def values(self, op: str, args, kwargs, outs) -> list:
        return [None] * len(outs)

    def created(self, op: str, args, tt_dtype, kwargs, out):
        return None

    def set_mesh(self, shape: tuple) -> None:
        self.mesh = shape

    def read_chips(self, h: Handle, chips: int) -> list:
        return [ttnn.to_torch(t) for t in ttnn.get_device_tensors(h.tt)]

    def stored_chips(self, values: torch.Tensor, tt_dtype):
        return None

    def read(self, h: Handle) -> torch.Tensor:
        if self.mesh is not None:  # a mesh tensor: chip 0's value (rank 0's local tensor in DTensor's terms)
            return ttnn.to_torch(ttnn.get_device_tensors(h.tt)[0])
        return ttnn.to_torch(h.tt)

    def shadows_off(self):
        return contextlib.nullcontext()

    def release(self) -> None:
        pass
