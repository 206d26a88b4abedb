"""Fake zoo entries for tests/test_zoo.py (`file:<this file>:<function>`): each returns (model, inputs), or
kills / hangs the worker process that builds it."""
import os
import signal
import time

import torch


def tiny():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32)).eval(), \
        {"input": torch.randn(4, 32)}


def segv():
    os.kill(os.getpid(), signal.SIGSEGV)


def hangs():
    time.sleep(3600)


class _RoundedLength(torch.nn.Module):
    """VITS in small: the output length is a ceil of float values, one of which (8.0186) bfloat16 cannot hold."""

    def __init__(self):
        super().__init__()
        self.frames = torch.nn.Parameter(torch.tensor([8.0186, 2.5]))

    def forward(self, x):
        durations = torch.ceil(self.frames * x)
        n = int(durations.sum())
        return {"wave": torch.arange(n, device=x.device).to(x.dtype) * x, "lengths": durations}


def rounded_length():
    return _RoundedLength().eval(), {"x": torch.ones(1)}


class _Broken(torch.nn.Module):
    """Two linears with a graph break between them (what transformers' own data-dependent code makes)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(32, 64), torch.nn.Linear(64, 32)

    def forward(self, input):
        h = torch.relu(self.a(input))
        torch._dynamo.graph_break()
        return self.b(h)


def graph_break():
    torch.manual_seed(0)
    return _Broken().eval(), {"input": torch.randn(4, 32)}
