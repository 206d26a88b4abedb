"""Work objects of the ttnn process group.

    completed(tensors)       a Work already done (the host path completes each collective before returning),
                             its future's value the output tensors (DDP's reducer reads `get_future().value()`)
    CopyBack(work, fn)       a Work whose wait() waits gloo's work and then runs fn (recv: upload what arrived)
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future


def completed(tensors: list):
    fut = torch.futures.Future()
    fut.set_result(list(tensors))
    return _create_work_from_future(fut)


class CopyBack(dist._Work):
    """gloo's work on host buffers, then `finish()` (the upload into the device tensor) once, at the first
    wait."""

    def __init__(self, inner, finish, result: list):
        super().__init__()
        self._inner, self._finish, self._result, self._done = inner, finish, result, False

    def _complete(self, timeout=None) -> None:
        if not self._done:
            if timeout is None:
                self._inner.wait()
            else:
                self._inner.wait(timeout)
            self._finish()
            self._done = True

    def wait(self, timeout=None) -> bool:
        self._complete(timeout)
        return True

    def is_completed(self) -> bool:
        return self._done or self._inner.is_completed()

    def is_success(self) -> bool:
        return self._inner.is_success()

    def exception(self):
        return self._inner.exception()

    def source_rank(self) -> int:
        return self._inner.source_rank()

    def result(self):
        self._complete()
        return self._result

    def get_future(self):
        self._complete()
        fut = torch.futures.Future()
        fut.set_result(self._result)
        return fut

    def synchronize(self) -> None:
        self._complete()
