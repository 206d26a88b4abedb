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
from ttnn_eager.tools.compare import pcc  # noqa: E402,F401  (the one Pearson: tests import it from here)


COVERS: dict = {}  # property-based test name -> aten ops it exercises (any test module may add to it)


def covers(*ops):
    """Marks a property-based test as exercising `ops` (tests/test_fuzz.py checks every lowering has one)."""
    def mark(fn):
        COVERS[f"{fn.__module__}.{fn.__name__}"] = set(ops)
        return fn
    return mark


def all_test_modules() -> list:
    """Every tests/test_*.py module, imported: the guards gather what each file covers (its `CASES`, its
    `@covers` marks), so a new family of lowerings brings its tests in a file of its own."""
    import importlib
    import pathlib
    return [importlib.import_module(p.stem) for p in sorted(pathlib.Path(__file__).parent.glob("test_*.py"))]


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
