"""Which device this process runs on: real hardware, or the real ttnn library on a mock device; and which of
its devices is the current one (`ttnn` with no index).

`TTNN_EAGER_DEVICE` selects it (read once, before ttnn is imported):

    hardware        a Tenstorrent card through ttnn
    mock-wormhole   Wormhole n150 mock device (one chip)
    mock-blackhole  Blackhole p150 mock device (one chip)
    mock-n300       Wormhole n300 mock device (two chips: ttnn:0 and ttnn:1)
    mock-t3000      Wormhole T3000 mock system (four n300 cards: eight chips, ttnn:0 .. ttnn:7)
    auto            (default) hardware if a card is found (/dev/tenstorrent), else mock-wormhole, with a
                    one-line notice on stderr

Which chips this process sees (`visible_devices`) follows CUDA_VISIBLE_DEVICES: all of them, as ttnn:0 ..
ttnn:N-1, unless `TTNN_EAGER_VISIBLE_DEVICES` lists physical indices ("1", "0,1"; "all" for every chip), which
are then renumbered from 0. A torchrun rank sees every chip too and names its own as
`torch.device("ttnn", LOCAL_RANK)`, CUDA's idiom; it differs from CUDA in one respect: a rank starts with its
own chip as the current device (`initial_device`: "ttnn" without an index is ttnn:LOCAL_RANK), because two
processes cannot share a chip. (Until the C++ device guard, each rank saw only its chip, as ttnn:0: the
Python guard reported one device, so a backward on ttnn:1 stopped in the autograd engine; docs/design/platform.md.)

Mesh mode (features/mesh): `TTNN_EAGER_MESH=RxC` (or `ttnn_eager.mesh.init((R, C))` before the device
opens) makes `ttnn:0` one TT-NN MeshDevice of R x C chips on the device fabric: the process then sees one
ttnn device, and every op runs on every chip of it (`mesh_shape()`).

A mock device is the whole real ttnn library (validation, program factories, the DRAM/L1 allocator) with
no hardware behind it: ttnn reads a UMD cluster descriptor (TT_METAL_MOCK_CLUSTER_DESC_PATH) instead of
probing PCIe, and builds kernels with a stand-in for the sfpi compiler. This module lays that rig out in a
per-user cache directory from the files in device/rig (nothing in site-packages changes, nothing outside
this package is read):

    <cache>/mock-<ttnn version>/root/            symlinks to the ttnn package, except runtime/sfpi
    <cache>/mock-<ttnn version>/root/runtime/sfpi/compiler/bin/riscv-tt-elf-g++   the stand-in compiler
    <cache>/mock-<ttnn version>/jit/             TT_METAL_CACHE: the JIT build cache (kept between runs)

This module never imports ttnn: it must run before ttnn is imported, because ttnn reads these variables.
"""
from __future__ import annotations

import dataclasses
import glob
import importlib.util
import os
import stat
import sys

MODES = ("hardware", "mock-wormhole", "mock-blackhole", "mock-n300", "mock-t3000", "auto")
_DESCRIPTORS = {  # mode -> (cluster descriptor shipped in device/rig, human name, chips)
    "mock-wormhole": ("wormhole_N150.yaml", "Wormhole n150", 1),
    "mock-blackhole": ("blackhole_P150.yaml", "Blackhole p150", 1),
    "mock-n300": ("wormhole_N300.yaml", "Wormhole n300", 2),
    "mock-t3000": ("wormhole_T3000.yaml", "Wormhole T3000", 8),
}
_HERE = os.path.dirname(os.path.abspath(__file__))


@dataclasses.dataclass(frozen=True)
class Runtime:
    mode: str          # "hardware" or one of the mock modes
    board: str         # e.g. "Wormhole n150"; "" for hardware until a device is open
    chips: int = 0     # the mock's chips (its cluster descriptor's); 0 for hardware (ttnn counts them)

    @property
    def mock(self) -> bool:
        return self.mode != "hardware"


_runtime: Runtime | None = None
_current = 0  # the current device index: `ttnn` without an index (torch.ttnn.set_device), until the hooks hold it
_thread_current = None  # (get, set) of the C++ hooks' per-thread current device, once registered (core/native.py)


def use_thread_current_device(get, set_) -> None:
    """From registration on, the current device is the C++ device guard's, per thread as CUDA's is (the
    autograd engine's device threads set theirs; a thread starts on initial_device())."""
    global _thread_current
    _thread_current = (get, set_)


def current_device() -> int:
    return _thread_current[0]() if _thread_current else _current


def index_of(device=None) -> int:
    """The device index a `device` argument names (torch.cuda's convention): None, "ttnn" or a ttnn device
    without an index is the current device; an int is an index; any other device type is a ValueError."""
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    import torch  # not at module level: this module runs before anything heavy is imported
    device = torch.device(device)
    if device.type != "ttnn":
        raise ValueError(f"expected a ttnn device, got {device}")
    return current_device() if device.index is None else device.index


_mesh: tuple | None = None  # the mesh shape set by set_mesh_shape (before the device opens), else from the env


def mesh_shape() -> tuple | None:
    """(rows, columns) of the mesh `ttnn:0` is (TTNN_EAGER_MESH="1x2", or set_mesh_shape), None outside mesh
    mode."""
    if _mesh is not None:
        return _mesh
    spec = os.environ.get("TTNN_EAGER_MESH", "").strip().lower()
    if not spec:
        return None
    try:
        rows, cols = (int(p) for p in spec.split("x"))
    except ValueError:
        raise RuntimeError(f"TTNN_EAGER_MESH={spec!r}: expected the mesh shape as ROWSxCOLUMNS, such as 1x2 (an "
                           f"n300) or 2x4 (a T3000)") from None
    return _check_mesh((rows, cols))


def _check_mesh(shape: tuple) -> tuple:
    if len(shape) != 2 or min(shape) < 1:
        raise ValueError(f"a mesh shape is (rows, columns) of at least one chip each, got {shape}")
    return (int(shape[0]), int(shape[1]))


def set_mesh_shape(shape) -> None:
    """Mesh mode from here on (the caller has checked that the device is not open yet); None leaves it."""
    global _mesh
    _mesh = None if shape is None else _check_mesh(tuple(shape))


def set_current_device(index: int) -> None:
    """Make ttnn:<index> the current device of the calling thread (the caller has checked that it exists)."""
    global _current
    if _thread_current:
        _thread_current[1](index)
    else:
        _current = index


def visible_devices() -> tuple | None:
    """The physical indices of the chips this process sees as ttnn:0, ttnn:1, ...; None for all of them."""
    spec = os.environ.get("TTNN_EAGER_VISIBLE_DEVICES", "").strip().lower()
    if spec == "all":
        return None
    if spec:
        try:
            return tuple(int(i) for i in spec.split(","))
        except ValueError:
            raise RuntimeError(f"TTNN_EAGER_VISIBLE_DEVICES={spec!r}: expected chip indices such as 0 or 0,1, "
                               f"or all") from None
    return None


def _local_rank() -> tuple | None:
    """(LOCAL_RANK, LOCAL_WORLD_SIZE) of one of several torchrun ranks on this host, else None."""
    local_rank, local_size = os.environ.get("LOCAL_RANK"), os.environ.get("LOCAL_WORLD_SIZE")
    try:
        if local_rank is not None and local_size is not None and int(local_size) > 1:
            return int(local_rank), int(local_size)
    except ValueError:
        pass
    return None


def initial_device() -> int:
    """The current device a thread starts with: the rank's chip (LOCAL_RANK) for one of several torchrun ranks
    on this host (LOCAL_WORLD_SIZE > 1), else ttnn:0."""
    try:
        if mesh_shape() is not None:
            return 0  # mesh mode: the mesh (this rank's card, see mesh_chips) is ttnn:0
    except RuntimeError:
        return 0  # an invalid TTNN_EAGER_MESH: said when the device opens
    rank = _local_rank()
    return rank[0] if rank else 0


def mesh_chips(shape: tuple) -> list | None:
    """The physical chips of this process's mesh of `shape`: TTNN_EAGER_VISIBLE_DEVICES's, or for one of
    several torchrun ranks on this host its own card's (the card-shaped launch: a T3000 as 4 ranks, each
    driving its n300 as a 1x2 mesh; the mock T3000's cards are chips (r, r + 4): PCIe chip r and its remote
    partner), else None: every chip, from the system mesh's origin."""
    n = shape[0] * shape[1]
    visible = visible_devices()
    if visible is not None:
        return list(visible[:n])
    local_rank, local_size = os.environ.get("LOCAL_RANK"), os.environ.get("LOCAL_WORLD_SIZE")
    if local_rank is None or local_size is None or int(local_size) <= 1:
        return None
    r = int(local_rank)
    if requested_mode() == "mock-t3000" and n == 2:
        return [r, r + 4]
    return list(range(r * n, (r + 1) * n))


def known_device_count() -> int | None:
    """The ttnn devices this process sees when that is known without ttnn (a mock device: its cluster
    descriptor's chips; the visible ones); None for a card (ttnn counts its chips) or an invalid setting."""
    try:
        visible = visible_devices()
        mode = requested_mode()
        if mesh_shape() is not None:
            return 1  # mesh mode: ttnn:0 is the whole mesh
    except (RuntimeError, ValueError):
        return None  # said at the first use of a device
    if visible is not None:
        return len(visible)
    if mode == "auto":
        mode = "hardware" if hardware_present() else "mock-wormhole"
    return None if mode == "hardware" else _DESCRIPTORS[mode][2]


def physical_index(index: int) -> int:
    """The physical chip behind the logical `ttnn:<index>` (device/api.py asks when it opens the device). A
    torchrun rank opening another local rank's chip is warned: scripts of the rule before issue 35 (each rank
    saw its chip as ttnn:0) name ttnn:0 in every rank, and two processes cannot share a chip on a card."""
    visible = visible_devices()
    chip = index if visible is None else visible[index]
    rank = _local_rank()
    if visible is None and rank and chip != rank[0] and chip < rank[1]:
        import warnings
        warnings.warn(f"ttnn_eager: this torchrun rank (LOCAL_RANK={rank[0]}) opens ttnn:{chip}, the chip of local "
                      f"rank {chip}; two processes cannot share a chip on a card. A rank's own chip is "
                      f"torch.device('ttnn', LOCAL_RANK), also its current device ('ttnn' without an index), as "
                      f"on CUDA (before issue 35 each rank saw its chip as ttnn:0)", stacklevel=3)
    return chip


def hardware_present() -> bool:
    return bool(glob.glob("/dev/tenstorrent/*"))


def cache_dir() -> str:
    base = os.environ.get("TTNN_EAGER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ttnn_eager")
    return base


def requested_mode() -> str:
    mode = os.environ.get("TTNN_EAGER_DEVICE", "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise RuntimeError(f"TTNN_EAGER_DEVICE={mode!r} is not one of {', '.join(MODES)}")
    return mode


def get() -> Runtime:
    """Decide the runtime once per process and prepare the environment ttnn will read."""
    global _runtime
    if _runtime is None:
        mode = requested_mode()
        if mode == "auto":
            if hardware_present():
                mode = "hardware"
            else:
                mode = "mock-wormhole"
                print("ttnn_eager: no Tenstorrent card found; using a mock Wormhole n150 device "
                      "(set TTNN_EAGER_DEVICE to choose)", file=sys.stderr)
        if mode == "hardware":
            if not hardware_present():  # before ttnn is asked: it would stop in "No chips detected"
                raise RuntimeError(
                    "TTNN_EAGER_DEVICE=hardware, but no Tenstorrent card is visible to this process "
                    "(/dev/tenstorrent/ has no device). Set TTNN_EAGER_DEVICE=auto (a card when one is "
                    "found, else a mock device), or mock-wormhole, mock-blackhole, mock-n300 or mock-t3000 to "
                    "run on a mock device; on a machine with a card, check its driver (tt-kmd) and the device's "
                    "permissions.")
            _runtime = Runtime(mode, "")
        else:
            _prepare_mock(mode)
            _runtime = Runtime(mode, _DESCRIPTORS[mode][1], _DESCRIPTORS[mode][2])
        # ttnn logs at INFO/DEBUG by default; keep the user's terminal quiet unless asked otherwise, and
        # write tt-metal's generated/ files (watcher kernel lists, ...) to our cache, not the working directory.
        os.environ.setdefault("TT_LOGGER_LEVEL", "off")
        os.environ.setdefault("TT_METAL_LOGS_PATH", os.path.join(cache_dir(), "logs"))
        os.environ.setdefault("LOGURU_LEVEL", "WARNING")
    return _runtime


def _ttnn_package_dir() -> str:
    spec = importlib.util.find_spec("ttnn")
    if spec is None or not spec.origin:
        raise RuntimeError("ttnn is not installed: run the README's setup command (scripts/setup.sh)")
    return os.path.dirname(spec.origin)


def _symlink(src: str, dst: str) -> None:
    if os.path.islink(dst) and os.readlink(dst) == src:
        return
    tmp = f"{dst}.tmp{os.getpid()}"
    os.symlink(src, tmp)
    os.replace(tmp, dst)  # atomic: several processes may lay out the rig at once


def _write_if_changed(path: str, text: str, mode: int = 0o644) -> None:
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _prepare_mock(mode: str) -> None:
    pkg = _ttnn_package_dir()
    from importlib.metadata import version
    rig = os.path.join(cache_dir(), f"mock-ttnn-{version('ttnn')}")
    root, runtime_dir = os.path.join(rig, "root"), os.path.join(rig, "root", "runtime")
    bindir = os.path.join(rig, "sfpi", "compiler", "bin")
    for d in (runtime_dir, bindir, os.path.join(rig, "sfpi", "include"), os.path.join(rig, "jit")):
        os.makedirs(d, exist_ok=True)
    for entry in os.listdir(pkg):
        if entry != "runtime":
            _symlink(os.path.join(pkg, entry), os.path.join(root, entry))
    for entry in os.listdir(os.path.join(pkg, "runtime")):
        if entry != "sfpi":
            _symlink(os.path.join(pkg, "runtime", entry), os.path.join(runtime_dir, entry))
    _symlink(os.path.join(rig, "sfpi"), os.path.join(runtime_dir, "sfpi"))
    compiler = os.path.join(_HERE, "rig", "fake_sfpi_compiler.py")
    _write_if_changed(os.path.join(bindir, "riscv-tt-elf-g++"),
                      f'#!/bin/sh\nexec "{sys.executable}" -S -E "{compiler}" "$@"\n',
                      0o755 | stat.S_IRUSR)
    os.environ["TT_METAL_RUNTIME_ROOT"] = root
    os.environ["TT_METAL_MOCK_CLUSTER_DESC_PATH"] = os.path.join(_HERE, "rig", _DESCRIPTORS[mode][0])
    os.environ["TT_METAL_CACHE"] = os.path.join(rig, "jit") + os.sep
