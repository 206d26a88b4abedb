"""`torch.ttnn.Stream`, `Event`, `current_stream`, `default_stream`, `set_stream`, `stream(...)`: torch.cuda's
stream API for the ttnn device (docs/distributed.md, "Streams and events").

Mapping: the backend opens each device with one TT-NN command queue (CQ0), in order, so every stream is CQ0
(`stream_id` 0): `Stream()` equals `default_stream()`, and `wait_stream` / `wait_event` are satisfied by the
queue's order. The current-stream stack is kept here, per device (PyTorch 2.14's Python device guard keeps no
streams: `torch.accelerator.current_stream()` is always stream 0, which is the same queue).

Events: TT-NN events carry no timestamp, so `Event.record()` waits until the work queued before it has
finished (torch.ttnn.synchronize) and takes the host time then: `elapsed_time` is host-observed completion
time between two records, in milliseconds. `query()` is True once recorded (the record waited).

Stream and Event subclass torch.Stream and torch.Event, so C++-typed callers (FSDP2's
`torch.accelerator.current_stream().wait_event(ev)`, DDP's `torch.Stream`) accept them.
"""
from __future__ import annotations

import time

import torch

from ..device import runtime

_stacks: dict = {}  # device index -> [Stream, ...]: the streams entered (`with s:` / set_stream), innermost last


_device_index = runtime.index_of  # a `device` argument's index (None: the current device)


def _synchronize(index: int) -> None:
    from ..device import api
    api.synchronize(index)


class Stream(torch.Stream):
    """A ttnn stream: TT-NN's command queue 0 of the device (see the module docstring)."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        index = _device_index(device)
        return super().__new__(cls, stream_id=0, device_index=index, device_type=_ttnn_type())

    def __init__(self, device=None, priority: int = 0, **kwargs):
        self.priority = priority

    def wait_event(self, event) -> None:
        """Later work on this stream waits for `event` (the in-order queue already does)."""

    def wait_stream(self, stream) -> None:
        """Later work on this stream waits for the work queued on `stream` so far (same queue: done)."""

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def query(self) -> bool:
        """True when the work queued on the stream has finished (TT-NN has no non-blocking query: it waits)."""
        self.synchronize()
        return True

    def synchronize(self) -> None:
        _synchronize(self.device_index)

    def __enter__(self):
        _stacks.setdefault(self.device_index, []).append(self)
        return self

    def __exit__(self, *exc):
        _stacks[self.device_index].pop()

    def __repr__(self) -> str:
        return f"torch.ttnn.Stream(device=ttnn:{self.device_index}, cq=0)"


def _ttnn_type() -> int:
    return 20  # c10::DeviceType::PrivateUse1 (the ttnn device)


class Event(torch.Event):
    """A ttnn event (see the module docstring: record waits, timing is host-observed)."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, **kwargs):
        if interprocess:
            raise NotImplementedError("torch.ttnn.Event(interprocess=True): ttnn events cannot be shared "
                                      "between processes")
        return super().__new__(cls, device="ttnn", enable_timing=enable_timing, blocking=blocking)

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, **kwargs):
        self.enable_timing = enable_timing
        self.recorded_on = None
        self._time = None

    def record(self, stream=None) -> None:
        stream = current_stream() if stream is None else stream
        _synchronize(stream.device_index)
        self._time = time.perf_counter()
        self.recorded_on = stream

    def wait(self, stream=None) -> None:
        """Later work on `stream` waits for this event (the in-order queue already does)."""

    def query(self) -> bool:
        return self.recorded_on is not None

    def synchronize(self) -> None:
        """Wait until the work before the record has finished (record already waited)."""

    def elapsed_time(self, end_event) -> float:
        """Milliseconds between this event's record and `end_event`'s (host-observed)."""
        if not (self.enable_timing and getattr(end_event, "enable_timing", False)):
            raise RuntimeError("Both events must be created with enable_timing=True to measure elapsed time")
        if self._time is None or getattr(end_event, "_time", None) is None:
            raise RuntimeError("Both events must be recorded before calling elapsed_time()")
        return (end_event._time - self._time) * 1000.0

    def __repr__(self) -> str:
        return f"torch.ttnn.Event(recorded={self.recorded_on is not None}, enable_timing={self.enable_timing})"


def default_stream(device=None) -> Stream:
    return Stream(device)


def current_stream(device=None) -> Stream:
    stack = _stacks.get(_device_index(device))
    return stack[-1] if stack else default_stream(device)


def set_stream(stream) -> None:
    """Make `stream` the current stream of its device (until a `with` block restores another)."""
    stack = _stacks.setdefault(stream.device_index, [])
    if stack:
        stack[-1] = stream
    else:
        stack.append(stream)


class StreamContext:
    """`with torch.ttnn.stream(s):` makes s current in the block; `stream(None)` changes nothing (FSDP2 passes
    None)."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        if self.stream is not None:
            self.stream.__enter__()
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            self.stream.__exit__(*exc)


def stream(stream) -> StreamContext:
    return StreamContext(stream)
