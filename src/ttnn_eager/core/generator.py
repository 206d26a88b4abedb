"""The device-side random generator: a seed and a counter of draws, like CUDA's Philox seed and offset.

torch.manual_seed() calls torch.<backend>.manual_seed_all() (features/device_module.py re-exports these as
`torch.ttnn.*`). Random factories for a ttnn device (torch.rand(..., device="ttnn")) are drawn from the CPU
generator, so they equal the CPU's under the same seed. Dropout draws its masks on the device (ttnn.rand)
with the seeds `next_seed` gives: the same torch.manual_seed gives the same masks.
"""
from __future__ import annotations

import torch

_generator = {"seed": None, "offset": 0}


def manual_seed(seed) -> None:
    _generator["seed"], _generator["offset"] = int(seed) & 0xFFFF_FFFF_FFFF_FFFF, 0


def manual_seed_all(seed) -> None:
    manual_seed(seed)


def initial_seed() -> int:
    if _generator["seed"] is None:
        manual_seed(torch.initial_seed())
    return _generator["seed"]


def get_state() -> torch.Tensor:
    """The generator's state (seed and draw counter) as a uint8 CPU tensor of 16 bytes, as
    torch.cuda.get_rng_state gives (torch.random.fork_rng and torch.testing save and restore it)."""
    return torch.tensor([initial_seed(), _generator["offset"]], dtype=torch.int64).view(torch.uint8)


def set_state(new_state: torch.Tensor) -> None:
    if not isinstance(new_state, torch.Tensor) or new_state.dtype != torch.uint8 or new_state.numel() != 16:
        raise RuntimeError("torch.ttnn.set_rng_state: expected the uint8 tensor of 16 bytes that "
                           "torch.ttnn.get_rng_state returns")
    seed, offset = new_state.contiguous().view(torch.int64).tolist()
    _generator["seed"], _generator["offset"] = seed & 0xFFFF_FFFF_FFFF_FFFF, offset


def next_seed() -> int:
    """The seed of the next device-side random draw (ttnn.rand's uint32 seed; never 0)."""
    seed = initial_seed()
    _generator["offset"] += 1
    mixed = (seed * 0x9E3779B97F4A7C15 + _generator["offset"] * 0xBF58476D1CE4E5B9) % (2**32 - 1)
    return mixed + 1
