"""Serving on `ttnn:0`: transformers' continuous batching (`generate_batch`, `ContinuousBatchingManager`,
its paged KV cache) and `transformers serve`'s app, on the device (docs/serving.md).

    memory.py   transformers sizes its paged cache from the free memory of the model's device, which it
                knows for CUDA, XPU and MPS only (a ttnn model would be sized from the host's RAM): for a
                ttnn device it reads torch.ttnn.mem_get_info instead, in the device bytes one byte of the
                cache costs (measured on a one-block cache), and applies its own max_memory_percent.
                Installed at import (install(): an import hook, cheap; transformers is not imported)
    paged.py    the paged cache in TT-NN's layout (one [blocks, kv heads, block, d] cache a layer, transformers'
                block numbers as pages) and decode steps on TT-NN's paged ops (an attention function for ttnn
                tensors); prefill through the ordinary lowerings on the same caches
    imports.py  the import hook both patch transformers' continuous-batching modules through
    server.py   `ttnn-eager serve`: transformers' own serving app over a model on the device
    faults.py   bad input and faults in that server (hooks on transformers' managers): HTTP 400 for a prompt
                beyond the context or the cache, a failing forward fails only its request, a cancelled stream
                forgets its handler

transformers' byte buffer is still allocated as one byte buffer viewed as the model's dtype (view(dtype) runs
on the device: lowerings/views.py, Note [dtype views]); paged.py keeps the keys and values elsewhere.

Imports: the core, the device layer, config and counters, features/device_module.py (never a lowering,
never a tool); transformers and the serving dependencies only inside functions, when they are used.
"""
from __future__ import annotations


def install() -> None:
    """What the package root wires at import: the paged cache's memory sizing (memory.py) and layout and decode
    path (paged.py) for ttnn devices."""
    from . import memory, paged
    memory.install()
    paged.install()
