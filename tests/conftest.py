"""Shared test setup. Tests run on the mock Wormhole n150 device unless TTNN_EAGER_DEVICE says otherwise
(on a machine with a card, TTNN_EAGER_DEVICE=hardware runs the same tests with real values)."""
import os
import subprocess
import sys

os.environ.setdefault("TTNN_EAGER_DEVICE", "mock-wormhole")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import ttnn_eager  # noqa: E402,F401


def pcc(a, b) -> float:
    a, b = a.detach().double().flatten(), b.detach().double().flatten()
    return float(torch.corrcoef(torch.stack([a, b]))[0, 1])


def run_python(code: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter (for process-wide settings such as the device kind)."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env,
                          timeout=timeout)


@pytest.fixture
def restore_config():
    from ttnn_eager import config
    saved = dict(config.settings)
    yield
    config.settings.update(saved)
