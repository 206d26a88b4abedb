"""`torch.ttnn`: the device module, what `torch.cuda` is for CUDA.

Cheap to import: ttnn itself is imported (and devices opened) at the first call that needs a device.
Graphs (`TTNNGraph`, `graph`, `make_graphed_callables`: torch.cuda's graph API) are in graphs.py.
"""
from __future__ import annotations

import torch

_current = 0


def _api():
    from . import device_api
    return device_api


def _index(device=None) -> int:
    if device is None:
        return _current
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "ttnn":
        raise ValueError(f"expected a ttnn device, got {device}")
    return _current if device.index is None else device.index


def is_available() -> bool:
    """True when a ttnn device can be used: a Tenstorrent card, or the mock device (see TTNN_EAGER_DEVICE)."""
    try:
        return device_count() > 0
    except Exception:
        return False


def is_initialized() -> bool:
    import sys
    return "ttnn_eager.device_api" in sys.modules


def _lazy_init() -> None:
    _api()


def device_count() -> int:
    return _api().device_count()


def current_device() -> int:
    return _current


def set_device(device) -> None:
    """Make `device` (an index, "ttnn:N" or torch.device) the default for `ttnn` without an index."""
    global _current
    index = _index(device)
    _api().check_index(index)
    _current = index


class device:
    """Context manager: `with torch.ttnn.device(1): ...` makes ttnn:1 the current device."""

    def __init__(self, device):
        self.index = _index(device)

    def __enter__(self):
        self.prev = _current
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


# torch.manual_seed() calls torch.<backend>.manual_seed_all(). Random factories for a ttnn device
# (torch.rand(..., device="ttnn")) are drawn from the CPU generator, so they equal the CPU's under the same
# seed. Dropout draws its masks on the device (ttnn.rand) from this device-side generator: a seed and a
# counter of draws, like CUDA's Philox seed and offset. The same torch.manual_seed gives the same masks.
_generator = {"seed": None, "offset": 0}


def manual_seed(seed) -> None:
    _generator["seed"], _generator["offset"] = int(seed) & 0xFFFF_FFFF_FFFF_FFFF, 0


def manual_seed_all(seed) -> None:
    manual_seed(seed)


def initial_seed() -> int:
    if _generator["seed"] is None:
        manual_seed(torch.initial_seed())
    return _generator["seed"]


def get_rng_state(device=None) -> torch.Tensor:
    """The device-side generator's state (seed and draw counter) as a uint8 CPU tensor, as
    torch.cuda.get_rng_state gives (torch.random.fork_rng and torch.testing save and restore it)."""
    _index(device)
    return torch.tensor([initial_seed(), _generator["offset"]], dtype=torch.int64).view(torch.uint8)


def set_rng_state(new_state: torch.Tensor, device=None) -> None:
    _index(device)
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8 or new_state.numel() != 16:
        raise RuntimeError("torch.ttnn.set_rng_state: expected the uint8 tensor of 16 bytes that "
                           "torch.ttnn.get_rng_state returns")
    seed, offset = new_state.contiguous().view(torch.int64).tolist()
    _generator["seed"], _generator["offset"] = seed & 0xFFFF_FFFF_FFFF_FFFF, offset


def get_rng_state_all() -> list:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def next_seed() -> int:
    """The seed of the next device-side random draw (ttnn.rand's uint32 seed; never 0)."""
    seed = initial_seed()
    _generator["offset"] += 1
    mixed = (seed * 0x9E3779B97F4A7C15 + _generator["offset"] * 0xBF58476D1CE4E5B9) % (2**32 - 1)
    return mixed + 1


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
    api = sys.modules.get("ttnn_eager.device_api")
    return api is not None and api.recording is not None


def graph_pool_handle():
    """Accepted for torch.cuda compatibility (graphs share no memory pool here)."""
    return None
