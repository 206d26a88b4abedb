"""`torch.compile(model, backend="ttnn")`: Dynamo's graphs run through the backend's own lowerings, fused,
captured once and replayed.

    compiler.py  the Dynamo backend (registered as "ttnn" by the package's `torch_dynamo_backends` entry
                 point): aot_autograd's aten graphs (forward, backward, inference), the fusion passes,
                 then each graph as a Replayed callable
    passes.py    fusion passes on the aten graph: small pattern rewrites into the fused ops of
                 lowerings/fused.py (linear + activation, residual add + layer_norm, ...)
    route.py     torch.compile(model) with the default backend (inductor) on ttnn tensors: routed to "ttnn"
    replay.py    Replayed: a graph run eagerly once, then captured (features/graphs.py) and replayed -- ttnn
                 calls only, no PyTorch dispatch, no lowering decisions -- with its changing inputs copied in

Imports: the core, the device layer, features/graphs.py (never a tool, never a lowering: the fused ops are
reached through torch.ops, like any aten op).
"""


def backend(gm, example_inputs, **kwargs):
    """The Dynamo backend "ttnn" (compiler.backend; imported on first use: it imports Dynamo)."""
    from .compiler import backend as compile_graph
    return compile_graph(gm, example_inputs, **kwargs)


_skipped = False


# Dynamo's frame hook sees every Python frame that runs while a compiled function is active: in the eager code
# of a graph break (an .item(), a data-dependent check), the backend's own Python -- the lowerings the dispatcher
# calls, the device layer -- which Dynamo then tried to trace as if it were the model's code: graph breaks in
# core/tensor.py, lowerings/factory.py, device/api.py (siglip2's vision model: 22 graph breaks, 8 of them in
# this package), graphs made of a lowering's insides, compile time. PyTorch's own files are skipped alike
# (trace_rules' SKIP_DIRS); this package joins them, and so does the ttnn library the device layer calls (its
# Python: op wrappers, and on the mock the golden functions of shadow execution -- dbrx compiled: Dynamo compiled
# ttnn's reshape golden function until its recompile limit). (Model code calling this package's Python API inside
# a compiled function: a graph break there, as for any skipped function.)
def skip_in_dynamo() -> None:
    """This package's files and ttnn's skipped by Dynamo's frame hook (once; imports Dynamo: torch.compile's
    time; ttnn's location is found without importing it)."""
    global _skipped
    if not _skipped:
        import torch._dynamo.trace_rules as trace_rules
        trace_rules.add(__name__.split(".")[0])
        trace_rules.add("ttnn")
        _skipped = True
