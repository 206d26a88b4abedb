"""The device layer: the only code of ttnn_eager that calls ttnn.

    runtime.py   which device this process runs on (a card, or a mock device and its rig in rig/), and the
                 current device index; never imports ttnn
    base.py      ttnn itself (imported after the runtime set its variables), Handle, two ttnn look-ups
    api.py       the device API every layer above calls: upload, download, run, create, overwrite, ... on
                 Handles; memory, errors, trace verbs; BACKEND, chosen once at import
    card.py      the card backend: ttnn computes, results are read back, graphs become ttnn traces
    mock.py      the mock backend: shadow execution (TT-NN's golden functions on torch tensors)
    numerics.py  the mock's model of Tensix matrix-engine numerics (fidelity phases, Dst width)

Imports: config and counters only (nothing of the core, lowerings, features or tools).
"""
