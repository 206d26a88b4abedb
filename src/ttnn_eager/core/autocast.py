"""Autocast for the `ttnn` device: `torch.autocast("ttnn", dtype=torch.bfloat16)` does what
`torch.autocast("cuda")` does.

PyTorch implements autocast as kernels of an Autocast<device> dispatch key that cast their inputs and
re-dispatch with that key excluded. It registers them, in C++, for CUDA, CPU, MPS, XPU, ... but not for
PrivateUse1, so here they are registered from Python for AutocastPrivateUse1 with CUDA's lists and policies
(aten/src/ATen/autocast_mode.h: AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE,
AT_FORALL_PROMOTE, the two `norm` overloads, the banned binary_cross_entropy); every other op falls
through and runs in its inputs' dtypes. tests/test_autocast.py checks that POLICY covers every op that has
an AutocastCUDA kernel (but cuDNN's own) and the output dtypes op by op.

    lower_precision_fp   floating ttnn inputs cast to the autocast dtype (bfloat16): matmuls, convolutions,
                         linear, sdpa, RNN cells
    fp32                 floating ttnn inputs cast to float32: pointwise transcendentals, norms, losses
    fp32_set_opt_dtype   run with dtype=float32 when the first input is eligible and no dtype is given
                         (softmax, log_softmax, sum, prod, cumsum, ...): the inputs are not cast
    fp32_append_dtype    norm.Scalar / norm.ScalarOpt_dim: CUDA re-dispatches to the dtype overload with
                         float32; here the input is cast to float32 (the same result dtype)
    promote              eligible inputs cast to the widest floating dtype among them (addcmul, index_put, ...)
    banned               raise, as CUDA does (binary_cross_entropy: use binary_cross_entropy_with_logits)

An input is eligible, as in PyTorch, when it is a floating-point tensor on a ttnn device and not float64.
Not done: PyTorch's cast cache (a weight cast once per autocast region): each op casts its weights again
(a ttnn typecast; cheap when float32 is stored as bfloat16, the default).
Cheap: no ttnn import; registered by registration.register.
"""
from __future__ import annotations

import torch

BANNED_MESSAGE = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
    "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast.")

# aten op (name.overload) -> policy: CUDA's lists (autocast_mode.h in torch 2.14), in their order.
_LOWER = ("_convolution.deprecated _convolution conv1d conv2d conv3d conv_tbc conv_transpose1d "
          "conv_transpose2d.input conv_transpose3d.input convolution prelu addmm addmv addr matmul einsum mm mv "
          "linalg_vecdot linear addbmm baddbmm bmm chain_matmul linalg_multi_dot _thnn_fused_lstm_cell "
          "_thnn_fused_gru_cell lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell "
          "_scaled_dot_product_flash_attention scaled_dot_product_attention")
_FP32 = ("acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow.Tensor_Scalar "
         "pow.Tensor_Tensor pow.Scalar softplus layer_norm native_layer_norm rms_norm group_norm "
         "frobenius_norm.dim nuclear_norm nuclear_norm.dim cosine_similarity poisson_nll_loss "
         "cosine_embedding_loss nll_loss nll_loss2d hinge_embedding_loss kl_div l1_loss smooth_l1_loss "
         "huber_loss mse_loss margin_ranking_loss multilabel_margin_loss soft_margin_loss triplet_margin_loss "
         "multi_margin_loss binary_cross_entropy_with_logits dist pdist cdist renorm logsumexp "
         "upsample_nearest1d _upsample_nearest_exact1d upsample_nearest2d _upsample_nearest_exact2d "
         "upsample_nearest3d _upsample_nearest_exact3d upsample_linear1d upsample_bilinear2d "
         "_upsample_bilinear2d_aa upsample_trilinear3d upsample_bicubic2d _upsample_bicubic2d_aa "
         "linalg_matrix_sqrth")  # (this last one has an AutocastCUDA kernel but is in none of the header's lists:
#                                   float32 assumed)
_FP32_SET_OPT_DTYPE = ("prod prod.dim_int softmax.int log_softmax.int cumprod cumsum linalg_vector_norm "
                       "linalg_matrix_norm linalg_matrix_norm.str_ord sum sum.dim_IntList")
_FP32_APPEND_DTYPE = "norm.Scalar norm.ScalarOpt_dim"
_PROMOTE = "addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot scatter_add"
POLICY = {
    **dict.fromkeys(_LOWER.split(), "lower_precision_fp"),
    **dict.fromkeys(_FP32.split(), "fp32"),
    **dict.fromkeys(_FP32_SET_OPT_DTYPE.split(), "fp32_set_opt_dtype"),
    **dict.fromkeys(_FP32_APPEND_DTYPE.split(), "fp32_append_dtype"),
    **dict.fromkeys(_PROMOTE.split(), "promote"),
    "binary_cross_entropy": "banned",
}

_EXCLUDE = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)


def _eligible(x) -> bool:
    return (isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float64
            and x.device.type == "ttnn")


def _cast(x, dtype):
    if _eligible(x):
        return x if x.dtype == dtype else x.to(dtype)
    if type(x) in (list, tuple):
        return type(x)(_cast(y, dtype) for y in x)
    return x


def _widest(args, kwargs):
    dtype = None
    for x in (*args, *kwargs.values()):
        for t in (x if type(x) in (list, tuple) else (x,)):
            if _eligible(t):
                dtype = t.dtype if dtype is None else torch.promote_types(dtype, t.dtype)
    return dtype


def _kernel(op, policy: str):
    dtype_index = next((i for i, a in enumerate(op._schema.arguments) if a.name == "dtype"), None)

    def autocast(*args, **kwargs):
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            if policy == "lower_precision_fp":
                to = torch.get_autocast_dtype("ttnn")
            elif policy in ("fp32", "fp32_append_dtype"):
                to = torch.float32
            elif policy == "promote":
                to = _widest(args, kwargs)
            elif policy == "banned":
                raise RuntimeError(BANNED_MESSAGE)
            else:  # fp32_set_opt_dtype: the op computes in float32 unless a dtype is given; inputs as they are
                if args and _eligible(args[0]):
                    if dtype_index is not None and len(args) > dtype_index:
                        if args[dtype_index] is None:
                            args = (*args[:dtype_index], torch.float32, *args[dtype_index + 1:])
                    elif kwargs.get("dtype") is None:
                        kwargs = {**kwargs, "dtype": torch.float32}
                return op(*args, **kwargs)
            if to is not None:
                args = tuple(_cast(a, to) for a in args)
                kwargs = {k: _cast(v, to) for k, v in kwargs.items()}
            return op(*args, **kwargs)

    autocast.__name__ = f"autocast_{policy}"
    return autocast


def register(library: torch.library.Library) -> None:
    """Give every op of POLICY its AutocastPrivateUse1 kernel in `library` (an aten IMPL library)."""
    for name, policy in POLICY.items():
        base, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, base), overload or "default")
        library.impl(op, _kernel(op, policy), "AutocastPrivateUse1")
