"""`torch.ttnn`: the device module, what `torch.cuda` is for CUDA.

Cheap to import: ttnn itself is imported (and devices opened) at the first call that needs a device.
Graphs (`TTNNGraph`, `graph`, `make_graphed_callables`: torch.cuda's graph API) are in graphs.py.
"""
from __future__ import annotations

import torch

from ..core import generator as _generator
from ..core.generator import initial_seed, manual_seed, manual_seed_all  # noqa: F401  (torch.ttnn.*)
from ..device import runtime


def _api():
    from ..device import api as device_api
    return device_api


def _index(device=None) -> int:
    if device is None:
        return runtime.current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "ttnn":
        raise ValueError(f"expected a ttnn device, got {device}")
    return runtime.current_device() if device.index is None else device.index


def is_available() -> bool:
    """True when a ttnn device can be used: a Tenstorrent card, or the mock device (see TTNN_EAGER_DEVICE)."""
    try:
        return device_count() > 0
    except Exception:
        return False


def is_initialized() -> bool:
    import sys
    return "ttnn_eager.device.api" in sys.modules


def _lazy_init() -> None:
    _api()


def device_count() -> int:
    return _api().device_count()


def current_device() -> int:
    return runtime.current_device()


def set_device(device) -> None:
    """Make `device` (an index, "ttnn:N" or torch.device) the default for `ttnn` without an index."""
    index = _index(device)
    _api().check_index(index)
    runtime.set_current_device(index)


class device:
    """Context manager: `with torch.ttnn.device(1): ...` makes ttnn:1 the current device."""

    def __init__(self, device):
        self.index = _index(device)

    def __enter__(self):
        self.prev = runtime.current_device()
        set_device(self.index)

    def __exit__(self, *exc):
        set_device(self.prev)


def synchronize(device=None) -> None:
    """Wait until every op queued on the device has finished."""
    _api().synchronize(_index(device))


def get_device_name(device=None) -> str:
    """e.g. "Wormhole n150 (mock)"."""
    api = _api()
    index = _index(device)
    api.check_index(index)
    return api.device_name(index)


def memory_allocated(device=None) -> int:
    """Bytes of device memory (DRAM and L1) held by tensors, from ttnn's own allocator."""
    return _api().memory_allocated(_index(device))


def mem_get_info(device=None) -> tuple:
    """(free, total) DRAM bytes of the device, like torch.cuda.mem_get_info."""
    api = _api()
    index = _index(device)
    total = api.memory_capacity(index)
    return total - api.memory_allocated(index), total


def _is_in_bad_fork() -> bool:
    return False


# The device-side generator (core/generator.py): torch.manual_seed() calls manual_seed_all.
def get_rng_state(device=None) -> torch.Tensor:
    """The device-side generator's state (seed and draw counter) as a uint8 CPU tensor (torch.cuda's)."""
    _index(device)
    return _generator.get_state()


def set_rng_state(new_state: torch.Tensor, device=None) -> None:
    _index(device)
    _generator.set_state(new_state)


def get_rng_state_all() -> list:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def get_amp_supported_dtype():
    return [torch.bfloat16]


# Graphs (torch.cuda.graphs' API): TTNNGraph, graph, make_graphed_callables live in graphs.py, which imports
# ttnn, so they load on first use.
_GRAPH_NAMES = ("TTNNGraph", "graph", "make_graphed_callables")


def __getattr__(name):
    if name in _GRAPH_NAMES:
        from . import graphs
        return getattr(graphs, name)
    raise AttributeError(f"module 'torch.ttnn' has no attribute {name!r}")


def is_current_stream_capturing() -> bool:
    """True while a graph capture is under way (torch.ttnn.graph)."""
    import sys
    api = sys.modules.get("ttnn_eager.device.api")
    return api is not None and api.recording is not None


def graph_pool_handle():
    """Accepted for torch.cuda compatibility (graphs share no memory pool here)."""
    return None
