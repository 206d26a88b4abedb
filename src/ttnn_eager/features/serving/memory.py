"""transformers' paged-cache sizing for a model on a ttnn device.

`PagedAttentionCache` (transformers/generation/continuous_batching/cache.py) plans its cache from
`get_device_and_memory_breakdown()`: (device, total, reserved, allocated) of CUDA, XPU or MPS, else of the
host (psutil). For a model on `ttnn:0` it would plan from the host's RAM, and `torch.zeros(n_bytes,
dtype=torch.uint8, device="ttnn:0")` of that size fails (std::bad_alloc). Here, while a PagedAttentionCache
is made for a ttnn device, the breakdown is the device's (torch.ttnn.mem_get_info, memory_reserved), and
transformers applies its own fraction (`max_memory_percent`: 0.9 for a device, 0.8 with logit processors).

transformers plans one device byte per byte of its cache; on the device one byte costs more: the byte buffer
is stored as uint32 values in TILE layout (a 1-D tensor: its row padded to 32 rows), and the keys and values
live in the layer caches of TT-NN's paged layout beside it (paged.py; with transformers' own layout, every view
of the buffer is a device tensor of its own: TT-NN tensors have no strides). So the planner's price of a cache
sector (PagedAttentionMemoryHandler.bytes_per_sector, and its two trash sectors) is multiplied by the device
bytes one cache byte costs, measured by making a cache of one block first (`cost_per_byte`; about 130 for the
tiny Llama with the paged layout, ~300 with transformers' views, docs/serving.md); its activation and logits
reservations stay as transformers computes them.
"""
from __future__ import annotations

import contextvars
import copy
import gc
import sys

import torch

from ... import config as settings
from . import imports

CACHE_MODULE = "transformers.generation.continuous_batching.cache"

_sizing: contextvars.ContextVar = contextvars.ContextVar("ttnn_paged_cache_sizing", default=None)
costs: dict = {}  # (device, storage, the model's cache geometry, page size) -> device bytes a cache byte


def breakdown(device: torch.device) -> tuple:
    """(device, total, reserved, allocated) bytes of a ttnn device, as transformers'
    get_device_and_memory_breakdown gives them for CUDA (allocated = total - free)."""
    free, total = torch.ttnn.mem_get_info(device)
    return device, total, torch.ttnn.memory_reserved(device), total - free


def _patched_breakdown(original):
    def get_device_and_memory_breakdown():
        sizing = _sizing.get()
        return original() if sizing is None else breakdown(sizing[0])
    get_device_and_memory_breakdown.__wrapped__ = original
    return get_device_and_memory_breakdown


def _patched_planner(original):
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        sizing = _sizing.get()
        # the device's price of a cache byte (the module docstring); a num_blocks asked for is a capacity, not a price
        if sizing is not None and self.cb_config.num_blocks is None:
            self.bytes_per_sector = int(self.bytes_per_sector * sizing[1])
            self.trash_bytes = int(self.trash_bytes * sizing[1])
    __init__.__wrapped__ = original
    return __init__


def _key(device, config, cb_config, dtype) -> tuple:
    c = config
    return (str(device), settings.settings["float32_storage"], type(c).__name__, dtype, c.num_hidden_layers, getattr(c, "num_key_value_heads", None),
            getattr(c, "head_dim", None), c.hidden_size, c.num_attention_heads, cb_config.page_size,
            tuple(getattr(c, "layer_types", None) or ()))


def cost_per_byte(init, config, cb_config, device, *args, **kwargs) -> float:
    """Device bytes one byte of the paged cache costs: a cache of one block made and measured (its byte buffer,
    its views), then freed."""
    dtype = kwargs.get("dtype", args[1] if len(args) > 1 else torch.float16)
    key = _key(device, config, cb_config, dtype)
    if key not in costs:
        probe_config = copy.copy(cb_config)
        probe_config.num_blocks = 1
        gc.collect()
        before = torch.ttnn.memory_allocated(device)
        token = _sizing.set((device, 1.0))
        try:
            probe = object.__new__(_cache_class())
            init(probe, config, probe_config, device, *args, **kwargs)
            grown = torch.ttnn.memory_allocated(device) - before
            costs[key] = max(1.0, grown / probe.cache_tensor.nbytes)
        finally:
            _sizing.reset(token)
            probe = None
            gc.collect()
    return costs[key]


def _cache_class():
    return sys.modules[CACHE_MODULE].PagedAttentionCache


def _patched_init(original):
    def __init__(self, config, continuous_batching_config, device, *args, **kwargs):
        dev = torch.device(device)
        if dev.type != "ttnn" or _sizing.get() is not None:
            return original(self, config, continuous_batching_config, device, *args, **kwargs)
        if dev.index is None:
            dev = torch.device("ttnn", torch.ttnn.current_device())
        cost = cost_per_byte(original, config, continuous_batching_config, dev, *args, **kwargs)
        token = _sizing.set((dev, cost))
        try:
            original(self, config, continuous_batching_config, device, *args, **kwargs)
        finally:
            _sizing.reset(token)
    __init__.__wrapped__ = original
    return __init__


def patch(module) -> None:
    """Wires the sizing into transformers' cache module (once)."""
    if getattr(module, "_ttnn_sizing", False):
        return
    module.get_device_and_memory_breakdown = _patched_breakdown(module.get_device_and_memory_breakdown)
    cls = module.PagedAttentionCache
    cls.__init__ = _patched_init(cls.__init__)
    planner = module.PagedAttentionMemoryHandler
    planner.__init__ = _patched_planner(planner.__init__)
    module._ttnn_sizing = True


def install() -> None:
    imports.after_import(CACHE_MODULE, patch)
