"""What users call beside tensors and modules.

    device_module.py   `torch.ttnn`: devices, synchronize, memory, rng state (torch.cuda's API); cheap
    graphs.py          graph capture and replay (torch.ttnn.graph, TTNNGraph, make_graphed_callables)
    inventory.py       ttnn_eager.record_ops: which aten and TT-NN ops a region ran
    report.py          ttnn_eager.report: per-op coverage, time and fallbacks of a run

Imports: the core, the device layer, config and counters (never a tool). torch.compile,
torch.distributed and the mesh mode belong here too, each in a folder of its own (compile/, distributed/, mesh/:
one process driving a board's chips on the device fabric).
"""
