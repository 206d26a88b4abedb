"""accelerate's (and so transformers') `device_map="auto"` over ttnn devices: `get_max_memory()` with no
`max_memory` counts the free memory of CUDA, NPU, XPU, ... devices by name and of no other accelerator, so
a model on ttnn devices was placed on the CPU, silently. Wrapped here: with no CUDA device and ttnn the
accelerator, it answers {0: free bytes of ttnn:0, 1: ..., "cpu": ...} (torch.ttnn.mem_get_info), and the
integer keys of the device map are ttnn devices (torch.device(1) is ttnn:1 when ttnn is the accelerator).

Installed without importing accelerate: a finder on sys.meta_path wraps the function when
`accelerate.utils.modeling` is first imported (before `accelerate.utils` re-exports it, so every name bound
to it, transformers' included, is the wrapped one); if it is already imported, it is wrapped at once.
"""
from __future__ import annotations

import functools
import importlib.abc
import sys

import torch

MODULE = "accelerate.utils.modeling"


def _ttnn_devices() -> int:
    """ttnn devices to place layers on: none when CUDA devices exist (accelerate counts those itself)."""
    if torch.cuda.device_count() or torch._C._get_privateuse1_backend_name() != "ttnn":
        return 0
    return torch.ttnn.device_count() if torch.ttnn.is_available() else 0


def _wrap(get_max_memory):
    if getattr(get_max_memory, "_ttnn_eager_wrapped", False):
        return get_max_memory

    @functools.wraps(get_max_memory)
    def wrapped(max_memory=None):
        n = _ttnn_devices()
        if not n:
            return get_max_memory(max_memory)
        if max_memory is None:
            memory = {i: torch.ttnn.mem_get_info(i)[0] for i in range(n)}
            memory.update(get_max_memory(None))  # the host's ("cpu"; "mps"/"disk" where accelerate adds them)
            return memory
        # a budget given (get_balanced_memory passes one back): accelerate would check its integer keys against
        # torch.cuda.device_count() and warn that each is "not available"; they are ttnn devices
        from accelerate.utils import convert_file_size_to_int
        ints = sorted(k for k in max_memory if isinstance(k, int))
        memory = {k: convert_file_size_to_int(max_memory[k]) if isinstance(max_memory[k], str) else max_memory[k]
                  for k in ints}
        memory.update(get_max_memory({k: v for k, v in max_memory.items() if not isinstance(k, int)}))
        return memory

    wrapped._ttnn_eager_wrapped = True
    return wrapped


def _patch(module) -> None:
    module.get_max_memory = _wrap(module.get_max_memory)


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps get_max_memory right after accelerate.utils.modeling is executed (once)."""

    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        import importlib.util
        sys.meta_path.remove(self)  # once; and find_spec below must not find this finder again
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def patched_exec(module):
            exec_module(module)
            _patch(module)

        spec.loader.exec_module = patched_exec
        return spec


def install() -> None:
    module = sys.modules.get(MODULE)
    if module is not None:
        _patch(module)
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
