"""The backend core: what makes `ttnn:N` a PyTorch device.

    registration.py    the `ttnn` device in PyTorch: PrivateUse1 renamed, kernels, the autograd rule for ops
                       kept whole (cheap: no ttnn import)
    native.py          the C++ part (../csrc: PyTorch's PrivateUse1 hooks -- pinned memory, device count --,
                       the device guard, the result-tensor factory): built once per torch version, loaded
                       with ctypes (docs/design/platform.md)
    tensor.py          the torch.Tensor of a ttnn device: a plain PrivateUse1 tensor whose storage holds its
                       Handle (new_tensor, handle_of, is_ttnn), and PyTorch's storage paths made safe
    dispatch.py        the single entry point of every aten op: lowering, decomposition or CPU fallback;
                       views, in-place and out= semantics
    registry.py        aten op -> lowering (filled by the lowerings package), view inverses, Unfit
    decompositions.py  PyTorch's decompositions tried before the CPU fallback (+ foreach.py, recurrent.py,
                       attention.py: nn.MultiheadAttention's fused fast path;
                       convolution.py: 3-D convolutions, refused by their lowering, as 2-D ones)
    layout.py          the policy: ROW_MAJOR vs TILE, device dtypes, compute-kernel configs, cached weights
    capture.py         what the core and the lowerings tell a graph capture (features/graphs.py implements it)
    generator.py       the device-side random generator (seed and draw counter)
    autocast.py        torch.autocast("ttnn"): torch.autocast("cuda")'s lists as AutocastPrivateUse1 kernels

Imports: the device layer (device/), config and counters; never a lowering, a feature or a tool (the
package root wires the lowerings in: registration.register's load_backend).
"""
