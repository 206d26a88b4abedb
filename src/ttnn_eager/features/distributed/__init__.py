"""`torch.distributed` on ttnn devices: the c10d backend "ttnn" (docs/distributed.md).

    register()   makes "ttnn" the c10d backend of the ttnn device (dist.Backend.register_backend with
                 devices=["ttnn"], extended_api=True), so `init_process_group()` with no backend, with
                 `device_id=torch.device("ttnn:0")`, or `backend="ttnn"` / `"cpu:gloo,ttnn:ttnn"` picks it.
                 Cheap (a dictionary entry, and the PrivateUse1 kernels of the `_c10d_functional` ops:
                 functional.py): the group's module is imported when a group is made.

The group (process_group.py) is a Python `dist.ProcessGroup`: c10d's creator returns it in place of the
per-device groups, so it serves CPU tensors too (handed to its inner gloo as they are). ttnn tensors take the
host path (host_path.py): downloaded, reduced/exchanged by PyTorch's own gloo, uploaded; the bytes moved are
counted in ttnn_eager.stats(). Every collective first checks, in one small gloo all_gather, that all ranks call
the same collective on tensors of the same dtype and shape, so a mismatch is the same ValueError on every rank
(gloo itself aborts the process or returns garbage).
"""
from __future__ import annotations

NAME = "ttnn"


def _create(opts, pg_options=None):
    from . import fsdp
    from .process_group import TtnnProcessGroup
    fsdp.install()  # FSDP2's storage free/alloc for ttnn tensors
    return TtnnProcessGroup(opts.store, opts.group_rank, opts.group_size, opts.timeout)


def register() -> None:
    import torch.distributed as dist
    if not dist.is_available() or NAME in dist.Backend.backend_list:
        return
    dist.Backend.register_backend(NAME, _create, extended_api=True, devices=["ttnn"])
    from . import functional
    functional.install()  # the _c10d_functional ops on ttnn tensors (DTensor, tensor parallel, FSDP2)
