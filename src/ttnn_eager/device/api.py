"""The device API: the only module of ttnn_eager that calls ttnn.

Everything the backend does on a device goes through these functions:

    device(index)                   the ttnn device behind `ttnn:<index>` (opened on first use, closed at exit)
    upload(tensor, dtype, layout)   host -> device (ttnn.from_torch), counted in host_to_device
    stage(tensor, dtype, layout)    a Handle whose value stays on the host until a use needs it on the device
                                    (upload_staged): conv kernels, whose device form is their prepared one
    keep_on_host(tensor)            a Handle for int64 values beyond the device's int32: kept on the host,
                                    never uploaded (every op on it runs on the CPU fallback)
    release(handle)                 a device tensor staged back to the host (its buffer freed) once its
                                    consumers read a prepared form of it instead (batch-norm statistics)
    download(handle)                device -> host (ttnn.to_torch), counted in device_to_host
    run(op, *args, **kwargs)        one ttnn op (e.g. "linear", "transformer.scaled_dot_product_attention"),
                                    counted in ttnn_ops
    create(op, args, ...)           a ttnn factory op (full, zeros, arange) made on the device
    overwrite(dst, src)             an in-place write into dst's own buffer (ttnn.copy), where no other
                                    tensor is on that buffer
    empty_cache(index)              release what ttnn's program cache holds on the device (see below)

and the results are `Handle`s: a ttnn tensor plus what PyTorch sees of it (torch dtype and shape).

Two backends, chosen once at import (BACKEND, at the end): the card (card.py: ttnn computes, results are
read back, graphs become ttnn traces) and the mock device (mock.py: the real ttnn library with no hardware,
whose values come from shadow execution: each Handle also carries `shadow`, the torch tensor its device
tensor would hold, computed with TT-NN's golden functions). The verbs here call the backend through one
interface -- `stored`, `rounded`, `value(s)`, `created`, `read`, `shadows_off` -- and never ask which one
it is.

Device memory beside tensors. ttnn's program cache keeps every program it built, and a program owns device
buffers: its kernel binaries (DRAM) and, for conv2d and the pools, its sliding-window (halo) configuration
tensors in L1_SMALL, the small per-core region reserved when the device opens (L1_SMALL_SIZE). They live as
long as the cache entry -- past the model that made them -- so a long process that runs many models fills
L1_SMALL. When an op fails for lack of DRAM or L1_SMALL, `run` and `prepare` empty the program cache (as
PyTorch's caching allocator frees its cached blocks) and try once more; `empty_cache`
(torch.ttnn.empty_cache) does the same on request. Errors name the memory that is full: DRAM, L1 or
L1_SMALL.

Graph capture (features/graphs.py) hooks in here and nowhere else: while `recording` is set, `run`, `create` and
`upload` report each call and its result handles to it, and `download`/`synchronize` (host syncs) are
refused. The trace verbs at the end (begin_trace, ...) are the hardware replay path's ttnn calls.
"""
from __future__ import annotations

import atexit
import collections
import functools
import math
import sys
import time

import torch

from .. import counters
from . import runtime
from .base import DEFERRED, RUNTIME, Handle, _resolve, force_deferred, shape_of, ttnn  # noqa: F401  (the device API's names)

TILE = ttnn.TILE_LAYOUT
ROW_MAJOR = ttnn.ROW_MAJOR_LAYOUT
BFLOAT16, BFLOAT8_B, FLOAT32 = ttnn.bfloat16, ttnn.bfloat8_b, ttnn.float32
INT32, UINT32, UINT16 = ttnn.int32, ttnn.uint32, ttnn.uint16
TILE_SIZE = 32

_ELEMENT_BYTES = {ttnn.bfloat16: 2, ttnn.float32: 4, ttnn.int32: 4, ttnn.uint32: 4, ttnn.bfloat8_b: 1.0625}
# L1_SMALL: the per-core L1 region that sliding-window ops (conv2d, pooling: their halo configs) allocate
# from. It is reserved when the device opens (0 B by default, and conv2d then stops in an allocator error);
# TT-NN's CNN demos reserve 24-32 KiB.
L1_SMALL_SIZE = 32768
_PRECHECK_BYTES = 64 << 20  # constants from this size up are checked against free device memory first
recording = None  # the graph capture under way (graphs._Recorder), if any
identity_refs: collections.Counter = collections.Counter()  # id(device tensor) -> references graphs hold to
# recognise it at a replay (graphs._External.see), never to read it: not owners of its buffer (sole_owner)
_live_traces: dict = {}  # device index -> captured ttnn traces not yet released (they use cached programs)
retries: dict = {}  # device index -> ops retried after the program cache was emptied (memory_stats)


# ----------------------------------------------------------------------------------------------- devices
_devices: dict = {}
_meshes: dict = {}  # device index -> (rows, columns) of a device opened as a mesh of chips (mesh mode)


def device_count() -> int:
    """The chips this process sees (runtime.visible_devices: a torchrun rank sees its own chip only); in mesh
    mode one device, `ttnn:0`, the whole mesh."""
    if runtime.mesh_shape() is not None:
        return 1
    n = BACKEND.device_count()
    visible = runtime.visible_devices()
    if visible is None:
        return n
    bad = [i for i in visible if not 0 <= i < n]
    if bad:
        raise RuntimeError(f"TTNN_EAGER_VISIBLE_DEVICES names chip {bad[0]}, but the {RUNTIME.board or 'system'} "
                           f"has {n} chip(s) (0 .. {n - 1}): list only those")
    return len(visible)


def check_index(index: int) -> None:
    n = device_count()
    if not 0 <= index < n:
        raise RuntimeError(f"ttnn:{index} is not available: this system has {n} ttnn device(s) "
                           f"({', '.join(f'ttnn:{i}' for i in range(n))}). Use one of those indices.")


def device(index: int):
    dev = _devices.get(index)
    if dev is None:
        check_index(index)
        mesh = runtime.mesh_shape()
        if mesh is not None:
            dev = _devices[index] = _open_mesh(mesh)
            _meshes[index] = mesh
        else:
            dev = _devices[index] = ttnn.open_device(device_id=runtime.physical_index(index),
                                                     l1_small_size=L1_SMALL_SIZE,
                                                     **BACKEND.open_options())
    return dev


def _open_mesh(shape: tuple):
    """The board's chips as one TT-NN MeshDevice of `shape` on the device fabric (1-D fabric, as TT-NN's own
    multi-chip models configure it: the collectives need it set before the mesh opens)."""
    chips = BACKEND.device_count()
    if shape[0] * shape[1] > chips or any(c >= chips for c in runtime.mesh_chips(shape) or ()):
        raise RuntimeError(f"TTNN_EAGER_MESH={shape[0]}x{shape[1]} asks for {shape[0] * shape[1]} chips, but the "
                           f"{RUNTIME.board or 'system'} has {chips}: use a mesh of at most {chips} chips (an n300 "
                           f"is 1x2, a T3000 2x4 or 1x8)")
    chips_of = runtime.mesh_chips(shape)
    ttnn.set_fabric_config(ttnn.FabricConfig.FABRIC_1D)
    dev = ttnn.open_mesh_device(ttnn.MeshShape(*shape), l1_small_size=L1_SMALL_SIZE, **BACKEND.open_options(),
                                **({"physical_device_ids": chips_of} if chips_of else {}))
    BACKEND.set_mesh(shape)
    return dev


def mesh_shape(index: int) -> tuple | None:
    """(rows, columns) of the mesh behind `ttnn:<index>` once it is open, None for one chip."""
    return _meshes.get(index)


def is_open(index: int) -> bool:
    return index in _devices


def device_name(index: int) -> str:
    return BACKEND.device_name(index)


def arch_name() -> str:
    return ttnn.get_arch_name()


def memory_allocated(index: int) -> int:
    """Bytes allocated on the device by ttnn's own allocator (DRAM and L1 buffers; the device is opened
    first, so that what opening it allocates is part of the baseline)."""
    dev = device(index)
    total = 0
    for kind in (ttnn.BufferType.DRAM, ttnn.BufferType.L1):
        view = ttnn.get_memory_view(dev, kind)
        total += view.total_bytes_allocated_per_bank * view.num_banks
    return total


def memory_used(index: int, kind: str) -> int:
    """Bytes allocated in one memory of device `index`: "DRAM", "L1" or "L1_SMALL" (every bank)."""
    view = ttnn.get_memory_view(device(index), getattr(ttnn.BufferType, kind))
    return view.total_bytes_allocated_per_bank * view.num_banks


def memory_capacity(index: int) -> int:
    view = ttnn.get_memory_view(device(index), ttnn.BufferType.DRAM)
    return view.total_bytes_per_bank * view.num_banks


def memory_views(index: int) -> dict:
    """ttnn's allocator, per buffer type ("dram", "l1", "l1_small"): banks, bytes per bank, allocated and free
    bytes (all banks), the largest free block (per bank)."""
    dev, views = device(index), {}
    for name, kind in (("dram", ttnn.BufferType.DRAM), ("l1", ttnn.BufferType.L1),
                       ("l1_small", ttnn.BufferType.L1_SMALL)):
        v = ttnn.get_memory_view(dev, kind)
        views[name] = {"banks": v.num_banks, "bank_bytes": v.total_bytes_per_bank,
                       "allocated_bytes": v.total_bytes_allocated_per_bank * v.num_banks,
                       "free_bytes": v.total_bytes_free_per_bank * v.num_banks,
                       "largest_free_block": v.largest_contiguous_bytes_free_per_bank,
                       "blocks": sum(1 for b in v.block_table if b.get("allocated") == "yes")}
    return views


def device_properties(index: int) -> dict:
    """What ttnn reports of device `index`: its name, architecture, compute core grid and memories."""
    dev, views = device(index), memory_views(index)
    grid = dev.compute_with_storage_grid_size()
    return {"name": device_name(index), "arch": dev.arch().name, "core_grid": (grid.x, grid.y),
            "dram_banks": views["dram"]["banks"], "dram_bytes": views["dram"]["banks"] * views["dram"]["bank_bytes"],
            "l1_banks": views["l1"]["banks"], "l1_bytes_per_bank": views["l1"]["bank_bytes"],
            "l1_small_bytes_per_bank": views["l1_small"]["bank_bytes"]}


# Peak tracking (torch.ttnn.max_memory_allocated). Reading ttnn's allocator costs ~15 us on an empty device
# and ~3 ms with a bert-large's 400 buffers (both memories' block tables are rebuilt on every read), so it
# is not read on every op: the verbs that allocate (run, create, upload) add their results' element counts
# to a tally (~0.2 us; not a result on its input's buffer, _shared_buffer: it allocated nothing), and when
# it passes PEAK_SAMPLE_ELEMENTS the allocator is read (sample_peak) and the tally restarts -- unless less
# than PEAK_READ_SPACING times the last reading's cost has passed since it ended (reading then waits for the
# next op: readings take at most ~1/PEAK_READ_SPACING of host time) or the tally has passed
# PEAK_FORCE_ELEMENTS, which reads whatever the spacing says. A peak between two readings is missed by at
# most what was allocated between them (less than PEAK_FORCE_ELEMENTS plus the last result). Every user
# query (memory_allocated, memory_stats, ...) reads too; reset_peak restarts both the tally and the spacing.
PEAK_SAMPLE_ELEMENTS = 8 << 20  # 16 MiB of bfloat16, 32 MiB of float32
PEAK_FORCE_ELEMENTS = 4 * PEAK_SAMPLE_ELEMENTS
PEAK_READ_SPACING = 50
_tally: dict = {}  # device index -> elements allocated by results since the last reading
_peak: dict = {}   # device index -> the highest allocator reading since the last reset_peak
_next_read = [0.0]  # perf_counter() before which no tally-triggered reading is made


def _grew(index: int, elements: int) -> None:
    n = _tally.get(index, 0) + elements
    if n >= PEAK_SAMPLE_ELEMENTS:
        start = time.perf_counter()
        if start >= _next_read[0] or n >= PEAK_FORCE_ELEMENTS:
            sample_peak(index)
            end = time.perf_counter()
            _next_read[0] = end + PEAK_READ_SPACING * (end - start)
            n = 0
    _tally[index] = n


def sample_peak(index: int) -> int:
    """Read ttnn's allocator (memory_allocated) and raise the recorded peak to it; returns the reading."""
    now = memory_allocated(index)
    if now > _peak.get(index, 0):
        _peak[index] = now
    return now


def peak_allocated(index: int) -> int:
    """The highest allocator reading since the device opened or reset_peak (this call reads it too)."""
    sample_peak(index)
    return _peak.get(index, 0)  # (nothing allocated yet: no reading above 0 was recorded)


def reset_peak(index: int) -> None:
    _peak[index] = 0
    _tally[index] = 0
    _next_read[0] = 0.0
    sample_peak(index)


def program_cache_entries(index: int) -> int:
    return _devices[index].num_program_cache_entries() if index in _devices else 0


def synchronize(index: int) -> None:
    """Wait for the device's work -- the deferred values' too (eager fusion: computed now)."""
    if recording is not None:
        recording.refuse("torch.ttnn.synchronize() (a host sync)")
    force_deferred()
    if index in _devices:
        ttnn.synchronize_device(_devices[index])


@atexit.register
def _close_all() -> None:
    import gc
    gc.collect()  # drop device tensors that are already garbage before their device goes away
    for obj in gc.get_objects():  # and release the ones still referenced (module globals of a script)
        if type(obj) is Handle:
            obj.tt = obj.shadow = obj.host = obj.forms = None
    _resolve.cache_clear()
    BACKEND.release()
    gc.collect()
    for index in sorted(_devices, reverse=True):  # remote chips before the MMIO chip that serves them
        dev = _devices.pop(index)
        try:
            if _meshes.pop(index, None) is not None:
                ttnn.close_mesh_device(dev)
                ttnn.set_fabric_config(ttnn.FabricConfig.DISABLED)
            else:
                ttnn.close_device(dev)
        except Exception:  # already closed with a chip it shares a cluster with
            pass


# ----------------------------------------------------------------------------------------------- values
def _unwrap(x):
    """A ttnn call's argument: Handles become their ttnn tensors, also a list of Handles (concat's inputs);
    other lists (shapes, dims) are passed as they are."""
    if type(x) is Handle:
        return x.tt
    if type(x) is list and x and type(x[0]) is Handle:
        return [y.tt for y in x]
    return x


def _first_handle(args):
    for a in args:
        if type(a) is Handle:
            return a
        if type(a) is list and a and type(a[0]) is Handle:
            return a[0]
    return None


# ----------------------------------------------------------------------------------------------- errors
class CoreMemoryError(torch.OutOfMemoryError):
    """An op's working buffers do not fit the cores' L1 SRAM at these sizes (e.g. max_pool2d with a large
    window): not a full device, but a call TT-NN cannot run. The dispatcher treats it as the lowering's
    refusal (registry.Unfit): the op runs on the CPU fallback, counted and warned, or strict mode names it."""


def _memory_kind(err: Exception):
    """(memory, bytes asked) of a ttnn allocator failure -- memory "DRAM", "L1" or "L1_SMALL" from ttnn's text
    "Out of Memory: Not enough space to allocate <n> B <memory> buffer ..." (DRAM when it names none), bytes
    None when it names no size -- or None for any other error."""
    if isinstance(err, RuntimeError) and "clash with L1 buffers" in str(err):
        return ("L1", None)  # a program's circular buffers do not fit beside the L1 buffers in use
    if not isinstance(err, RuntimeError) or "Out of Memory" not in str(err):
        return None
    import re
    found = re.search(r"allocate (\d+) B(?: (DRAM|L1_SMALL|L1) buffer)?", str(err))
    return (found.group(2) or "DRAM", int(found.group(1))) if found else ("DRAM", None)


def _out_of_memory(err: Exception, index: int, what: str):
    """ttnn's allocator failure as a torch.OutOfMemoryError naming the device, the memory that is full (DRAM,
    L1 or L1_SMALL), the sizes and what to do (None for any other error); CoreMemoryError when it is a
    per-core region (L1, L1_SMALL). ttnn raises before allocating, so every tensor that existed before is
    intact."""
    kind = _memory_kind(err)
    if kind is None:
        return None
    import re
    kind, nbytes = kind
    asked = "a buffer" if nbytes is None else _size(nbytes)
    bank = re.search(r"bank size is (\d+) B", str(err))
    per_core = f" ({_size(int(bank.group(1)))} per core)" if bank else ""
    if kind == "L1" and "clash with L1 buffers" in str(err):
        return CoreMemoryError(f"{what} does not fit the cores' L1 SRAM: its circular buffers clash with the L1 "
                               f"buffers in use (ttnn: {str(err).split('info:')[-1].strip().splitlines()[0]})")
    if kind == "L1":
        return CoreMemoryError(f"{what} needs a {asked} L1 buffer, more than the cores' SRAM holds{per_core}")
    if kind == "L1_SMALL":
        return CoreMemoryError(
            f"{what} needs a {asked} L1_SMALL buffer, and the cores' L1_SMALL region is full "
            f"({_size(memory_used(index, 'L1_SMALL'))} used on ttnn:{index}{per_core}). L1_SMALL holds the "
            f"sliding-window configurations of conv2d and the pools, which ttnn's program cache keeps "
            f"(torch.ttnn.empty_cache() releases them); its size is reserved when the device opens "
            f"(device.api.L1_SMALL_SIZE).")
    return torch.OutOfMemoryError(
        f"ttnn:{index} ({device_name(index)}) is out of memory: tried to allocate {asked} of DRAM for {what}; "
        f"{_size(memory_used(index, 'DRAM'))} of {_size(memory_capacity(index))} DRAM are allocated. Free "
        f"tensors you no longer need (del), or use a smaller batch or sequence length.")


def _size(nbytes: int) -> str:
    """A byte count as people read it: "288 B", "1.5 KiB", "3.4 MiB", "20,480 MiB"."""
    if nbytes < 1 << 20:
        return f"{nbytes / 1024:.1f} KiB" if nbytes >= 1024 else f"{nbytes} B"
    mib = nbytes / 2.0 ** 20
    return f"{mib:,.0f} MiB" if mib >= 10 else f"{mib:.1f} MiB"


def _retry_after_eviction(index: int, what: str, err: Exception, call):
    """An op that failed for lack of device memory, called once more after ttnn's program cache is emptied
    (cached programs hold DRAM and L1_SMALL buffers: see the module docstring). Its error if that does not
    help, or if nothing could be released: an empty cache, a graph capture under way (its recorded programs
    must stay), or an L1 failure (the op's own working buffers, which no cache holds)."""
    if recording is None and _memory_kind(err)[0] != "L1" and empty_cache(index):
        retries[index] = retries.get(index, 0) + 1
        try:
            return call()
        except RuntimeError as again:
            if _memory_kind(again) is None:
                raise
            err = again
    raise _out_of_memory(err, index, what) from err


_releasers: list = []  # functions(index) -> bool: caches of device tensors the backend keeps (FFT tables)


def on_empty_cache(release):
    """Register `release(index) -> bool` (a decorator): it drops a cache of device tensors kept by the
    backend past the model that made them, and says whether it dropped any. empty_cache calls it."""
    _releasers.append(release)
    return release


def empty_cache(index: int) -> bool:
    """Release the device buffers ttnn's program cache holds (every cached program: its kernel binaries and
    its sliding-window configurations) and the backend's caches of device tensors (on_empty_cache); the next
    call of each op builds its program (and table) again. False when there was nothing to release, or while
    a captured ttnn trace is alive (it replays cached programs on the tensors it captured)."""
    dev = _devices.get(index)
    if dev is None or _live_traces.get(index):
        return False
    ttnn.synchronize_device(dev)  # (a card: no program still running uses what is freed)
    released = [release(index) for release in _releasers]  # (every one runs)
    if dev.num_program_cache_entries():
        dev.clear_program_cache()
        released.append(True)
    return any(released)


class _OutOfMemoryGuard:
    """`with _OutOfMemoryGuard(index, what):` turns ttnn's allocator failure into _out_of_memory's error."""

    def __init__(self, index: int, what: str):
        self.index, self.what = index, what

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        oom = None if err is None else _out_of_memory(err, self.index, self.what)
        if oom is not None:
            raise oom from err
        return False


# ----------------------------------------------------------------------------------------------- the verbs
def _count(op: str) -> None:
    counters.ttnn_by_op[op] += 1
    if counters.profile is not None:
        counters.profile.on_ttnn(op)



def upload(value: torch.Tensor, tt_dtype, layout, index: int, dtype: torch.dtype | None = None,
           bounds=None, via=None) -> Handle:
    """Host -> device. `value` is converted to `tt_dtype` by ttnn on the host, then moved. `via`: the layout
    it crosses PCIe in when that is not `layout` (layout.transfer_layout: ROW_MAJOR for a tensor whose tile
    padding would multiply the bytes moved, such as a 1-D one), converted to `layout` on the device."""
    dev = device(index)
    src = value.detach()
    if src.dtype == torch.bool:
        src = src.to(torch.bfloat16)
    elif src.dtype == torch.int64:
        src = src.to(torch.int32)
    with _OutOfMemoryGuard(index, f"a {tuple(value.shape)} tensor from the host"):
        if via is not None and via != layout and recording is None:
            moved = ttnn.from_torch(src.contiguous(), dtype=tt_dtype, layout=via, device=dev)
            tt = ttnn.to_layout(moved, layout)
            _count("to_layout")
            ttnn.deallocate(moved)
        else:
            tt = ttnn.from_torch(src.contiguous(), dtype=tt_dtype, layout=layout, device=dev)
    counters.counts["host_to_device"] += 1
    _grew(index, src.numel())
    h = Handle(tt, BACKEND.stored(src, tt_dtype), dtype or value.dtype, value.shape, index, bounds)
    if recording is not None:
        recording.on_upload(h)
    return h


def stage(value: torch.Tensor, tt_dtype, layout, index: int, dtype: torch.dtype | None = None,
          bounds=None) -> Handle:
    """A Handle for `value` kept on the host, rounded to `tt_dtype` as an upload would, with no device buffer:
    for a parameter whose device form is a prepared one (a conv kernel: ttnn.prepare_conv_weights reads a host
    tensor, and its stored form -- ROW_MAJOR [out, in, kh, kw], one 32-byte-aligned DRAM page per kernel row --
    would take 5x (3x3) to 16x (1x1) its bfloat16 size), or a 0-d integer whose value is known (bounds), such
    as BatchNorm's num_batches_tracked, which would take a tile in each of the 12 DRAM banks (48 KiB). The
    first use that needs a device tensor uploads it (upload_staged, counted then)."""
    src = value.detach()
    if src.dtype == torch.bool:
        src = src.to(torch.bfloat16)
    elif src.dtype == torch.int64:
        src = src.to(torch.int32)
    held = BACKEND.rounded(src.contiguous(), tt_dtype, layout)
    h = Handle(None, BACKEND.stored(held, tt_dtype), dtype or value.dtype, value.shape, index, bounds)
    h.host = (held, tt_dtype, layout)
    return h


def keep_on_host(value: torch.Tensor, index: int, bounds) -> Handle:
    """A Handle for an int64 tensor whose values do not fit the device's int32 integers (a rolling hash's
    powers of a large prime): its exact value is kept on the host with no device dtype (host = (value, None,
    None)) and it never gets a device tensor -- every op on it runs on the CPU fallback (core/dispatch.py),
    which reads this value as it is. `is_host_only` tells such a handle."""
    h = Handle(None, None, value.dtype, value.shape, index, bounds)
    h.host = (value.detach().clone(), None, None)
    return h


def is_host_only(h: Handle) -> bool:
    return h.tt is None and h.host is not None and h.host[1] is None


def host_value(h: Handle) -> torch.Tensor:
    """h's value on the host for making a prepared form: a staged handle's host value as it is held (no
    transfer), else read from the device (download, counted)."""
    return h.host[0].reshape(h.shape) if h.host is not None else download(h)


def release(h: Handle) -> bool:
    """Stage h back on the host: its value is kept there (read from the device when the host does not know
    it, counted in device_to_host) and its device buffer freed -- for a tensor whose only consumer now reads
    a prepared form of it (layout.prepared), so that the prepared form replaces it on the device instead of
    doubling it. Done only when h alone holds its buffer (sole_owner: no view, clone or graph shares it);
    returns whether it was."""
    if not sole_owner(h) or h.index in _meshes:  # (a mesh tensor's chips may hold different values)
        return False
    value = h.shadow
    if value is None:
        counters.counts["device_to_host"] += 1
        value = BACKEND.read(h)
    h.host = (value, h.tt.dtype, h.tt.layout)
    h.tt = None
    return True


def upload_staged(h: Handle) -> Handle:
    """A staged handle's value moved to the device (in place: h now holds a device tensor), counted in
    host_to_device."""
    value, tt_dtype, layout = h.host
    src = value.to(torch.int32) if value.dtype == torch.int64 else value  # (a uint32 shadow is int64)
    with _OutOfMemoryGuard(h.index, f"a {tuple(h.shape)} tensor from the host"):
        tt = ttnn.from_torch(src, dtype=tt_dtype, layout=layout, device=device(h.index))
    counters.counts["host_to_device"] += 1
    _grew(h.index, value.numel())
    h.tt, h.host = tt, None
    if h.shadow is None:
        h.shadow = BACKEND.stored(value, tt_dtype)
    if recording is not None:
        recording.on_upload(h)
    return h


def download(h: Handle, via=None) -> torch.Tensor:
    """Device -> host: the value as a CPU tensor of the torch dtype PyTorch sees. `via`: the layout it crosses
    PCIe in when that is not its own (layout.transfer_layout), converted on the device first."""
    if recording is not None:
        recording.refuse("a device-to-host read (.cpu(), .item(), printing a tensor, a data-dependent branch)")
    counters.counts["device_to_host"] += 1
    if h.tt is None:
        if h.host is not None:  # staged: the value is on the host
            return _own(h.host[0].reshape(h.shape).to(h.dtype), h.host[0])
        return torch.zeros(h.shape, dtype=h.dtype)
    if not h.shape.numel():  # nothing to read
        return torch.empty(h.shape, dtype=h.dtype)
    if via is not None and via != h.tt.layout:
        with _OutOfMemoryGuard(h.index, f"a {tuple(h.shape)} tensor for the host"):
            moved = ttnn.to_layout(h.tt, via)
        _count("to_layout")
        kept = BACKEND.read(Handle(moved, h.shadow, h.dtype, h.shape, h.index))
        ttnn.deallocate(moved)
    else:
        kept = BACKEND.read(h)
    if h.dtype is torch.complex64:  # stored as its real pair [*shape, 2] (core/layout.py)
        return torch.view_as_complex(kept.reshape(*h.shape, 2).to(torch.float32).contiguous()).clone()
    if len(h.shape) == 4 and kept.dim() == 4 and kept.shape != h.shape and kept.shape[:2] == (1, 1) \
            and kept.shape[3] == h.shape[1]:  # a channels-last image (core/layout.py): NCHW on the host
        n, c, height, width = h.shape
        return kept.reshape(n, height, width, c).permute(0, 3, 1, 2).to(h.dtype).contiguous()
    return _own(kept.reshape(h.shape).to(h.dtype), kept)


def download_chips(h: Handle) -> torch.Tensor:
    """Every chip's value of a mesh tensor, stacked: [chips, *shape] (device -> host, each chip counted): what
    the host path of a collective between processes moves for a tensor whose chips hold different values."""
    if recording is not None:
        recording.refuse("a device-to-host read (a collective through the host)")
    chips = math.prod(_meshes[h.index])
    counters.counts["device_to_host"] += chips
    values = BACKEND.read_chips(h, chips)
    return torch.stack([v.reshape(h.shape).to(h.dtype) for v in values])


def upload_chips(values: torch.Tensor, like: Handle) -> Handle:
    """values [chips, *shape] onto the mesh, chip k holding values[k], in `like`'s device dtype and layout
    (host -> device, each chip counted); the inverse of download_chips."""
    dev, chips = device(like.index), values.shape[0]
    src = values.detach().contiguous()
    src = src.to(torch.bfloat16) if src.dtype == torch.bool else src.to(torch.int32) if src.dtype == torch.int64 \
        else src
    with _OutOfMemoryGuard(like.index, f"a {tuple(values.shape[1:])} tensor from the host, per chip"):
        tt = ttnn.from_torch(src, dtype=like.tt_dtype, layout=like.layout, device=dev,
                             mesh_mapper=ttnn.ShardTensorToMesh(dev, dim=0))
    counters.counts["host_to_device"] += chips
    h = Handle(tt, BACKEND.stored_chips(src, like.tt_dtype), like.dtype, shape_of(tt), like.index)
    return run("reshape", h, list(values.shape[1:]))


def _own(value: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """value, or a copy of it if it shares memory with `kept` (the mock's shadow, a staged host value): the
    caller owns what download returns (a host write into `x.cpu()` must not change x, as on a card, where
    the read is a fresh buffer; gloo reduces into the staged host copies in place)."""
    if value.untyped_storage().data_ptr() == kept.untyped_storage().data_ptr():
        return value.clone()
    return value


_ONE = torch.Size([1])


def run(op: str, *args, out_dtype: torch.dtype | None = None, **kwargs):
    """Call `ttnn.<op>(*args, **kwargs)` with Handles in place of ttnn tensors; returns Handle(s).

    The results' torch dtype is `out_dtype`, else that of the first Handle argument. This is the hot path
    of every op: no context managers or generic tree walks (Handles are top-level or in a list).
    """
    first = args[0] if args and type(args[0]) is Handle else _first_handle(args) or _first_handle(kwargs.values())
    targs = [a.tt if type(a) is Handle else _unwrap(a) for a in args]
    tkwargs = {k: v.tt if type(v) is Handle else v for k, v in kwargs.items()} if kwargs else kwargs
    try:
        out = _resolve(op)(*targs, **tkwargs)
    except RuntimeError as err:
        if _memory_kind(err) is None:
            raise
        out = _retry_after_eviction(first.index, f"ttnn.{op}", err, lambda: _resolve(op)(*targs, **tkwargs))
    _count(op)
    dtype = out_dtype or first.dtype
    if not isinstance(out, (list, tuple)):
        value = BACKEND.value(op, args, kwargs, out)
        shape = shape_of(out)
        if not first.shape and shape == _ONE and not any(type(a) is Handle and a.shape for a in args):
            shape = first.shape  # a 0-d tensor is [1] to some ttnn ops: its result stays 0-d (unless a
            # 1-element operand of rank 1 broadcasts it: 0-d * [1] is [1], as PyTorch)
        result = Handle(out, value, dtype, shape, first.index)
        root = result.root = _shared_buffer(out, args)
        if root is None:  # (a result on its input's buffer allocated nothing)
            _grew(first.index, shape.numel())
    else:
        values = BACKEND.values(op, args, kwargs, out)
        result = [Handle(o, v, dtype, shape_of(o), first.index) for o, v in zip(out, values)]
        for r in result:
            r.root = _shared_buffer(r.tt, args)
    if recording is not None:
        recording.on_run(op, args, kwargs, result)
    return result


def _shared_buffer(out, args):
    """The tensor object whose device buffer `out` (a result of a ttnn op on `args`) shares, or None when out
    has a buffer of its own. ttnn hands back its input's buffer when there is nothing to move (measured in
    0.81.1: reshape keeping the tiles, unsqueeze/squeeze, full-range slice, identity permute/transpose,
    same-layout to_layout, single-tensor concat, repeat by ones, pad by zeros)."""
    address = out.buffer_address()
    for a in args:
        if type(a) is list and a and type(a[0]) is Handle:
            a = a[0]
        if type(a) is Handle and a.tt is not None and a.tt.buffer_address() == address:
            return a.root if a.root is not None else a.tt
    return None


def device_bytes(h: Handle) -> int:
    """Bytes of h's device buffer (its padded shape in its device dtype); 0 for a Handle not yet written."""
    if h.tt is None:
        return 0
    return int(math.prod(h.padded_shape) * _ELEMENT_BYTES.get(h.tt.dtype, 4))


def buffer_bytes(shape, tt_dtype, layout) -> int:
    """Bytes of a device buffer of logical `shape` in `tt_dtype` and `layout`: TILE pads the last two
    dimensions to multiples of 32 (a 1-D tensor is one row, padded to 32), ROW_MAJOR holds the elements."""
    dims = [int(d) for d in shape]
    if layout == TILE:
        dims = ([1] * (2 - len(dims)) + dims) if len(dims) < 2 else dims
        dims[-2:] = [-(-d // TILE_SIZE) * TILE_SIZE for d in dims[-2:]]
    return int(math.prod(dims) * _ELEMENT_BYTES.get(tt_dtype, 4))


def buffer_address(h: Handle) -> int | None:
    """The device address of h's buffer (None while unwritten): what stays the same across in-place writes."""
    return None if h.tt is None else h.tt.buffer_address()


def sole_owner(h: Handle, recorded: bool = False) -> bool:
    """h's device buffer can be written in place without any other tensor seeing it: h's tensor object is
    referenced by h alone (no clone, graph or cached form shares it, and no tensor aliases its buffer: those
    hold it as their `root`), h does not itself alias another buffer, and it has elements. During graph capture,
    whose recording names values by tensor object, only for a write recorded as one (`recorded`:
    update_in_place, which a replay repeats into the same tensor -- for it, a graph that holds the tensor only to
    recognise it, identity_refs, is no owner). Any other write keeps a tensor a graph read to a new device tensor,
    which the graph sees has changed (its static inputs' host-known values checked again)."""
    d = h.tt
    return ((recording is None or recorded) and d is not None and h.root is None and h.shape.numel() > 0
            and sys.getrefcount(d) <= 3 + (identity_refs.get(id(d), 0) if recorded else 0))  # d, h.tt, the argument


def own_buffer(h: Handle) -> Handle:
    """h, holding its value in a device buffer no other tensor shares (sole_owner), before a write into it
    that only h may see: a copy made where it does not yet (outside any graph capture -- the value does not
    change, so a replay need not repeat it)."""
    global recording
    if not sole_owner(h, recorded=True):
        rec, recording = recording, None
        try:
            h.assign(run("clone", h))
        finally:
            recording = rec
        if rec is not None:
            rec.forget(h)  # (a new device tensor to the capture, whatever object had its id before)
    return h


def overwrite(dst: Handle, src: Handle) -> bool:
    """An in-place write that keeps dst's device buffer (as a CUDA tensor keeps its storage): src's value is
    copied into it (ttnn.copy), and dst takes src's shadow and bounds. Done only when dst is the sole owner
    of its buffer and src has the same shape, padding, device dtype, layout and memory; returns False
    otherwise (the caller then gives dst src's tensor: Handle.assign)."""
    if not sole_owner(dst):  # (first: a local reference to dst.tt would count against it)
        return False
    d, s = dst.tt, src.tt
    if s is None or d is s or src.root is d:
        return False
    if (d.dtype != s.dtype or d.layout != s.layout or d.shape != s.shape or d.padded_shape != s.padded_shape
            or d.memory_config() != s.memory_config()):
        return False
    copy_into(s, d)
    dst.shadow, dst.bounds = src.shadow, src.bounds
    return True


def update_in_place(op: str, dst: Handle, *args, **kwargs) -> Handle:
    """`ttnn.<op>(dst, *args, **kwargs)` for an op that writes into dst's buffer (update_cache): dst keeps its
    device tensor and takes the new value. The caller has checked sole_owner(dst) -- or, for an op with no
    functional form (TT-NN's paged cache update), made dst a clone. Inside a graph capture the write is recorded
    as one (features/graphs.py): a replay re-issues it into the same tensor."""
    targs = [a.tt if type(a) is Handle else a for a in args]
    tkwargs = {k: v.tt if type(v) is Handle else v for k, v in kwargs.items()}
    _resolve(op)(dst.tt, *targs, **tkwargs)
    _count(op)
    dst.shadow = BACKEND.value(op, (dst, *args), kwargs, dst.tt)
    dst.bounds = None
    if recording is not None:
        recording.on_update(op, dst, args, kwargs)
    return dst


def prepare(op: str, arg: str, source: Handle, shape=None, transform=None, **kwargs) -> Handle:
    """`ttnn.<op>(<arg>=source, **kwargs)` for an op that re-lays out a parameter into the private form a
    later op consumes (prepare_conv_weights, prepare_conv_bias), returning it on the device. These ops read
    the parameter from a host tensor, so its value is read from the device first (once per prepared form,
    counted in device_to_host), reshaped to `shape` if given. The result holds that value (its shadow, torch
    dtype and shape); its device tensor is in the op's private form. A staged source (see stage) is read
    from the host, with no device read. `transform`: an exact rearrangement of the value (of its shape;
    e.g. a transposed convolution's kernel as a convolution's) applied to it and its shadow before `shape`."""
    value = host_value(source)
    if transform is not None:
        value = transform(value)
    tt_dtype = FLOAT32 if source.tt_dtype == FLOAT32 else BFLOAT16
    host = ttnn.from_torch(value.float().reshape(shape or value.shape), dtype=tt_dtype)
    try:
        out = _resolve(op)(**{arg: host}, **kwargs)
    except RuntimeError as err:
        if _memory_kind(err) is None:
            raise
        out = _retry_after_eviction(source.index, f"ttnn.{op} of a {tuple(source.shape)} parameter", err,
                                    lambda: _resolve(op)(**{arg: host}, **kwargs))
    _count(op)
    held = source.shadow
    if held is not None and transform is not None:
        held = transform(held.reshape(source.shape))
    held = held if held is None or shape is None else held.reshape(shape)
    return Handle(out, held, source.dtype, shape or (value.shape if transform else source.shape), source.index)



def create(op: str, args: tuple, tt_dtype, layout, index: int, dtype: torch.dtype, **kwargs) -> Handle:
    """A factory op on the device (`full`, `zeros`, `arange`, ...): `ttnn.<op>(*args, dtype, layout, device,
    **kwargs)`, no transfer."""
    what = f"ttnn.{op} of shape {args[0] if args else ()}"
    if op in ("full", "zeros", "ones") and args:
        # ttnn builds a constant tensor on the host before moving it: refuse a large one that cannot fit up
        # front (reading the allocator costs ~100 us, so small ones are left to the allocator's own error)
        nbytes = math.prod(args[0]) * _ELEMENT_BYTES.get(tt_dtype, 4)
        if nbytes >= _PRECHECK_BYTES and nbytes > memory_capacity(index) - memory_allocated(index):
            with _OutOfMemoryGuard(index, what):
                raise RuntimeError(f"Out of Memory: cannot allocate {nbytes} B")
    with _OutOfMemoryGuard(index, what):
        out = _resolve(op)(*args, dtype=tt_dtype, layout=layout, device=device(index), **kwargs)
    _count(op)
    h = Handle(out, BACKEND.created(op, args, tt_dtype, kwargs, out), dtype, shape_of(out), index)
    _grew(index, h.shape.numel())
    if recording is not None:
        recording.on_create(op, args, tt_dtype, layout, kwargs, h)
    return h


@functools.lru_cache(maxsize=None)
def enum(name: str):
    """A ttnn enum, constant or config class by dotted name (e.g. "GeluVariant.Tanh", "DRAM_MEMORY_CONFIG",
    "Conv2dConfig"), for lowerings that pass one (not an op: resolved apart from `_resolve`)."""
    value = ttnn
    for part in name.split("."):
        value = getattr(value, part)
    return value


def core_count(index: int) -> int:
    """The compute cores of device `index` (its compute-with-storage grid: 8 x 8 on a Wormhole n150)."""
    grid = device(index).compute_with_storage_grid_size()
    return grid.x * grid.y


@functools.lru_cache(maxsize=None)
def height_sharded(index: int, shards: int, rows: int, width: int):
    """An L1 memory config that height-shards a tensor over `shards` cores of device `index`, one shard of
    [rows, width] each, row-major over the grid (how ttnn.experimental.paged_update_cache reads its input:
    one user per core)."""
    cores = ttnn.num_cores_to_corerangeset(shards, device(index).compute_with_storage_grid_size(), row_wise=True)
    return ttnn.create_sharded_memory_config(shape=(rows, width), core_grid=cores, strategy=ttnn.ShardStrategy.HEIGHT,
                                             orientation=ttnn.ShardOrientation.ROW_MAJOR,
                                             use_height_and_width_as_shard_shape=True)


def arch(index: int) -> str:
    """The architecture of device `index` as ttnn names it (e.g. "WORMHOLE_B0", "BLACKHOLE")."""
    return device(index).arch().name


@functools.lru_cache(maxsize=None)
def compute_kernel_config(index: int, math_fidelity: str, fp32_dest_acc: bool, math_approx: bool):
    """ttnn's compute-kernel config for device `index`'s architecture (ttnn.init_device_compute_kernel_config;
    in ttnn 0.81.1 it returns a WormholeComputeKernelConfig for Wormhole and Blackhole alike)."""
    return ttnn.init_device_compute_kernel_config(
        device(index).arch(), math_fidelity=getattr(ttnn.MathFidelity, math_fidelity),
        math_approx_mode=math_approx, fp32_dest_acc_en=fp32_dest_acc, packer_l1_acc=False)


def shadows_off():
    """Benchmarks only: a block run as hardware runs, with no shadow execution on a mock device (mock.py);
    nothing changes on a card."""
    return BACKEND.shadows_off()


# ----------------------------------------------------------------------------------------------- traces
# The hardware replay path of features/graphs.py (a card only, BACKEND.traces: on a mock device
# end_trace_capture crashes inside tt-metal, so graphs never calls these there).
def begin_trace(index: int):
    trace_id = ttnn.begin_trace_capture(device(index), cq_id=0)
    _live_traces[index] = _live_traces.get(index, 0) + 1  # (empty_cache leaves the program cache alone)
    return trace_id


def end_trace(index: int, trace_id) -> None:
    ttnn.end_trace_capture(device(index), trace_id, cq_id=0)


def execute_trace(index: int, trace_id) -> None:
    ttnn.execute_trace(device(index), trace_id, cq_id=0, blocking=False)


def release_trace(index: int, trace_id) -> None:
    if index in _devices:
        ttnn.release_trace(_devices[index], trace_id)
        _live_traces[index] = max(_live_traces.get(index, 0) - 1, 0)


def copy_into(src_tt, dst_tt) -> None:
    """Device-to-device copy of src_tt's values into the existing buffer of dst_tt (a trace's input)."""
    ttnn.copy(src_tt, dst_tt)
    _count("copy")


# ----------------------------------------------------------------------------------------------- the backend
# Chosen once, here: the card, or the mock device with shadow execution. Everything above calls it through
# the same interface (card.py, mock.py), so no verb asks which one it is.
from . import card, mock  # noqa: E402  (after the verbs: nothing above needs them at import)

BACKEND = (mock.Mock if RUNTIME.mock else card.Card)(RUNTIME)
