"""A compiled aten graph run as a replay of its ttnn calls (torch.compile's mode="reduce-overhead" contract,
CUDA graphs there; here for every mode).

Per input signature (shapes, dtypes, devices of the tensor arguments; the values of the others):

    1st call   eager, through the dispatcher and the lowerings, as any model runs: weights are converted at
               their first use, programs are built
    2nd call   eager again, captured (features/graphs.py): the arguments that are the same tensor objects as
               at the 1st call (parameters, buffers, a static KV cache) are read where they are; the others
               (input_ids, activations saved for a backward) are copied into static tensors of the graph's
               own, and the graph reads those
    3rd call+  the changing arguments copied into the static tensors (a ttnn copy each), then the recorded
               ttnn calls re-issued: no PyTorch dispatch, no lowering or layout decisions

An argument read in place that is written between calls (an optimizer step on a weight: its `_version`
moves) or replaced by another tensor object (a new KV cache) makes that call eager and the next capture
again (counted in `graph_recaptures`): forms prepared from a weight at capture (the fused QKV weight) are
then made anew.

Outputs are new tensor objects every call, holding the buffers the replay wrote (the next replay writes
new ones): nothing returned earlier is overwritten, unlike CUDA graphs' static outputs.

A graph whose capture is refused (a host read such as `.item()`, a CPU fallback, a random op, an argument
that changes object and is written in place) keeps running eagerly, call by call: correct, counted in
`ttnn_eager.stats()["compiled_eager_calls"]`, and the reason is kept (`Replayed.eager_reasons`).
"""
from __future__ import annotations

import weakref

import torch

from ... import counters
from ...core import layout
from ...core import tensor as ttensor
from .. import graphs


# A parameter is part of the signature by identity: Dynamo compiles one graph for modules of the same shapes (the
# parameters are the graph's inputs), and a capture made with one module's weights cannot replay another's by
# copying them into its static inputs -- the captured ops read forms prepared from the weights at capture (conv2d's
# prepared weight and bias, a fused QKV weight), which no replay remakes (pocket_tts_audio_tokenizer's 1x1
# shortcut convolutions: 0.639 compiled, 0.99985 eagerly). Each module's parameters get their own warm-up, capture
# and replay; the capture holds them, so an id is not reused while its state lives.
def _signature(args) -> tuple:
    sig = []
    for a in args:
        if isinstance(a, torch.nn.Parameter):  # (_signature's note)
            sig.append((tuple(a.shape), a.dtype, a.device, id(a)))
        elif isinstance(a, torch.Tensor):
            sig.append((tuple(a.shape), a.dtype, a.device))
        else:
            sig.append(a if isinstance(a, (int, float, bool, type(None))) else type(a))
    return tuple(sig)


class _Warm:
    """The first call of a signature: which arguments were there (by identity); `moving`: positions known to
    change at every call (from an earlier capture of the signature)."""

    __slots__ = ("refs", "moving")

    def __init__(self, args, moving=()):
        self.refs = [weakref.ref(a) if isinstance(a, torch.Tensor) else None for a in args]
        self.moving = set(moving)


def _version(a):
    try:
        return a._version
    except RuntimeError:  # an inference tensor: no version counter (nor in-place writes outside inference mode)
        return None


class _Captured:
    __slots__ = ("graph", "static", "outs", "moving", "versions", "nargs", "kinds", "values", "handles", "layouts")

    def __init__(self, graph, static, outs, moving, versions, sig, layouts):
        self.graph, self.static, self.outs, self.moving = graph, static, outs, moving
        self.versions = versions  # (position, _version) of the arguments read in place (None: written by the graph)
        # what the last-used capture checks of a call instead of its whole signature: the moving arguments'
        # (position, shape, dtype, device) and the other non-tensor arguments' values
        self.nargs = len(sig)
        self.kinds = [(i, *sig[i]) for i in moving]
        self.values = [(i, v) for i, (a, v) in enumerate(zip(static, sig)) if not isinstance(a, torch.Tensor)]
        self.handles = [ttensor.maybe_handle(static[i]) for i in moving]  # the static tensors' handles
        self.layouts = layouts  # the layout each moving argument was captured in (None: not a device tensor)


class _Eager:
    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


class Replayed:
    """The callable a compiled aten graph becomes."""

    def __init__(self, gm: torch.fx.GraphModule, kind: str, replay: bool = True, checks=()):
        # called with one list of the arguments (aot_autograd's boxed convention; an instance attribute, so
        # that the wrappers Dynamo puts around a backward's compiled graph carry it over)
        self._boxed_call = True
        self.gm, self.kind, self.replay = gm, kind, replay
        self.states: dict = {}
        self.last = None  # the capture the last replay used (a call like it is replayed without a signature)
        self.mutated = _mutated_inputs(gm)
        self.checks = list(checks)  # the messages of the graph's last outputs, conditions (compiler.asserts_as_outputs)

    @property
    def eager_reasons(self) -> list:
        return [s.reason for s in self.states.values() if type(s) is _Eager]

    def __call__(self, *args):
        out = self._call(*args)
        if not self.checks:
            return out
        n = len(self.checks)
        for cond, msg in zip(out[-n:], self.checks):
            if not bool(cond):  # (a host read: after the graph, replayed or not)
                raise RuntimeError(msg)
        return type(out)(out[:-n])

    def _call(self, *args):
        # aot_autograd calls a boxed callable with one list of the arguments (the forward), or unboxed
        args = list(args[0]) if len(args) == 1 and type(args[0]) is list else list(args)
        if not self.replay:
            return self.gm(*args)
        last = self.last
        if last is not None and self._same(last, args):
            return self._replay(last, args, checked=True)
        sig = _signature(args)
        state = self.states.get(sig)
        if state is None:
            self.states[sig] = _Warm(args)
            return self.gm(*args)
        if type(state) is _Warm:
            state, out = self._capture(sig, state, args)
            if out is not None:
                return out
        if type(state) is _Eager:
            counters.counts["compiled_eager_calls"] += 1
            return self.gm(*args)
        return self._replay(state, args)

    def _capture(self, sig, warm: _Warm, args):
        moving = sorted(warm.moving | {i for i, (a, ref) in enumerate(zip(args, warm.refs))
                                       if ref is not None and ref() is not a})
        why = self._uncapturable(args, moving)
        if why:
            self.states[sig] = _Eager(why)
            return self.states[sig], None
        static = list(args)
        with torch.no_grad():
            for i in moving:
                static[i] = args[i].detach().clone()
        layouts = [_layout(static[i]) for i in moving]
        g = graphs.TTNNGraph()
        try:
            with graphs.graph(g):
                out = self.gm(*static)
        except RuntimeError as err:
            if not str(err).startswith("torch.ttnn graph capture"):
                raise
            self.states[sig] = _Eager(str(err))
            return self.states[sig], None
        versions = [(i, _version(a) if i not in self.mutated else None) for i, a in enumerate(args)
                    if isinstance(a, torch.Tensor) and i not in moving]
        state = self.states[sig] = _Captured(g, static, out, moving, versions, sig, layouts)
        return state, self._fresh(out)

    @staticmethod
    def _same(state: _Captured, args) -> bool:
        """args are of state's signature: the arguments read in place are the same objects, unwritten (which
        gives them the same shape and dtype), the moving ones of the captured shapes, dtypes and devices, the
        others (integers, floats) the same values."""
        if len(args) != state.nargs:
            return False
        static = state.static
        for i, v in state.versions:
            a = args[i]
            if a is not static[i] or (v is not None and a._version != v):
                return False
        for i, shape, dtype, device in state.kinds:
            a = args[i]
            if a.shape != shape or a.dtype is not dtype or a.device != device:
                return False
        for i, v in state.values:
            if _signature((args[i],))[0] != v:
                return False
        return True

    def _uncapturable(self, args, moving) -> str:
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and not ttensor.is_ttnn(a):
                return f"argument {i} is a {a.device} tensor (a replay cannot copy host tensors in)"
        for i in moving:
            if i in self.mutated:
                return (f"argument {i} is written in place by the graph and is a different tensor at every call "
                        f"(a replay writes the tensors it captured)")
        return ""

    def _replay(self, state: _Captured, args, checked: bool = False):
        static = state.static
        for i, v in () if checked else state.versions:
            a = args[i]
            if a is not static[i] or (v is not None and _version(a) != v):
                # a tensor read in place was replaced by another object, or written since capture (an
                # optimizer step, load_state_dict): forms made from it at capture (a fused QKV weight, conv
                # weights) would be stale, so capture it anew
                return self._recapture(state, args)
        with torch.no_grad():
            for i, dst, captured in zip(state.moving, state.handles, state.layouts):
                a = args[i]
                if a is static[i]:
                    continue
                if not _share(dst, a):
                    static[i].copy_(a)
                if captured is not None and dst.tt is not None and dst.tt.layout != captured:
                    layout.relayout(dst, captured)  # (see _layout)
        state.graph.replay()
        counters.counts["graph_replays"] += 1
        self.last = state
        return self._fresh(state.outs)

    def _recapture(self, state: _Captured, args):
        """This call eager (a warm-up again), the next captures: the arguments that moved stay moving."""
        counters.counts["graph_recaptures"] += 1
        self.last = None
        self.states[_signature(args)] = _Warm(args, state.moving)
        return self.gm(*args)

    @staticmethod
    def _fresh(outs):
        """New tensor objects on the buffers the graph's outputs now hold."""
        def one(o):
            h = ttensor.maybe_handle(o)
            if h is None:
                return o
            return ttensor.new_tensor(h.shared())
        if isinstance(outs, (list, tuple)):
            return type(outs)(one(o) for o in outs)
        return one(outs)


def _layout(t):
    """The layout of t's device tensor (None: not a device tensor, or unwritten). A moving argument is refilled in
    the layout it was captured in: a layout change is in place (core/layout.py), so an eager reader can convert a
    tensor before a graph reads it at one call and not at another (oneformer's mask features, unsqueezed by
    another graph's warm-up ROW_MAJOR before this graph's capture, TILE at the next call: the replay refused the
    refill as a static input that changed)."""
    h = ttensor.maybe_handle(t) if isinstance(t, torch.Tensor) else None
    return None if h is None or h.tt is None else h.tt.layout


def _share(dst, a) -> bool:
    """The static input (handle dst) takes a's device tensor instead of a copy of it, where a is a whole tensor
    on the device of the same shape, device dtype and layout (as a new `input_ids`): a replay only reads it
    (an argument the graph writes is never moving). False otherwise: the caller copies."""
    if dst is None or not (a.storage_offset() == 0 and a.is_contiguous()):
        return False
    h = getattr(a.untyped_storage(), "_ttnn_handle", None)
    if h is None or h.tt is None or dst.tt is None or h.dtype is not dst.dtype or h.shape != dst.shape:
        return False
    d, t = dst.tt, h.tt
    if d.dtype != t.dtype or d.layout != t.layout or d.padded_shape != t.padded_shape:
        return False
    dst.assign(h)
    return True


def _mutated_inputs(gm: torch.fx.GraphModule) -> set:
    """Positions of the placeholders the graph writes in place (aot_autograd keeps an inference graph's
    input mutations as copy_ nodes into them)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    index = {n: i for i, n in enumerate(placeholders)}
    out = set()
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        schema = n.target._schema
        for arg, value in zip(schema.arguments, n.args):
            if arg.alias_info is not None and arg.alias_info.is_write and value in index:
                out.add(index[value])
    return out
