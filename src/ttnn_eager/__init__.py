"""ttnn_eager: a PyTorch device backend that runs PyTorch eagerly on Tenstorrent accelerators via TT-NN.

    import torch, ttnn_eager          # `import torch` alone loads it too (PyTorch's backend autoload)
    model.to("ttnn:0")
    out = model(input_ids.to("ttnn:0"))

Importing registers the `ttnn` device (cheap); ttnn itself is imported when a ttnn device is first used.
"""
import torch  # noqa: F401  (first: importing torch may autoload this package's registration)

from ._registration import register as _register

_register()

from .config import configure, strict  # noqa: E402
from .counters import reset_stats, stats  # noqa: E402

__all__ = ["configure", "strict", "stats", "reset_stats", "FallbackError", "TtnnTensor", "record_ops", "report"]
__version__ = "0.1.0"


def __getattr__(name):  # heavier pieces load on first use (they import ttnn)
    if name == "FallbackError":
        from .dispatch import FallbackError
        return FallbackError
    if name == "TtnnTensor":
        from .tensor import TtnnTensor
        return TtnnTensor
    if name == "report":
        from .report import report
        return report
    if name == "record_ops":
        from .inventory import record_ops
        return record_ops
    raise AttributeError(f"module 'ttnn_eager' has no attribute {name!r}")
