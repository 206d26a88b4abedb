"""`torch.ttnn`: the device module, what `torch.cuda` is for CUDA.

Cheap to import: ttnn itself is imported (and devices opened) at the first call that needs a device.
Graphs (`TTNNGraph`, `graph`, `make_graphed_callables`: torch.cuda's graph API) are in graphs.py.
"""
from __future__ import annotations

import torch

from ..core import generator as _generator
from ..core.generator import initial_seed, manual_seed, manual_seed_all  # noqa: F401  (torch.ttnn.*)
from ..device import runtime
from .streams import Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream  # noqa: F401


def _api():
    from ..device import api as device_api
    return device_api


_index = runtime.index_of  # a `device` argument's index (None: the current device)


def is_available() -> bool:
    """True when a ttnn device can be used: a Tenstorrent card, or the mock device (see TTNN_EAGER_DEVICE)."""
    try:
        return device_count() > 0
    except Exception:
        return False


def is_initialized() -> bool:
    import sys
    return "ttnn_eager.device.api" in sys.modules


def _lazy_init() -> None:
    _api()


def device_count() -> int:
    return _api().device_count()


def current_device() -> int:
    return runtime.current_device()


def set_device(device) -> None:
    """Make `device` (an index, "ttnn:N" or torch.device) the default for `ttnn` without an index.

    Per thread, as torch.cuda.set_device (the C++ device guard's current device). A process that sees only
    some chips (TTNN_EAGER_VISIBLE_DEVICES: device/runtime.py's visible_devices) may also name one by its
    physical index when that is no logical one."""
    index = _index(device)
    visible = runtime.visible_devices()
    if visible is not None and index >= len(visible) and index in visible:
        index = visible.index(index)
    _api().check_index(index)
    runtime.set_current_device(index)


class device:
    """Context manager: `with torch.ttnn.device(1): ...` makes ttnn:1 the current device."""

    def __init__(self, device):
        self.index = _index(device)

    def __enter__(self):
        self.prev = runtime.current_device()
        set_device(self.index)

    def __exit__(self, *exc):
        set_device(self.prev)


def synchronize(device=None) -> None:
    """Wait until every op queued on the device has finished."""
    _api().synchronize(_index(device))


def get_device_name(device=None) -> str:
    """e.g. "Wormhole n150 (mock)"."""
    api = _api()
    index = _index(device)
    api.check_index(index)
    return api.device_name(index)


def memory_allocated(device=None) -> int:
    """Bytes of device memory (DRAM and L1) allocated, from ttnn's own allocator: tensors, and the programs
    ttnn's program cache keeps (empty_cache releases those)."""
    return _api().sample_peak(_index(device))


def max_memory_allocated(device=None) -> int:
    """The peak of memory_allocated since the device opened or reset_peak_memory_stats. ttnn's allocator is
    read whenever 8M elements of results have been allocated since the last reading, at most ~2% of host
    time (reading it on every op would cost milliseconds: device/api.py), and at every memory query; a
    peak between two readings is missed by at most what was allocated between them."""
    return _api().peak_allocated(_index(device))


def reset_peak_memory_stats(device=None) -> None:
    """Restart max_memory_allocated (and max_memory_reserved) from what is allocated now."""
    _api().reset_peak(_index(device))


def reset_max_memory_allocated(device=None) -> None:
    reset_peak_memory_stats(device)


def memory_reserved(device=None) -> int:
    """Bytes held on the device. ttnn's allocator returns a buffer to the device when its tensor dies (there
    is no caching allocator, unlike CUDA's), so this equals memory_allocated."""
    return memory_allocated(device)


def max_memory_reserved(device=None) -> int:
    return max_memory_allocated(device)


def empty_cache() -> None:
    """Release the device memory ttnn's program cache holds on every open device (torch.cuda.empty_cache's
    counterpart): each cached program owns its kernel binaries (DRAM) and, for conv2d and the pools, its
    sliding-window configurations in L1_SMALL, past the model that built it -- and the device tensors the
    backend caches across calls (the FFT's DFT tables). The next call of each op builds its program (and
    table) again. (An op that runs out of DRAM or L1_SMALL does this itself once before raising.)
    Tensors are not affected: ttnn frees a tensor's buffer when the tensor dies."""
    api = _api()
    for index in range(api.device_count()):
        if api.is_open(index):
            api.empty_cache(index)


def memory_stats(device=None) -> dict:
    """torch.cuda.memory_stats' keys that apply ("allocated_bytes.all.current"/".peak", "reserved_bytes.*",
    "active_bytes.*", "num_alloc_retries", "num_ooms") from ttnn's allocator, plus its own view per memory
    ("dram.allocated_bytes", "l1.free_bytes", "dram.largest_free_block", ...)."""
    api = _api()
    index = _index(device)
    views = api.memory_views(index)
    current = api.sample_peak(index)
    peak = api.peak_allocated(index)
    stats = {}
    for kind in ("allocated_bytes", "reserved_bytes", "active_bytes"):
        stats[f"{kind}.all.current"] = current
        stats[f"{kind}.all.peak"] = peak
    stats["allocation.all.current"] = sum(v["blocks"] for v in views.values())
    stats["num_alloc_retries"] = api.retries.get(index, 0)
    stats["num_ooms"] = 0
    for name, view in views.items():
        for key, value in view.items():
            stats[f"{name}.{key}"] = value
    return dict(sorted(stats.items()))


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A printable table of memory_stats (torch.cuda.memory_summary's purpose; its own layout)."""
    index = _index(device)
    stats = memory_stats(index)
    mib = 2.0 ** 20
    lines = [f"ttnn:{index} ({get_device_name(index)}) memory summary", "",
             f"{'':<12}{'allocated':>16}{'free':>16}{'largest free':>16}{'banks':>8}"]
    for name in ("dram", "l1", "l1_small"):
        lines.append(f"{name:<12}{stats[name + '.allocated_bytes'] / mib:>12,.1f} MiB"
                     f"{stats[name + '.free_bytes'] / mib:>12,.1f} MiB"
                     f"{stats[name + '.largest_free_block'] / mib:>12,.2f} MiB{stats[name + '.banks']:>8}")
    lines += ["", f"allocated now: {stats['allocated_bytes.all.current'] / mib:,.1f} MiB, "
              f"peak: {stats['allocated_bytes.all.peak'] / mib:,.1f} MiB, "
              f"buffers: {stats['allocation.all.current']}"]
    if not abbreviated:
        lines.append("reserved == allocated: ttnn frees a buffer when its tensor dies (no caching allocator)")
    return "\n".join(lines) + "\n"


class _TtnnDeviceProperties:
    """What get_device_properties returns (torch.cuda's _CudaDeviceProperties' names where they apply)."""

    def __init__(self, p: dict):
        self.name = p["name"]
        self.architecture = p["arch"]                     # e.g. "WORMHOLE_B0", "BLACKHOLE"
        self.major, self.minor = _CAPABILITY.get(p["arch"], (0, 0))
        self.core_grid = p["core_grid"]                   # (x, y) compute cores
        self.multi_processor_count = p["core_grid"][0] * p["core_grid"][1]
        self.total_memory = p["dram_bytes"]               # DRAM, bytes
        self.dram_banks = p["dram_banks"]
        self.l1_size_per_core = p["l1_bytes_per_bank"]    # L1 SRAM banks: one per core
        self.l1_size = p["l1_bytes_per_bank"] * p["l1_banks"]
        self.l1_small_size_per_core = p["l1_small_bytes_per_bank"]
        self.is_integrated = False

    def __repr__(self):
        return (f"_TtnnDeviceProperties(name={self.name!r}, architecture={self.architecture!r}, "
                f"major={self.major}, minor={self.minor}, total_memory={self.total_memory // 2**20}MB, "
                f"core_grid={self.core_grid[0]}x{self.core_grid[1]}, "
                f"l1_size_per_core={self.l1_size_per_core // 1024}KB)")


# get_device_capability: (architecture generation, revision); a stand-in (Tenstorrent has no compute
# capability numbers): Grayskull 1, Wormhole B0 2, Blackhole 3, each revision 0.
_CAPABILITY = {"GRAYSKULL": (1, 0), "WORMHOLE_B0": (2, 0), "BLACKHOLE": (3, 0)}


def get_device_properties(device=None) -> _TtnnDeviceProperties:
    """name, architecture, major/minor, core_grid, multi_processor_count (cores), total_memory (DRAM),
    l1_size_per_core, l1_size, dram_banks: what ttnn reports of the device."""
    api = _api()
    index = _index(device)
    api.check_index(index)
    return _TtnnDeviceProperties(api.device_properties(index))


def get_device_capability(device=None) -> tuple:
    """(major, minor): (2, 0) for Wormhole B0, (3, 0) for Blackhole (a stand-in: see _CAPABILITY)."""
    p = get_device_properties(device)
    return p.major, p.minor


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bfloat16 is the device's native dtype (its matrix engine computes in it)."""
    return is_available()


def init() -> None:
    """Initialise the backend's device state (torch.cuda.init): decide the device and import ttnn. Devices
    open at their first use."""
    _lazy_init()


def mem_get_info(device=None) -> tuple:
    """(free, total) DRAM bytes of the device, like torch.cuda.mem_get_info."""
    api = _api()
    index = _index(device)
    total = api.memory_capacity(index)
    return total - api.memory_allocated(index), total


def _is_in_bad_fork() -> bool:
    return False


# The device-side generator (core/generator.py): torch.manual_seed() calls manual_seed_all.
def seed() -> None:
    """Seed the device generator with a non-deterministic random number (torch.cuda.seed)."""
    manual_seed(torch.Generator().seed())


def seed_all() -> None:
    seed()


class _DeviceGenerator:
    """torch.ttnn.default_generators[i]: the device generator of ttnn:i (core/generator.py) with
    torch.Generator's methods. A stand-in: torch.Generator(device="ttnn") needs a C++ generator hook, so
    this cannot be passed as `generator=` to torch ops (random factories for ttnn draw from the CPU
    generator; dropout draws on the device from this one). All ttnn devices share it."""

    def __init__(self, index: int):
        self.device = torch.device("ttnn", index)

    def manual_seed(self, seed):
        manual_seed(seed)
        return self

    def seed(self) -> int:
        seed()
        return initial_seed()

    def initial_seed(self) -> int:
        return initial_seed()

    def get_state(self) -> torch.Tensor:
        return _generator.get_state()

    def set_state(self, new_state: torch.Tensor):
        _generator.set_state(new_state)
        return self

    def __repr__(self):
        return f"<ttnn_eager device generator {self.device}>"


def get_rng_state(device="ttnn") -> torch.Tensor:
    """The device-side generator's state (seed and draw counter) as a uint8 CPU tensor (torch.cuda's)."""
    _index(device)
    return _generator.get_state()


def set_rng_state(new_state: torch.Tensor, device="ttnn") -> None:
    _index(device)
    _generator.set_state(new_state)


def get_rng_state_all() -> list:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def get_amp_supported_dtype():
    return [torch.bfloat16]


# Graphs (torch.cuda.graphs' API): TTNNGraph, graph, make_graphed_callables live in graphs.py, which imports
# ttnn, so they load on first use.
_GRAPH_NAMES = ("TTNNGraph", "graph", "make_graphed_callables")


def __getattr__(name):
    if name == "default_generators":  # one per device: counting devices imports ttnn, so on first use
        return tuple(_DeviceGenerator(i) for i in range(device_count()))
    if name in _GRAPH_NAMES:
        from . import graphs
        return getattr(graphs, name)
    raise AttributeError(f"module 'torch.ttnn' has no attribute {name!r}")


def is_current_stream_capturing() -> bool:
    """True while a graph capture is under way (torch.ttnn.graph)."""
    import sys
    api = sys.modules.get("ttnn_eager.device.api")
    return api is not None and api.recording is not None


def graph_pool_handle():
    """Accepted for torch.cuda compatibility (graphs share no memory pool here)."""
    return None
