"""A Lightning Accelerator for ttnn devices:

    from ttnn_eager.features.libraries import register_lightning
    register_lightning()
    lightning.Trainer(accelerator="ttnn", strategy="single_ttnn", devices=1)

Lightning knows cpu/cuda/mps/xla by name and takes any other device through an Accelerator subclass and its
registry (lightning.pytorch.accelerators.AcceleratorRegistry). With one device its connector builds a
SingleDeviceStrategy on "cpu" for any accelerator it does not know by name (accelerator_connector's
_choose_strategy), so the strategy is named too: "single_ttnn" (registered here: SingleDeviceStrategy on
ttnn:0), or `strategy=SingleDeviceStrategy("ttnn:N")` for another chip. Imports lightning (not cheap): imported by the
user, never at `import torch`.
"""
from __future__ import annotations

from typing import Any

import torch
from lightning.pytorch.accelerators import Accelerator, AcceleratorRegistry
from lightning.pytorch.strategies import SingleDeviceStrategy, StrategyRegistry

from .. import device_module


def _parse(devices) -> list[int]:
    """Lightning's `devices`: an int n (the first n), -1 / "auto" (all), a list of indices, or "0,1"."""
    count = device_module.device_count()
    if devices in (-1, "-1", "auto"):
        return list(range(count))
    if isinstance(devices, str):
        devices = [int(d) for d in devices.split(",") if d.strip()] if "," in devices else int(devices)
    if isinstance(devices, int):
        if devices > count:
            raise ValueError(f"requested {devices} ttnn devices, {count} available")
        return list(range(devices))
    indices = [int(d) for d in devices]
    for i in indices:
        if not 0 <= i < count:
            raise ValueError(f"ttnn:{i} is not available ({count} ttnn devices)")
    return indices


class TTNNAccelerator(Accelerator):
    """Tenstorrent devices through TT-NN (`ttnn:N`)."""

    def setup_device(self, device: torch.device) -> None:
        if device.type != "ttnn":
            raise ValueError(f"Device should be ttnn, got {device} instead.")
        device_module.set_device(device)

    def get_device_stats(self, device) -> dict[str, Any]:
        index = torch.device(device).index or 0
        return {"allocated_bytes.all.current": device_module.memory_allocated(index),
                "allocated_bytes.all.peak": device_module.max_memory_allocated(index)}

    def teardown(self) -> None:
        pass

    @staticmethod
    def parse_devices(devices) -> list[int]:
        return _parse(devices)

    @staticmethod
    def get_parallel_devices(devices) -> list[torch.device]:
        return [torch.device("ttnn", i) for i in _parse(devices)]

    @staticmethod
    def auto_device_count() -> int:
        return device_module.device_count()

    @staticmethod
    def is_available() -> bool:
        return device_module.is_available()

    @staticmethod
    def name() -> str:
        return "ttnn"

    @classmethod
    def register_accelerators(cls, accelerator_registry) -> None:
        accelerator_registry.register(cls.name(), cls, description=cls.__name__, override=True)


def register() -> None:
    """`accelerator="ttnn"` and `strategy="single_ttnn"` in lightning.Trainer (idempotent)."""
    TTNNAccelerator.register_accelerators(AcceleratorRegistry)
    StrategyRegistry.register("single_ttnn", SingleDeviceStrategy, description="one ttnn device (ttnn:0)",
                              override=True, device="ttnn:0")
