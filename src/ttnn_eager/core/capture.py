"""What the core and the lowerings tell a graph capture: the small interface features/graphs.py implements.

A capture under way is `device.api.recording` (graphs' recorder): the device API reports every ttnn call to
it and refuses host syncs. What only the layers above the device know is reported through these functions,
which do nothing when no capture is under way:

    refuse(what)                   something that would make a replay differ from the region (a CPU fallback,
                                   a copy of a CPU tensor, a random factory drawn on the host): an error now
    host_decision(h, kind, what)   a lowering answered `what` from h's value bounds known on the host (kind
                                   "all_any", "item" or ("index", rows)): a guard each replay checks
"""
from __future__ import annotations

from ..device import api


def active() -> bool:
    return api.recording is not None


def refuse(what: str) -> None:
    if api.recording is not None:
        api.recording.refuse(what)


def host_decision(h: api.Handle, kind, what: str) -> None:
    if api.recording is not None:
        api.recording.decision(h, kind, what)
