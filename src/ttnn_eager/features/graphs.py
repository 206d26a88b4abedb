"""Graph capture and replay (`torch.ttnn.graph`, `TTNNGraph`, `make_graphed_callables`): CUDA graphs' contract
on a ttnn device.

Capture runs the region eagerly, as usual, while the device API (the one ttnn caller) reports every call to
a `_Recorder`: `run`/`create` give (ttnn op, arguments, result handles), `upload` a constant. While recording,
a ttnn tensor is never modified in place (an in-place op gives its handle a new tensor: Handle.assign;
device.api.overwrite, which eager mode uses to keep a tensor's buffer, is off), and the graph holds the
tensors it read, so eager writes after capture do not overwrite them either: the ttnn tensor *objects* name
values. The recording is a list of steps over numbered slots, each slot either

    produced    a result of an earlier step (or a constant uploaded inside the region, kept by the graph)
    external    a device tensor that existed before the region: a weight, a static input, a KV cache.
                Its *source* is the handle the region read it through (a handle that existed when capture
                began; found with a scan of the live handles then). A replay reads the source's *current*
                tensor: `static_input.copy_(new)` gives the handle a new tensor, a region that wrote a
                cache in place gave it the region's result -- either way the next replay reads that.

At the end of capture the live handles holding a produced slot (the outputs the user keeps, a cache written
in place, views) are noted with weak references. `replay()` re-issues the steps -- ttnn calls only: no
PyTorch dispatch, no model code, no layout or promotion decisions -- into a fresh slot table, then gives
each noted handle its slot's new tensor, so the user's output tensors are the same objects after every
replay and show the new values. Intermediates are dropped after their last use, as in eager mode, so device
memory is flat from replay to replay; the programs are those the capture built (no new program-cache
entries). On a mock device each step's value is recomputed by shadow execution (the mock backend's), so a
replay with new inputs has the right values.

Host-known decisions. What the region decided from values known on the host -- `mask.all()` answered from
an uploaded mask's bounds, `.item()` of such a tensor, the embedding's token-id range check -- is recorded
with the static inputs it depends on (through the recorded data flow) and the user's line; a replay first
checks the new inputs would decide the same (else a RuntimeError naming the op and the line, or the
embedding's own IndexError). Everything else that would make the replay differ from the region is refused
at capture: a device-to-host read (.cpu(), .item() of a computed value, print: a host sync), a CPU fallback,
a host-to-device copy of a CPU tensor, a random factory (computed on the host), a second device, a nested
capture. The one in-place ttnn write (device.api.update_in_place: TT-NN's paged cache update, which has no
functional form) is recorded as such: a step writing into its target's slot, re-issued into the same device
tensor at every replay (a paged KV cache read in place is written in place again), and kept whatever reads it
later, as any write into a static input. The shape, device dtype and layout of every static input are checked at each replay (a static
input freed or resized since capture is an error, never a silent recomputation).

Hardware. On a card, capture_end also records the steps as a ttnn trace (the device is opened with a trace
region) and replay() runs `execute_trace` after copying changed static inputs into the trace's input
buffers: no per-op host work. On a mock device tt-metal's end_trace_capture crashes, so the mock replays the
steps op by op (what the tests run); the trace path (`_Trace`) is selected by the runtime mode and is not
run here.
"""
from __future__ import annotations

import collections
import gc
import math
import os
import sys
import weakref

import torch

from .. import counters
from ..device import api, runtime

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package
_NOT_USER_CODE = (_HERE, os.path.dirname(torch.__file__))


class _External:
    """A device tensor the region read that existed before it (see the module docstring)."""

    __slots__ = ("sources", "shape", "spec", "bounds", "seen", "last", "dtype")

    def __init__(self, sources: list, h: api.Handle):
        self.sources = sources  # weak references to the handles it is read through
        self.shape, self.dtype = h.shape, h.dtype
        self.spec = _spec(h.tt)
        self.bounds = h.bounds
        self.seen = None  # the device tensor last validated against spec and the guards (see())
        self.see(h.tt)
        # with several sources (tensors sharing the value read): what each held at the last replay
        self.last = [None if r() is None else r().tt for r in sources] if len(sources) > 1 else None

    def see(self, tt) -> None:
        """tt is the device tensor last validated. Held to be recognised, never read: counted in
        device.api.identity_refs, so that it still counts as its handle's alone (sole_owner)."""
        refs = api.identity_refs
        if self.seen is not None:
            refs[id(self.seen)] -= 1
            if not refs[id(self.seen)]:
                del refs[id(self.seen)]
        self.seen = tt
        if tt is not None:
            refs[id(tt)] += 1

    def __del__(self):
        try:
            self.see(None)
        except Exception:  # (interpreter shutdown)
            pass

    def describe(self) -> str:
        return f"a {list(self.shape)} {self.dtype} tensor"


def _spec(tt) -> tuple:
    return tuple(tt.shape), tuple(tt.padded_shape), tt.dtype, tt.layout


def _user_line() -> str:
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_NOT_USER_CODE):
        f = f.f_back
    return "<unknown>" if f is None else f"{f.f_code.co_filename}:{f.f_lineno}"


def _bounds_class(b):
    """What every host decision made from bounds depends on (see lowerings reduction._known_all_any,
    factory._nonzero_bounds, views.same_values): values equal in these answer every such decision alike."""
    if b is None:
        return None
    lo, hi, exact = b
    return lo > 0, hi < 0, lo == 0, hi == 0, lo == hi, exact


class _Step:
    """One recorded ttnn call: `fn(*args, **kwargs)` with the slots `subs` (position, slot), `lsubs`
    (position, [slots]: a list of tensors) and `ksubs` (keyword, slot) filled in; results into `outs`."""

    __slots__ = ("op", "fn", "args", "subs", "lsubs", "kwargs", "ksubs", "outs", "multi", "kill", "create", "made",
                 "inplace")

    def __init__(self, op, fn, args, subs, lsubs, kwargs, ksubs, outs, multi, create=None, made=None, inplace=False):
        self.op, self.fn, self.args, self.subs, self.lsubs = op, fn, args, subs, lsubs
        self.kwargs, self.ksubs, self.outs, self.multi = kwargs, ksubs, outs, multi
        self.kill = ()        # slots whose last use this step is (dropped after it)
        self.create = create  # a factory op: (args, tt_dtype, layout, torch dtype, kwargs) of device.api.create
        self.made = made      # its results at capture, as _Constants, when they are constants (until finish)
        self.inplace = inplace  # an in-place write into args[0] (its slot, outs[0]): no result of its own


class _Constant:
    """A device tensor the graph keeps and reads at every replay (an upload inside the region, a small factory
    result): its device tensor and shadow as they were made at capture."""

    __slots__ = ("tt", "shadow")

    def __init__(self, tt, shadow):
        self.tt, self.shadow = tt, shadow


# Constant folding: a step whose inputs are all constants (uploads and factory ops inside the region -- arange,
# full: position ids, mask constants -- and steps of constants only: the reshapes, comparisons and products an
# attention mask is built with) computes at every replay what it computed at capture (a step only reads its
# inputs). Such a result with at most this many elements, that the region does not give out, is kept from the
# capture as a constant and the step is not replayed; larger ones are made again at every replay rather than
# held for the graph's life.
HOIST_ELEMENTS = 1 << 16


class _Recorder:
    """What the device API reports during a capture (device.api.recording is this object meanwhile)."""

    def __init__(self):
        self.steps: list = []
        self.nslots = 0
        self.produced: dict = {}    # id(ttnn tensor) -> slot (results of steps, constants)
        self.shapes: list = []      # slot -> torch shape (for shadow handles)
        self.externals: dict = {}   # slot -> _External
        self.ext_key: dict = {}     # (id(handle), id(tt)) or id(tt) -> slot
        self.constants: dict = {}   # slot -> Handle (uploads inside the region, kept by the graph)
        self.guards: list = []      # (kind, what, line, slot)
        self.folded: set = set()    # slots of constant values (see HOIST_ELEMENTS)
        self.index = None
        gc.collect()
        self.before: dict = {}      # id(handle) -> weakref, for every handle alive when capture began
        self.holders = collections.defaultdict(list)  # id(tt) -> weakrefs of the handles holding it then
        for obj in gc.get_objects():
            if type(obj) is api.Handle:
                ref = weakref.ref(obj)
                self.before[id(obj)] = ref
                if obj.tt is not None:
                    self.holders[id(obj.tt)].append(ref)

    # -------------------------------------------------------------------------- refusals
    def refuse(self, what: str):
        raise RuntimeError(
            f"torch.ttnn graph capture: {what} inside a captured region, at {_user_line()}. A replay re-issues "
            f"the region's device ops only, so nothing the host does inside it can be repeated: like "
            f"torch.cuda.graph, capture refuses it. Move it out of the region (before capture for inputs, "
            f"after replay for outputs).")

    def _device(self, index: int):
        if self.index is None:
            self.index = index
        elif index != self.index:
            self.refuse(f"an op on ttnn:{index} in a region captured on ttnn:{self.index} (a graph runs on one "
                        f"device)")

    # -------------------------------------------------------------------------- slots
    def _new_slot(self, tt, shape) -> int:
        s = self.nslots
        self.nslots += 1
        self.produced[id(tt)] = s
        self.shapes.append(shape)
        return s

    def _existed(self, h: api.Handle) -> bool:
        ref = self.before.get(id(h))
        return ref is not None and ref() is h

    def slot(self, h: api.Handle) -> int:
        """The slot of h's current device tensor (registering it as an external on first sight)."""
        if h.tt is None:
            raise RuntimeError("torch.ttnn graph capture: an unwritten tensor (torch.empty) was read")
        s = self.produced.get(id(h.tt))
        if s is not None:
            return s
        existed = self._existed(h)
        key = (id(h), id(h.tt)) if existed else id(h.tt)
        s = self.ext_key.get(key)
        if s is not None:
            return s
        sources = [self.before[id(h)]] if existed else [r for r in self.holders.get(id(h.tt), ()) if r() is not None]
        if not sources:  # pragma: no cover - every device tensor comes from the device API
            raise RuntimeError(f"torch.ttnn graph capture: cannot tell which tensor {h!r} was read from")
        s = self.nslots
        self.nslots += 1
        self.shapes.append(h.shape)
        self.ext_key[key] = s
        self.externals[s] = _External(sources, h)
        return s

    # -------------------------------------------------------------------------- device API hooks
    def _substituted(self, args, kwargs):
        """args and kwargs with the Handles taken out (None in their place), and where they go: (args, subs,
        lsubs, kwargs, ksubs, the slots read)."""
        targs, subs, lsubs = list(args), [], []
        for i, a in enumerate(args):
            if type(a) is api.Handle:
                subs.append((i, self.slot(a)))
                targs[i] = None
            elif type(a) is list and a and type(a[0]) is api.Handle:
                lsubs.append((i, [self.slot(x) for x in a]))
                targs[i] = None
        tkwargs, ksubs = dict(kwargs), []
        for k, v in kwargs.items():
            if type(v) is api.Handle:
                ksubs.append((k, self.slot(v)))
                tkwargs[k] = None
        ins = [s for _, s in subs] + [s for _, ss in lsubs for s in ss] + [s for _, s in ksubs]
        return targs, subs, lsubs, tkwargs, ksubs, ins

    def on_run(self, op: str, args, kwargs, result):
        outs = result if type(result) is list else [result]
        self._device(outs[0].index)
        targs, subs, lsubs, tkwargs, ksubs, ins = self._substituted(args, kwargs)
        made = self._constants(outs) if all(s in self.folded for s in ins) else None
        slots = [self._new_slot(o.tt, o.shape) for o in outs]
        self.steps.append(_Step(op, api._resolve(op), targs, subs, lsubs, tkwargs, ksubs, slots,
                                type(result) is list, made=made))
        if made is not None:
            self.folded.update(slots)

    def on_update(self, op: str, dst: api.Handle, args, kwargs):
        """ttnn.<op>(dst, *args, **kwargs) wrote into dst's device tensor (device.api.update_in_place)."""
        self._device(dst.index)
        targs, subs, lsubs, tkwargs, ksubs, _ = self._substituted((dst, *args), kwargs)
        target = subs[0][1]
        self.folded.discard(target)  # (a constant no more)
        self.steps.append(_Step(op, api._resolve(op), targs, subs, lsubs, tkwargs, ksubs, [target], False,
                                inplace=True))

    def _constants(self, outs) -> list | None:
        """outs as _Constants if they can be kept from the capture (small, their values known), else None."""
        if any(math.prod(o.shape) > HOIST_ELEMENTS or (o.shadow is None and api.RUNTIME.mock) for o in outs):
            return None
        return [_Constant(o.tt, o.shadow) for o in outs]

    def on_create(self, op: str, args, tt_dtype, layout, kwargs, h: api.Handle):
        self._device(h.index)
        made = self._constants([h])
        step = _Step(op, None, (), (), (), {}, (), [self._new_slot(h.tt, h.shape)], False,
                     create=(args, tt_dtype, layout, h.dtype, dict(kwargs)), made=made)
        self.steps.append(step)
        if made is not None:
            self.folded.add(step.outs[0])

    def on_upload(self, h: api.Handle):
        self._device(h.index)
        s = self._new_slot(h.tt, h.shape)
        self.constants[s] = _Constant(h.tt, h.shadow)
        self.folded.add(s)

    def forget(self, h: api.Handle):
        """h's device tensor was made outside the recording (device.api.own_buffer): not a value the region
        produced or read under another handle, whatever tensor its id belonged to before."""
        self.produced.pop(id(h.tt), None)
        self.ext_key.pop(id(h.tt), None)
        self.ext_key.pop((id(h), id(h.tt)), None)

    def decision(self, h: api.Handle, kind, what: str):
        self.guards.append((kind, what, _user_line(), self.slot(h)))

    # -------------------------------------------------------------------------- the end
    def finish(self) -> "_Program":
        steps, externals = self.steps, self.externals
        # outputs: live handles holding a value the region produced, or (made inside it) an external one
        gc.collect()
        outputs = []
        for obj in gc.get_objects():
            if type(obj) is not api.Handle or obj.tt is None:
                continue
            s = self.produced.get(id(obj.tt))
            existed = self._existed(obj)
            if s is None and not existed and any(r() is not None for r in self.holders.get(id(obj.tt), ())):
                s = self.slot(obj)  # made inside the region on a static input's tensor (e.g. a clone)
            if s is not None and s not in self.constants:
                outputs.append((weakref.ref(obj), s, existed))
        # which bounded externals (integer/bool static inputs known on the host) each slot depends on
        deps: dict = {s: frozenset((s,)) for s, e in externals.items() if e.bounds is not None}
        for st in steps:
            ins = [s for _, s in st.subs] + [s for _, ss in st.lsubs for s in ss] + [s for _, s in st.ksubs]
            d = frozenset().union(*(deps[s] for s in ins if s in deps)) if ins else frozenset()
            if d:
                for s in st.outs:
                    deps[s] = d
        guards = [(kind, what, line, sorted(deps.get(s, ()))) for kind, what, line, s in self.guards]
        keep = {s for _, s, _ in outputs}
        # constant folding: the steps of constants whose results nobody outside the region holds are dropped,
        # their results kept from the capture; then the steps whose results nothing reads any more
        for st in steps:
            if st.made is not None and not keep.intersection(st.outs):
                self.constants.update(zip(st.outs, st.made))
            st.made = None
        steps = [st for st in steps if st.outs[0] not in self.constants]
        read = set(keep)
        live = []
        written = {st.outs[0] for st in steps if st.inplace and st.outs[0] in externals}
        for st in reversed(steps):
            if read.intersection(st.outs) or (st.inplace and st.outs[0] in written):
                live.append(st)
                read.update(s for _, s in st.subs)
                read.update(s for _, ss in st.lsubs for s in ss)
                read.update(s for _, s in st.ksubs)
        steps = live[::-1]
        self.constants = {s: c for s, c in self.constants.items() if s in read}
        # last uses: a slot not kept by an output is dropped after the last step that reads it
        last = {}
        for i, st in enumerate(steps):
            for _, s in st.subs:
                last[s] = i
            for _, ss in st.lsubs:
                for s in ss:
                    last[s] = i
            for _, s in st.ksubs:
                last[s] = i
            for s in st.outs:
                last.setdefault(s, i)  # produced and never read: dropped at once unless kept
        kills = collections.defaultdict(list)
        for s, i in last.items():
            if s not in keep and s not in written:  # (a static input written in place takes its slot's value)
                kills[i].append(s)
        for i, st in enumerate(steps):
            st.kill = tuple(kills.get(i, ()))
        return _Program(self.index, steps, self.nslots, self.shapes, externals, self.constants, outputs,
                        guards, set(deps), written)


class _Program:
    """A recorded region: what replay() re-issues."""

    def __init__(self, index, steps, nslots, shapes, externals, constants, outputs, guards, bounded, written=()):
        self.index, self.steps, self.nslots, self.shapes = index, steps, nslots, shapes
        self.written = set(written)  # externals the region writes in place (a paged KV cache)
        self.externals, self.constants, self.outputs, self.guards = externals, constants, outputs, guards
        self.bounded = bounded  # slots whose bounds depend on an integer/bool static input
        self.ops = collections.Counter(st.op for st in steps if st.create is None)  # ttnn calls per replay
        self.guarded = {s for *_, ss in guards for s in ss}

    # -------------------------------------------------------------------------- inputs
    def inputs(self) -> dict:
        """slot -> the source handle of every external, validated (spec, guards) where its tensor changed."""
        current = {}
        changed = []
        for s, ext in self.externals.items():
            if len(ext.sources) == 1:  # the common case (a weight, a static input): one handle, unchanged
                h = ext.sources[0]()
                if h is not None and h.tt is ext.seen:
                    current[s] = h
                    continue
            handles = [r() for r in ext.sources]
            live = [h for h in handles if h is not None]
            if not live:
                raise RuntimeError(
                    f"torch.ttnn graph replay: a static input of the graph ({ext.describe()}) was freed after "
                    f"capture. Keep the tensors the region reads alive for the graph's life, and refill them "
                    f"with copy_().")
            h = live[0]
            if len(handles) > 1:  # several tensors shared the value read (clones): the one refilled since counts
                moved = [x for x, last in zip(handles, ext.last) if x is not None and x.tt is not last]
                if any(x.tt is not moved[0].tt for x in moved[1:]):
                    raise RuntimeError(
                        f"torch.ttnn graph replay: the region read {ext.describe()} that several tensors shared "
                        f"at capture, and they were refilled with different values: which one the graph reads is "
                        f"ambiguous. Refill only the static input the region reads, or capture again.")
                h = moved[0] if moved else next((x for x in live if x.tt is ext.seen), h)
                ext.last = [None if x is None else x.tt for x in handles]
            if h.tt is not ext.seen:
                if h.tt is None or _spec(h.tt) != ext.spec or h.index != self.index:
                    now = "unwritten" if h.tt is None else f"{_spec(h.tt)} on ttnn:{h.index}"
                    raise RuntimeError(
                        f"torch.ttnn graph replay: static input {ext.describe()} changed since capture: the "
                        f"graph was captured for (shape, padded shape, device dtype, layout) {ext.spec} on "
                        f"ttnn:{self.index}, it now holds {now}. Refill static inputs with copy_() from a "
                        f"tensor of the same shape and kind (a resized input, or an integer input whose values "
                        f"turned negative, needs a new capture). If this is a weight converted at its first "
                        f"use, run the region once before capture (a warm-up).")
                changed.append(s)
            current[s] = h
        if changed and self.guarded.intersection(changed):
            self._check_guards(current)
        for s in self.written:  # (written in place: into a buffer no other tensor shares, as in eager mode)
            api.own_buffer(current[s])
        for s in changed:
            self.externals[s].see(current[s].tt)
        return current

    def _check_guards(self, current: dict):
        for kind, what, line, slots in self.guards:
            for s in slots:
                ext, new = self.externals[s], current[s].bounds
                if type(kind) is tuple:  # ("index", rows): the embedding's range check, as in eager mode
                    rows = kind[1]
                    if new is not None and (new[0] < 0 or new[1] >= rows):
                        raise IndexError(f"index out of range in self: an embedding of {rows} rows got indices in "
                                         f"[{new[0]}, {new[1]}] (graph replay; the embedding is at {line})")
                    continue  # (values unknown on the host are not checked in eager mode either)
                if kind == "item":
                    same = new == ext.bounds
                else:
                    same = new is not None and _bounds_class(new) == _bounds_class(ext.bounds)
                if same:
                    continue
                seen = "values unknown on the host (computed on the device)" if new is None else \
                    f"values in [{new[0]}, {new[1]}]"
                raise RuntimeError(
                    f"torch.ttnn graph replay: the captured region decided {what} at {line} from values known on "
                    f"the host (static input {ext.describe()} held values in [{ext.bounds[0]}, {ext.bounds[1]}] "
                    f"at capture); its new value ({seen}) could change that decision, and a replay cannot "
                    f"re-decide. Capture a graph for inputs of this kind (e.g. one per attention-mask pattern: "
                    f"all ones vs padded), or run eagerly.")

    # -------------------------------------------------------------------------- op by op (mock devices)
    def run(self, current: dict, keep: list | None = None):
        """Re-issue every step op by op; returns (tensors, shadows) by slot. Intermediates are dropped after
        their last use, unless `keep` is a list: then every tensor made is appended to it (a trace's buffers
        must stay allocated for its life)."""
        env = [None] * self.nslots
        shadows = [None] * self.nslots
        for s, h in current.items():
            env[s], shadows[s] = h.tt, h.shadow
        for s, h in self.constants.items():
            env[s], shadows[s] = h.tt, h.shadow
        backend = api.BACKEND
        shadowing = backend.shadowing
        index = self.index
        per_op = counters.profile is not None  # (a report attributes each ttnn call: count them one by one)
        try:
            for st in self.steps:
                if st.create is not None:
                    args, tt_dtype, layout, dtype, kwargs = st.create
                    h = api.create(st.op, args, tt_dtype, layout, index, dtype, **kwargs)
                    env[st.outs[0]], shadows[st.outs[0]] = h.tt, h.shadow
                    if keep is not None:
                        keep.append(h.tt)
                    continue
                a = st.args.copy()
                for i, s in st.subs:
                    a[i] = env[s]
                for i, ss in st.lsubs:
                    a[i] = [env[s] for s in ss]
                kw = st.kwargs
                if st.ksubs:
                    kw = kw.copy()
                    for k, s in st.ksubs:
                        kw[k] = env[s]
                out = st.fn(*a, **kw)
                if st.inplace:
                    out = a[0]  # (written in place: the target's tensor, its new contents)
                if per_op:
                    api._count(st.op)
                if shadowing:
                    outs = out if st.multi else (out,)
                    values = backend.values(st.op, *self._handles(st, env, shadows), outs)
                    for s, o, v in zip(st.outs, outs, values):
                        env[s], shadows[s] = o, v
                elif st.multi:
                    for s, o in zip(st.outs, out):
                        env[s] = o
                else:
                    env[st.outs[0]] = out
                if keep is not None:
                    keep.extend(env[s] for s in st.outs)
                    continue
                for s in st.kill:
                    env[s] = shadows[s] = None
            if not per_op:
                counters.ttnn_by_op.update(self.ops)  # every step's ttnn call, counted at once
        except RuntimeError as err:
            oom = api._out_of_memory(err, index, "a graph replay")
            if oom is None:
                raise
            raise oom from err
        return env, shadows

    def _handles(self, st: _Step, env, shadows):
        """The step's arguments with Handles (for shadow execution), as device.api.run received them."""
        def h(s):
            return api.Handle(env[s], shadows[s], torch.float32, self.shapes[s], self.index)
        a = list(st.args)
        for i, s in st.subs:
            a[i] = h(s)
        for i, ss in st.lsubs:
            a[i] = [h(s) for s in ss]
        kw = dict(st.kwargs)
        for k, s in st.ksubs:
            kw[k] = h(s)
        return a, kw

    def write_outputs(self, env, shadows, current: dict):
        """The noted handles take their slots' new values (the same tensor objects, new contents); the static
        inputs written in place, their new shadows."""
        for s in self.written:
            h = current[s]
            if type(h) is not _Fixed:
                h.shadow, h.bounds = shadows[s], None
                h.version += 1
        for ref, s, existed in self.outputs:
            h = ref()
            if h is None:
                continue
            h.tt, h.shadow = env[s], shadows[s]
            if s in current:
                h.bounds = current[s].bounds
            elif s in self.bounded:
                h.bounds = None  # derived from a static input's known values: no longer known
            if existed:
                h.version += 1  # views of a tensor the region wrote in place re-derive (dispatch.refresh)


class _Trace:
    """Hardware only (not run on a mock device, where tt-metal's trace capture crashes): the program recorded
    as a ttnn trace. Every buffer the trace writes stays allocated for the graph's life (a buffer freed after
    capture could be handed to another tensor, which execute_trace would then overwrite); a replay copies
    each changed static input into the trace's input buffer, then execute_trace."""

    def __init__(self, program: _Program):
        self.program = program
        current = program.inputs()  # (the capture itself was the compiling run)
        self.buffers: list = []
        self.id = api.begin_trace(program.index)
        try:
            self.env, self.shadows = program.run(current, keep=self.buffers)
        finally:
            api.end_trace(program.index, self.id)
        self.inputs = {s: h.tt for s, h in current.items()}  # the buffers the trace reads

    def replay(self):
        current = self.program.inputs()
        for s, h in current.items():
            if h.tt is not self.inputs[s]:
                api.copy_into(h.tt, self.inputs[s])
        api.execute_trace(self.program.index, self.id)
        self.program.write_outputs(self.env, self.shadows, {s: _Fixed(tt) for s, tt in self.inputs.items()})

    def release(self):
        api.release_trace(self.program.index, self.id)


class _Fixed:
    __slots__ = ("tt", "bounds")

    def __init__(self, tt):
        self.tt, self.bounds = tt, None


# ----------------------------------------------------------------------------------------------- public API
class TTNNGraph:
    """A captured region of ttnn device work, replayed with `replay()` (torch.cuda.CUDAGraph's contract).

    Capture with `with torch.ttnn.graph(g): ...` after a warm-up run of the region; refill the static inputs
    the region read with `copy_()`, call `g.replay()`, read the same output tensors. `reset()` frees the
    recording (and on a card the trace)."""

    def __init__(self):
        self._program = None
        self._trace = None
        self._recorder = None

    def capture_begin(self, pool=None, capture_error_mode: str = "global"):
        if api.recording is not None:
            raise RuntimeError("torch.ttnn graph capture: a capture is already under way (nested captures are not "
                               "supported): end it before beginning another")
        if self._program is not None:
            raise RuntimeError("torch.ttnn graph capture: this graph was already captured; call reset() first")
        api.force_deferred()  # (eager fusion's deferred convolutions: computed outside the capture)
        self._recorder = _Recorder()
        api.recording = self._recorder

    def capture_end(self):
        rec = self._recorder
        if rec is None or api.recording is not rec:
            raise RuntimeError("torch.ttnn graph capture: capture_end() without capture_begin()")
        api.recording = self._recorder = None
        if rec.index is None:
            rec.index = _current_index()
        self._program = rec.finish()
        if api.BACKEND.traces:
            self._trace = _Trace(self._program)

    def _abort(self):
        if api.recording is self._recorder:
            api.recording = None
        self._recorder = None

    def replay(self):
        p = self._program
        if p is None:
            raise RuntimeError("torch.ttnn graph replay: this graph has not been captured (or was reset)")
        if api.recording is not None:
            raise RuntimeError("torch.ttnn graph replay inside a capture is not supported")
        if self._trace is not None:  # a card
            self._trace.replay()
            return
        current = p.inputs()
        env, shadows = p.run(current)
        p.write_outputs(env, shadows, current)

    def reset(self):
        if self._trace is not None:
            self._trace.release()
        self._program = self._trace = None

    def pool(self):
        """A handle of the graph's memory (accepted for torch.cuda compatibility; graphs share no pool)."""
        return id(self)

    @property
    def num_ops(self) -> int:
        """ttnn calls one replay issues."""
        return 0 if self._program is None else len(self._program.steps)

    def __del__(self):
        try:
            self.reset()
        except Exception:  # interpreter shutdown
            pass


def _current_index() -> int:
    return runtime.current_device()


class graph:
    """Context manager capturing the ttnn device work of its body into `ttnn_graph` (torch.cuda.graph)."""

    def __init__(self, ttnn_graph: TTNNGraph, pool=None, stream=None, capture_error_mode: str = "global"):
        self.graph = ttnn_graph

    def __enter__(self):
        if api.recording is not None:
            raise RuntimeError("torch.ttnn graph capture: a capture is already under way (nested captures are not "
                               "supported): end it before beginning another")
        for index in list(api._devices):
            api.synchronize(index)
        self.graph.capture_begin()
        return self.graph

    def __exit__(self, kind, err, tb):
        if err is not None:
            self.graph._abort()
            return False
        self.graph.capture_end()
        return False


def is_current_stream_capturing() -> bool:
    return api.recording is not None


def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3, allow_unused_input: bool = False,
                           pool=None):
    """Graphed versions of `callables` (a callable or nn.Module, or a tuple of them, with `sample_args` a
    tuple of ttnn tensors or a tuple of such tuples): each warmed up, captured once with static copies of its
    sample arguments, and then, per call, its arguments copied into the static inputs and the graph replayed;
    it returns the same output objects every call. Inference only (no autograd through a replay): arguments
    that require grad are refused."""
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    results = []
    for fn, args in zip(callables, sample_args):
        results.append(_graphed(fn, tuple(args), num_warmup_iters))
    return results[0] if single else tuple(results)


def _check_inference(args, where: str):
    for a in args:
        if isinstance(a, torch.Tensor) and a.requires_grad and torch.is_grad_enabled():
            raise RuntimeError(f"torch.ttnn.make_graphed_callables makes inference graphs: {where} requires grad "
                               f"and training graphs do not exist yet. Call it under torch.no_grad() or "
                               f"torch.inference_mode(), or detach the argument.")


def _graphed(fn, sample, warmup: int):
    from ..core.tensor import is_ttnn
    for a in sample:
        if not is_ttnn(a):
            raise TypeError(f"torch.ttnn.make_graphed_callables: sample arguments must be ttnn tensors, got "
                            f"{type(a).__name__} on {getattr(a, 'device', 'the host')}")
        if a.requires_grad:
            _check_inference([a], "a sample argument")
    index = sample[0].device.index if sample else _current_index()
    forward = fn.forward if isinstance(fn, torch.nn.Module) else fn
    static = [a.detach().clone() for a in sample]
    with torch.no_grad():
        for _ in range(max(1, warmup)):
            forward(*static)
        g = TTNNGraph()
        with graph(g):
            out = forward(*static)

    def graphed(*args):
        if len(args) != len(static):
            raise TypeError(f"graphed callable takes {len(static)} arguments ({len(args)} given)")
        _check_inference(args, "an argument")
        for i, (a, s) in enumerate(zip(args, static)):
            if not isinstance(a, torch.Tensor) or a.device != s.device:
                where = a.device if isinstance(a, torch.Tensor) else type(a).__name__
                raise RuntimeError(f"graphed callable: argument {i} is on {where}, but the graph was captured on "
                                   f"ttnn:{index}; a graph replays on the device it was captured on")
            if a.shape != s.shape or a.dtype != s.dtype:
                raise RuntimeError(f"graphed callable: argument {i} is a {list(a.shape)} {a.dtype} tensor, the "
                                   f"graph was captured for {list(s.shape)} {s.dtype}; capture another graph for "
                                   f"other shapes")
            if a is not s:
                with torch.no_grad():
                    s.copy_(a)
        g.replay()
        return out

    graphed.graph = g
    if isinstance(fn, torch.nn.Module):
        fn.forward = graphed
        return fn
    return graphed

