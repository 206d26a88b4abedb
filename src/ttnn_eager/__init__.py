"""ttnn_eager: a PyTorch device backend that runs PyTorch eagerly on Tenstorrent accelerators via TT-NN.

    import torch, ttnn_eager          # `import torch` alone loads it too (PyTorch's backend autoload)
    model.to("ttnn:0")
    out = model(input_ids.to("ttnn:0"))

Importing registers the `ttnn` device (cheap); ttnn itself is imported when a ttnn device is first used.

The package, in layers (each folder's docstring says what it owns; tests/test_layering.py checks the
imports): a layer imports only the layers before it.

    config.py, counters.py   the user's settings and the statistics: imported by everything, import nothing
    device/       the one ttnn caller: device discovery (runtime), the device API, the card and mock backends
    core/         the backend: registration, the tensor (plain, storage-held Handle), dispatch, the lowering registry, the layout policy
    lowerings/    one small function per aten op, registered into core/registry.py
    features/     what users call beside tensors: torch.ttnn (device_module), graphs, record_ops, report,
                  torch.compile(backend="ttnn") (compile/)
    tools/        programs that use the backend from outside: the CLI, model checks, validation, docs

This file is the wiring: it registers the device with the device module and the loader of the backend.
"""
import torch  # noqa: F401  (first: importing torch may autoload this package's registration)

from .core import registration as _registration
from .features import device_module as _device_module
from .features.compile.route import install as _route_default_compile


def _load_backend():
    """The dispatch module with every lowering registered (at the first op on a ttnn device: it imports ttnn)."""
    from . import lowerings  # noqa: F401  (registers every lowering)
    from .core import dispatch
    return dispatch


_registration.register(_device_module, _load_backend)
_route_default_compile()

from .features import distributed as _distributed  # noqa: E402

_distributed.register()  # the c10d backend "ttnn" (a dictionary entry; the group loads when one is made)

from .features import libraries as _libraries  # noqa: E402

_libraries.install()  # torch.amp.GradScaler("ttnn") without float64 (features/libraries/amp.py)

from .features import serving as _serving  # noqa: E402

_serving.install()  # transformers' paged cache sized from the device's memory (an import hook: cheap)

from .config import configure, strict  # noqa: E402
from .counters import reset_stats, stats  # noqa: E402

__all__ = ["configure", "strict", "stats", "reset_stats", "FallbackError", "TtnnTensor", "record_ops", "report"]
__version__ = "0.1.0"


def __getattr__(name):  # heavier pieces load on first use (they import ttnn)
    if name == "FallbackError":
        from .core.dispatch import FallbackError
        return FallbackError
    if name == "TtnnTensor":
        from .core.tensor import TtnnTensor
        return TtnnTensor
    if name == "report":
        from .features.report import report
        return report
    if name == "mesh":  # mesh mode: one process drives a board's chips (features/mesh)
        from .features import mesh
        return mesh
    if name == "record_ops":
        from .features.inventory import record_ops
        return record_ops
    raise AttributeError(f"module 'ttnn_eager' has no attribute {name!r}")
