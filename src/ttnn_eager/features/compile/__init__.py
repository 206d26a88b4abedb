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
