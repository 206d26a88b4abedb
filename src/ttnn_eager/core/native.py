"""The ttnn device's C++ part (csrc/): built once per torch version, loaded, registered.

    load()       the library: built into the cache if it is not there yet (~2 s of g++), then loaded
    register(count)   PyTorch's PrivateUse1 hooks (pinned-memory allocator, device count, current device) and
                 device guard (N devices, a per-thread current device); `count()` answers the device count
                 when it cannot be known without ttnn (a card: asked once, at the first use that needs it)
    current_device() / set_current_device(i)   the calling thread's current device (the guard's)
    tensors()    the extension module of csrc/tensor.cpp: new_tensor, alias, handle, view, has_empty (core/tensor.py,
                 core/dispatch.py: the per-op path's tensor making and look-ups)

Why C++ at all (docs/design/platform.md): PyTorch asks a device for a pinned-memory allocator and for its
device count through C++ virtual functions that the Python registration (torch._C._acc) does not forward --
its hooks answer only is_available/is_built/has_primary_context and its guard reports one device, so
pin_memory() raises and the autograd engine has one ready queue (a backward on ttnn:1 stops in its assert).

The library is keyed by the source, torch's version and build, and the compiler flags: a new torch (or a
changed hooks.cpp) builds a new one; a build goes to a temporary file renamed into place only when the
compiler succeeded, so a failed or interrupted build never leaves a library that would be loaded.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import sys

import torch

from ..device import runtime

CSRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc")
SOURCES = (os.path.join(CSRC, "hooks.cpp"), os.path.join(CSRC, "tensor.cpp"))
_FLAGS = ("-O2", "-std=c++20", "-fPIC", "-shared", "-fvisibility=hidden", "-w")


class BuildError(RuntimeError):
    """The C++ hooks could not be built (no compiler, or the compiler failed): the backend is not registered."""


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and (path := shutil.which(name)):
            return path
    return None


def _key() -> str:
    parts = []
    for source in SOURCES:
        with open(source, "rb") as f:
            parts.append(f.read())
    parts += [torch.__version__.encode(), str(torch.version.git_version).encode(),
             " ".join(_FLAGS).encode(), sys.implementation.cache_tag.encode()]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def library_path() -> str:
    return os.path.join(runtime.cache_dir(), "native", f"hooks-torch{torch.__version__}-{_key()}.so")


def _command(compiler: str, out: str) -> list:
    """One g++ call (no ninja, no setuptools): the wheel's own headers (torch.utils.cpp_extension.include_paths()'s
    first entry; the C++ API's folder is not needed) and its c10/torch_cpu libraries."""
    import sysconfig
    root = os.path.dirname(torch.__file__)
    lib = os.path.join(root, "lib")
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return [compiler, *_FLAGS, f"-D_GLIBCXX_USE_CXX11_ABI={abi}", f"-isystem{os.path.join(root, 'include')}",
            f"-isystem{sysconfig.get_paths()['include']}", *SOURCES, "-o", out, f"-L{lib}", "-lc10",
            "-ltorch_cpu", "-ltorch_python", f"-Wl,-rpath,{lib}"]


def build() -> str:
    """Build the library into the cache unless it is there; return its path. Raises BuildError."""
    path = library_path()
    if os.path.exists(path):
        return path
    compiler = _compiler()
    if compiler is None:
        raise BuildError(
            "ttnn_eager needs a C++ compiler once per torch version, to build the ttnn device's hooks "
            f"({CSRC}), and none was found (g++, c++, clang++ or $CXX): install one (Debian/Ubuntu: "
            "apt-get install g++) and run ./scripts/setup.sh or import again.")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        done = subprocess.run(_command(compiler, tmp), capture_output=True, text=True)
        if done.returncode != 0:
            raise BuildError(
                f"ttnn_eager could not build the ttnn device's hooks ({CSRC}) with {compiler} against torch "
                f"{torch.__version__}'s headers; nothing was installed. The compiler said:\n"
                f"{(done.stderr or done.stdout).strip()[-4000:]}\nFix: a C++20 compiler (g++ >= 10) and the torch "
                f"wheel's headers (torch/include) are needed; set CXX to choose the compiler.")
        os.replace(tmp, path)  # atomic: a library in the cache is always a whole one
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


@functools.cache
def load() -> ctypes.CDLL:
    lib = ctypes.CDLL(build())
    lib.ttnn_eager_register.argtypes = [_COUNT_FN]
    lib.ttnn_eager_set_device_count.argtypes = [ctypes.c_int]
    lib.ttnn_eager_set_current_device.argtypes = [ctypes.c_int]
    lib.ttnn_eager_set_initial_device.argtypes = [ctypes.c_int]
    return lib


_COUNT_FN = ctypes.CFUNCTYPE(ctypes.c_int)
_keep: list = []  # the ctypes callback must outlive the library's use of it


def register(count) -> None:
    """Register the hooks and the guard for PrivateUse1 (before anything else registers Python ones).
    The device count is set now when it is known without ttnn (a mock device: its cluster descriptor), else
    `count()` is asked once, at the first use that needs it (the first backward, torch.accelerator)."""
    lib = load()

    def answer() -> int:
        try:
            return int(count())
        except Exception as err:  # a C++ caller cannot take a Python exception: say it, count none
            print(f"ttnn_eager: counting ttnn devices failed: {err}", file=sys.stderr)
            return 0

    callback = _COUNT_FN(answer)
    _keep.append(callback)
    done = lib.ttnn_eager_register(callback)
    if done != 3:
        raise RuntimeError(f"ttnn_eager: PyTorch's PrivateUse1 {'hooks' if not done & 1 else 'device guard'} "
                           f"were registered by something else before the ttnn device")
    known = runtime.known_device_count()
    if known is not None:
        lib.ttnn_eager_set_device_count(known)
    lib.ttnn_eager_set_initial_device(runtime.initial_device())


def set_device_count(n: int) -> None:
    """The device guard's count from now on (mesh mode: the mesh is one device, ttnn:0)."""
    load().ttnn_eager_set_device_count(n)


@functools.cache
def tensors():
    """The extension module of csrc/tensor.cpp (`new_tensor`, `alias`, `view`: the tensors made on every op's path;
    `handle`, `has_empty`: the look-ups every op makes of its arguments),
    loaded from the same library: METH_FASTCALL functions, called with the GIL held, their errors raised."""
    import importlib.machinery
    import importlib.util
    path = build()
    spec = importlib.util.spec_from_file_location(
        "_ttnn_eager_native", path, loader=importlib.machinery.ExtensionFileLoader("_ttnn_eager_native", path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def current_device() -> int:
    return load().ttnn_eager_current_device()


def set_current_device(index: int) -> None:
    load().ttnn_eager_set_current_device(index)
