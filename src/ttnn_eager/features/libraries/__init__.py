"""The libraries people train with, on `ttnn:0` (docs/libraries.md has the table of what runs).

    amp.py         torch.amp.GradScaler("ttnn"): its unscale_ without float64 (installed at import: cheap)
    accelerate.py  device_map="auto" (accelerate, transformers) over ttnn devices by their free memory
                   (installed at import without importing accelerate: a finder wraps it when it loads)
    lightning.py   a Lightning Accelerator for ttnn, registered as accelerator="ttnn" (imported by the user:
                   `import ttnn_eager.features.libraries.lightning`, or through `register_lightning()`)

Nothing here imports a library at `import torch` time; each piece imports its library when it is used.
The HF Trainer and accelerate need no code here: they take the device from ACCELERATE_TORCH_DEVICE=ttnn:0
(docs/libraries.md).
"""
from . import accelerate as _accelerate
from . import amp as _amp


def install() -> None:
    """What the package root wires at import: GradScaler's unscale_ for ttnn scalers (a method swap, cheap),
    and accelerate's get_max_memory counting ttnn devices (when accelerate is imported)."""
    _amp.install()
    _accelerate.install()


def register_lightning():
    """Registers `accelerator="ttnn"` with Lightning (imports lightning); returns the Accelerator class."""
    from .lightning import TTNNAccelerator, register
    register()
    return TTNNAccelerator
