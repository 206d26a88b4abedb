"""The Dynamo backend "ttnn".

    torch.compile(model, backend="ttnn")                       forward (and backward) graphs on ttnn tensors
    torch.compile(model, backend="ttnn", options={"replay": False, "fuse": False})   for debugging

Dynamo hands over a torch-level graph and example inputs; aot_autograd turns it into aten-level graphs (an
inference graph under no_grad, else a forward and a backward graph), functionalized. Each graph then goes
through the fusion passes (passes.py) and becomes a Replayed callable (replay.py): its ops run through the
same dispatcher and lowerings as eager mode (no second lowering table), once eagerly and once captured,
then as a replay of the captured ttnn calls. An op with no lowering inside a graph is the same counted CPU
fallback (or strict-mode error) as in eager mode; a graph with a fallback cannot be captured and keeps
running eagerly. Dynamo's guards decide recompiles (new shapes, dtypes); a graph break runs the code in
between eagerly, on the device as usual.

`mode` is accepted for torch.compile's sake: every mode replays ("reduce-overhead" means CUDA graphs for
CUDA, and a replay is what a ttnn trace is).
"""
from __future__ import annotations

import contextlib

import torch

from ...core import tensor as ttensor
from . import passes
from .replay import Replayed

OPTIONS = {"replay": True, "fuse": True}


def backend(gm, example_inputs, mode=None, options=None, **kwargs):
    """Dynamo's backend function: (torch.fx.GraphModule, example inputs) -> a callable."""
    from torch._dynamo.backends.common import aot_autograd

    from . import skip_in_dynamo
    skip_in_dynamo()  # (torch._dynamo.optimize called without torch.compile)

    opts = dict(OPTIONS)
    unknown = set(options or ()) - set(opts)
    if unknown:
        raise ValueError(f'torch.compile(backend="ttnn"): unknown option(s) {sorted(unknown)}; the options are '
                         f'{sorted(opts)}')
    opts.update(options or {})
    compilers = {kind: _compiler(kind, opts) for kind in ("forward", "backward", "inference")}
    # keep_inference_input_mutations: a write into an input (a static KV cache's index_copy_) stays in the
    # graph, so it is captured and replayed with the rest instead of running as a copy_ after every call
    with kept_whole():  # (aot_autograd traces here: the forward, inference or joint graph)
        return aot_autograd(fw_compiler=compilers["forward"], bw_compiler=compilers["backward"],
                            inference_compiler=compilers["inference"],
                            keep_inference_input_mutations=True)(gm, example_inputs)


# Ops the backend lowers whole that aot_autograd's tracing would decompose: PyTorch registers Python
# decompositions of the upsample ops as their Autograd and CompositeImplicitAutograd kernels (py_impl,
# torch/_decomp/decompositions.py), which the Python dispatcher runs while aot_autograd traces, whatever the
# decomposition table -- F.interpolate became index gathers and their arithmetic (bilinear 8x8 -> 12x12: 30
# TT-NN ops compiled against 5 eagerly, bicubic 116 against 5; pixio 2.7x eager's ops). Eager mode runs the C++
# kernels: the .vec overload F.interpolate calls computes the output size and calls the .default one, which
# has a lowering (lowerings/upsample.py: one matmul per axis, or views, or gathers of nearest). While the
# backend traces, those Python kernels are set aside (the way torch.export keeps the composite ops it is asked
# to preserve, exported_program._override_composite_implicit_decomp) and the C++ ones run: the graph holds
# the .default op, and a backward graph its C++ derivative (upsample_*_backward), as eager mode's autograd.
# The C++ kernel of a .vec overload takes its sizes as concrete integers ("SymIntArrayRef expected to contain only
# concrete integers": oneformer's interpolate to a mask's size once Dynamo made that size dynamic): a .vec op's
# Python kernels are replaced, not removed, by `_vec_as_default`, the C++ kernel's computation on symbolic sizes.
# (The trace runs under Dynamo's compile lock; the kernels are put back and the dispatch caches cleared after.)
def _keep_whole_ops() -> tuple:
    aten = torch.ops.aten
    return (aten.upsample_nearest1d.default, aten.upsample_nearest1d.vec, aten.upsample_nearest2d.default,
            aten.upsample_nearest2d.vec, aten.upsample_nearest3d.default, aten.upsample_nearest3d.vec,
            aten.upsample_linear1d.vec, aten.upsample_bilinear2d.default, aten.upsample_bilinear2d.vec,
            aten.upsample_bicubic2d.default, aten.upsample_bicubic2d.vec)


@contextlib.contextmanager
def kept_whole():
    """While it lasts, the Python decompositions (Autograd, CompositeImplicitAutograd py_kernels) of the ops of
    _keep_whole_ops are set aside: a trace records those ops whole."""
    import torch._decomp.decompositions  # noqa: F401  (registers them: before they are set aside)
    from torch._C import DispatchKey
    keys = (DispatchKey.Autograd, DispatchKey.CompositeImplicitAutograd)
    saved = {op: {k: op.py_kernels[k] for k in keys if k in op.py_kernels} for op in _keep_whole_ops()}
    try:
        for op, kernels in saved.items():
            for k in kernels:
                if op._overloadname == "vec":
                    op.py_kernels[k] = _vec_as_default(op)
                else:
                    del op.py_kernels[k]
            op._dispatch_cache.clear()
        yield
    finally:
        for op, kernels in saved.items():
            op.py_kernels.update(kernels)
            op._dispatch_cache.clear()


def _vec_as_default(op):
    """What the C++ kernel of the upsample .vec overload `op` does, on sizes that may be symbolic: the output
    size from output_size or scale_factors, then the .default overload (the scales per axis as its arguments)."""
    from torch._decomp.decompositions import upsample_compute_output_size
    default = op.overloadpacket.default
    names = [a.name for a in op._schema.arguments]  # input, output_size, [align_corners,] scale_factors

    def kernel(*args, **kwargs):
        a = {**dict(zip(names, args)), **kwargs}
        size = upsample_compute_output_size(a["input"].size(), a["output_size"], a["scale_factors"])
        align_corners = [a["align_corners"]] if "align_corners" in names else []
        return default(a["input"], size, *align_corners, *(a["scale_factors"] or [None] * len(size)))
    return kernel


def _compiler(kind: str, opts: dict):
    def compile_graph(gm, example_inputs):
        checks = asserts_as_outputs(gm)
        if whole_ops(gm) or checks:
            gm.recompile()
        if opts["fuse"]:
            passes.run(gm, example_inputs)
        if views_as_values(gm) + unsafe_index_as_index(gm) + fold_constants(gm):
            gm.recompile()
        on_device = any(ttensor.is_ttnn(x) for x in example_inputs)
        return Replayed(gm, kind, replay=opts["replay"] and on_device, checks=checks)
    return compile_graph


# aten._assert_async(cond, msg) in a graph: PyTorch's traced decompositions check a tensor's values with it where
# eager mode's C++ kernel reads them on the host or leaves them to the device (one_hot's Python decomposition:
# all(x >= 0), all(x < classes); dbrx's and switch_transformers' routers). Inductor lowers it to a device-side
# assert; TT-NN has none, and in the graph it is a host read of the condition (the CPU fallback, as eager mode
# runs it on a ttnn tensor), which a capture refuses: the graph ran eagerly at every call. It is a check on
# data, not on shapes Dynamo guards, so it cannot be dropped. The condition becomes an output of the graph
# instead, and the compiled callable reads it after each call (eager, captured or replayed) and raises
# RuntimeError(msg) when it is false -- CPU's _assert_async, one small device-to-host read a call, after the
# graph; the replay stays whole. What the graph computed before the check is returned by no one.
_ASSERTS = (torch.ops.aten._assert_async.msg, torch.ops.aten._assert_async.default)


def asserts_as_outputs(gm) -> list:
    """gm's _assert_async nodes removed, their conditions appended to its outputs (in order); their messages."""
    messages = []
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in _ASSERTS:
            cond = node.args[0]
            messages.append(node.args[1] if len(node.args) > 1 else node.kwargs.get("assert_msg",
                                                                                    "Expected Tensor with single nonzero value, but got zero"))
            outputs = out.args[0]
            out.args = ((*outputs, cond) if isinstance(outputs, (tuple, list)) else (outputs, cond),)
            gm.graph.erase_node(node)
    return messages


# Library ops that stand, under torch.compile only, for an aten op the backend lowers whole, as eager mode runs it:
# transformers' mixture-of-experts layers call torch._grouped_mm eagerly, but under Dynamo with weights other than
# bfloat16 their opaque custom op transformers::grouped_mm_fallback instead (a loop of one mm per expert into
# slices of an output: per expert a slice, an mm and a copy, after functionalization; granitemoe's forward 423
# TT-NN ops compiled against 401 eagerly). Same arguments, same result (the rows of each expert, sorted by
# expert, times its weight).
def _grouped_mm(node) -> None:
    x, weight, offs = (list(node.args) + [node.kwargs.get(k) for k in ("input", "weight", "offs")][len(node.args):])
    node.target, node.args, node.kwargs = torch.ops.aten._grouped_mm.default, (x, weight), {"offs": offs}


WHOLE = {"transformers::grouped_mm_fallback": _grouped_mm}


def whole_ops(gm) -> int:
    """gm's library ops that have an aten op the backend lowers whole (WHOLE) replaced by it; how many."""
    done = 0
    for node in gm.graph.nodes:
        name = node.target.name() if node.op == "call_function" and hasattr(node.target, "name") and \
            callable(node.target.name) else None
        if name in WHOLE:
            WHOLE[name](node)
            done += 1
    return done


# aot_autograd traces on fake tensors with PyTorch's strides -- an elementwise result of a transposed input keeps
# the input's permuted strides -- and makes a view of each reshape those strides allow. The backend's results
# are contiguous whatever their inputs' strides (a ttnn tensor has no strides), so such a view can be impossible
# at run time ("view size is not compatible with input tensor's size and stride": falcon_h1's, granitemoehybrid's
# and mamba2's gated norm views the transposed output of a multiply). In a functionalized graph nothing writes
# through a view, so a view is only its value: aten._unsafe_view, the same ttnn.reshape, with no alias to derive
# from strides. (Eager mode decides reshape's view-or-copy on the backend's own strides and never meets this.)
def views_as_values(gm) -> int:
    """gm's aten.view nodes as aten._unsafe_view; how many."""
    done = 0
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.view.default:
            node.target = torch.ops.aten._unsafe_view.default
            done += 1
    return done


# aten._unsafe_index is index without the bounds check: PyTorch's traced decompositions of interpolate (nearest,
# bilinear, bicubic: upsample_*) gather with it, their indices in range by construction. Eager mode runs the
# upsample kernels' own lowerings; in a graph _unsafe_index ran on the CPU fallback (a host read: the graph not
# captured; conditional_detr, pixio, sam_hq_vision_model, sam3_lite_text_text_model, vilt). It is aten.index.Tensor's
# lowering, same arguments, same result.
def unsafe_index_as_index(gm) -> int:
    """gm's aten._unsafe_index.Tensor nodes as aten.index.Tensor; how many."""
    done = 0
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten._unsafe_index.Tensor:
            node.target = torch.ops.aten.index.Tensor
            done += 1
    return done


# A model's own constants (torch.tensor(...) in its forward: lifted into the graph as tensor attributes), the
# tensors its forward makes from nothing but sizes and values (factory ops: arange, ones, full, ...) and what is
# computed from them alone are the same at every call: computed once here, when the graph is compiled, and kept
# as constants of the graph. Eager mode computes them at every forward (gemma3n's _gaussian_topk:
# Normal(0, 1).icdf(torch.tensor(0.95)) -- an erfinv and its arithmetic in each of 8 layers; idefics3's vision
# embeddings: the patch positions bucketized from a torch.ones mask made on the host and copied to the device,
# which also kept the graph from being captured). Ops with random results (nondeterministic_seeded), the empty
# factories (their values are whatever memory held) and values over FOLD_MAX elements (a constant stays in device
# memory for the graph's life) are left in the graph. A result of the graph that is constant (mistral's sliding-window
# cache returns a tensor made from a model constant) is returned as a copy of its constant, made at each call: the
# caller may write into what it gets (a cache's `+=`), which must not reach the constant, and left in the graph it
# would be a host-to-device copy of a host constant at each call, which a capture refuses.
FOLD_MAX = 1 << 20
_EMPTY = ("aten::empty", "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided", "aten::empty_like")


def _small(node) -> bool:
    v = node.meta.get("val")
    return not isinstance(v, torch.Tensor) or v.numel() <= FOLD_MAX


def _foldable(node, constant) -> bool:
    if node.op != "call_function" or not _small(node):
        return False
    inputs = node.all_input_nodes
    schema = getattr(node.target, "_schema", None)
    if not inputs:  # a factory op: its arguments are sizes and values
        if schema is None or schema.name in _EMPTY or not isinstance(node.meta.get("val"), torch.Tensor):
            return False
    elif not all(n in constant for n in inputs):
        return False
    tags = getattr(node.target, "tags", ())
    mutates = schema is not None and any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    return torch.Tag.nondeterministic_seeded not in tags and not mutates


def fold_constants(gm) -> int:
    """gm's nodes computed from its tensor constants and factory ops alone replaced by their values (new tensor
    constants); how many nodes were folded. (A node that fails to compute here is left to run at each call,
    where its error is the call's.)"""
    import functools
    from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily
    from torch.fx.node import map_arg
    constant, folded = {}, 0
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = functools.reduce(getattr, node.target.split("."), gm)
            if isinstance(value, torch.Tensor) and not isinstance(value, FakeTensor):
                constant[node] = value
        elif _foldable(node, constant):
            try:
                with torch.no_grad(), unset_fake_temporarily():
                    constant[node] = node.target(*map_arg(node.args, constant.__getitem__),
                                                 **map_arg(node.kwargs, constant.__getitem__))
            except Exception:  # noqa: BLE001 -- (not folded: it runs at each call)
                pass
    for node in list(constant):
        value = constant[node]
        if node.op == "get_attr" or not isinstance(value, torch.Tensor) or all(u in constant for u in node.users):
            continue
        name = f"_ttnn_folded_{folded}"
        if value._is_view():  # (a view: its own values)
            with torch.no_grad(), unset_fake_temporarily():
                value = value.clone()
        gm.register_buffer(name, value)
        outputs = [u for u in node.users if u.op == "output"]
        with gm.graph.inserting_before(node):
            attr = gm.graph.get_attr(name)
            copy = gm.graph.call_function(torch.ops.aten.clone.default, (attr,)) if outputs else None
        node.replace_all_uses_with(attr)
        for out in outputs:
            out.replace_input_with(attr, copy)
        if copy is not None:
            copy.meta.update(node.meta)
        folded += 1
    if folded:
        gm.graph.eliminate_dead_code()
    return folded

