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
