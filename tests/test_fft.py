"""FFTs on the device (lowerings/fft.py: aten._fft_r2c, _fft_c2c and _fft_c2r as DFT matrix products of the
real pairs): accuracy against CPU float32 as numbers (Pearson, max error) for the lengths models use,
several dimensions and normalizations, PyTorch's Hermitian semantics of c2r, the refusals (counted
fallbacks with a reason), the table cache, PyTorch's OpInfo samples in complex64 (the float32 ones run in
tests/test_opinfo.py), the models' patterns (FNet's fftn, WavTokenizer's inverse STFT), stft/istft, and a
property over shapes, dimensions and norms."""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ttnn_eager

from conftest import covers, pcc

DEV = "ttnn:0"
aten = torch.ops.aten
C64 = torch.complex64


def bf(*shape, seed=0):
    g = torch.Generator().manual_seed(seed + 7 * sum(shape))
    return torch.randn(*shape, generator=g).to(torch.bfloat16).float()


def cbf(*shape, seed=0):
    """complex64 with bfloat16 parts (what is measured is the transform, not the upload)."""
    return torch.complex(bf(*shape, seed=seed), bf(*shape, seed=seed + 1))


def _real(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().cpu().resolve_conj()
    return torch.view_as_real(t) if t.is_complex() else t


def measure(fn, *inputs) -> tuple:
    """(pearson, max error / max |ref|, fallbacks) of fn on the device against the CPU."""
    ref = _real(fn(*inputs))
    with ttnn_eager.record_ops() as rec:
        out = fn(*[x.to(DEV) for x in inputs])
    assert out.device.type == "ttnn"
    got = _real(out)
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, ref.dtype, got.shape, ref.shape)
    return pcc(got, ref), ((got - ref).abs().max() / ref.abs().max()).item(), dict(rec.fallbacks)


# ----------------------------------------------------------------------------------------------- accuracy
KINDS = {  # name -> (fn, input maker of length n)
    "fft_real": (torch.fft.fft, lambda n: bf(4, n)),                                   # r2c, both sides
    "fft": (torch.fft.fft, lambda n: cbf(4, n)),                                        # c2c forward
    "ifft_ortho": (lambda c: torch.fft.ifft(c, norm="ortho"), lambda n: cbf(4, n)),     # c2c backward, 1/sqrt(n)
    "rfft": (torch.fft.rfft, lambda n: bf(4, n)),                                       # r2c onesided
    "irfft": (lambda c: torch.fft.irfft(c, n=c.shape[-1] * 2 - 2), lambda n: cbf(4, n // 2 + 1)),  # c2r, 1/n
    "irfft_odd": (lambda c: torch.fft.irfft(c, n=c.shape[-1] * 2 - 1), lambda n: cbf(4, n // 2 + 1)),
}


@pytest.mark.parametrize("n", [8, 24, 64, 100, 512])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_accuracy_against_cpu_float32(kind, n):
    """bfloat16 tables and operands, HiFi2 products with float32 accumulation (the default matmul config):
    Pearson 0.99999 and a max error within 0.8% of the largest output (measured: 0.999993-0.999996 and
    0.4-0.7%; the output's own bfloat16 rounding is 0.4%)."""
    fn, make = KINDS[kind]
    p, err, fallbacks = measure(fn, make(n))
    assert not fallbacks, fallbacks
    assert p >= 0.99998 and err <= 0.008, (p, err)


def test_a_wrong_transform_is_told_apart():
    """The check above can fail: the conjugate (a sign error) or a transposed table correlate poorly."""
    x = cbf(4, 64)
    out = torch.fft.fft(x.to(DEV)).cpu()
    assert pcc(_real(out), _real(torch.fft.fft(x))) >= 0.9999
    assert pcc(_real(out), _real(torch.fft.fft(x).conj())) < 0.2
    assert pcc(_real(out), _real(torch.fft.ifft(x) * 64)) < 0.2


def test_long_transforms_of_the_audio_models():
    """WavTokenizer's irfft of n_fft = 2400 (a [2402, 2400] table) and a 4096-long rfft (MAX_N)."""
    for fn, x in ((lambda c: torch.fft.irfft(c, 2400, dim=-1), cbf(1, 5, 1201)), (torch.fft.rfft, bf(2, 4096))):
        p, err, fallbacks = measure(fn, x)
        assert not fallbacks and p >= 0.99998 and err <= 0.008, (p, err, fallbacks)


MULTI = {
    "fftn_fnet": (lambda x: torch.fft.fftn(x, dim=(1, 2)).real, lambda: bf(2, 16, 64)),
    "fft2_dims_0_2": (lambda c: torch.fft.fft2(c, dim=(0, 2)), lambda: cbf(5, 6, 7)),
    "ifftn_forward": (lambda c: torch.fft.ifftn(c, norm="forward"), lambda: cbf(3, 4, 5)),
    "rfftn": (torch.fft.rfftn, lambda: bf(3, 6, 10)),
    "rfftn_dims_2_0": (lambda x: torch.fft.rfftn(x, dim=(2, 0), norm="ortho"), lambda: bf(3, 6, 10)),
    "irfftn": (torch.fft.irfftn, lambda: cbf(3, 6, 10)),
    "irfft2_s": (lambda c: torch.fft.irfft2(c, s=(4, 9)), lambda: cbf(3, 6, 10)),
    "hfft": (torch.fft.hfft, lambda: cbf(3, 6, 10)),
    "hfftn": (torch.fft.hfftn, lambda: cbf(3, 6, 10)),
    "ihfft": (torch.fft.ihfft, lambda: bf(3, 6, 10)),
    "ihfftn": (torch.fft.ihfftn, lambda: bf(3, 6, 10)),
    "fft_padded": (lambda c: torch.fft.fft(c, n=12), lambda: cbf(3, 7)),  # (complex constant_pad_nd)
    "fft_cropped": (lambda c: torch.fft.fft(c, n=5, dim=0), lambda: cbf(7, 3)),
    "fft_1d": (torch.fft.fft, lambda: cbf(33)),
    "fft_length_1": (lambda c: torch.fft.fft(c, dim=0), lambda: cbf(1, 5)),
}


@pytest.mark.parametrize("name", sorted(MULTI))
def test_dimensions_norms_and_lengths(name):
    fn, make = MULTI[name]
    p, err, fallbacks = measure(fn, make())
    assert not fallbacks, fallbacks
    assert p >= 0.9999 and err <= 0.02, (p, err)


def test_c2r_follows_pytorchs_hermitian_semantics():
    """The imaginary parts of the DC bin and (n even) the Nyquist bin are ignored, as bins past n // 2 + 1
    of a longer input are: the device gives the CPU's values for any of them."""
    for n in (8, 7):
        c = cbf(3, n // 2 + 1)
        other = c.clone()
        other[:, 0] = torch.complex(c[:, 0].real, torch.full((3,), 5.0))
        if n % 2 == 0:
            other[:, -1] = torch.complex(c[:, -1].real, torch.full((3,), -3.0))
        a = torch.fft.irfft(c.to(DEV), n=n).cpu()
        b = torch.fft.irfft(other.to(DEV), n=n).cpu()
        assert torch.equal(a, b)
        assert (a - torch.fft.irfft(c, n=n)).abs().max() < 0.01 * torch.fft.irfft(c, n=n).abs().max()
    full = cbf(3, 8)  # aten's own c2r takes n bins too (the first n // 2 + 1 are read)
    with ttnn_eager.record_ops() as rec:
        out = aten._fft_c2r(full.to(DEV), [1], 0, 8).cpu()
    ref = aten._fft_c2r(full, [1], 0, 8)
    assert not rec.fallbacks and (out - ref).abs().max() < 0.01 * ref.abs().max()


def test_tables_are_uploaded_once():
    from ttnn_eager.lowerings import _common
    x = bf(3, 48).to(DEV)
    _common.clear_tables()
    with ttnn_eager.record_ops() as rec:
        torch.fft.rfft(x)
        torch.fft.fftn(x)
    assert rec.stats["host_to_device"] == 3  # rfft's r2c table [48, 50], fftn's c2c tables [96, 96] and [6, 6]
    with ttnn_eager.record_ops() as rec:
        torch.fft.rfft(x)
        torch.fft.fftn(x)
    assert rec.stats["host_to_device"] == 0


def test_empty_cache_drops_the_tables():
    """The tables outlive the model that used them until torch.ttnn.empty_cache(): DRAM back at its level
    before the first FFT, and the next FFT uploads its table again."""
    from ttnn_eager.lowerings import _common
    _common.clear_tables()
    x = bf(3, 48).to(DEV)
    torch.ttnn.empty_cache()
    before = torch.ttnn.memory_allocated()
    torch.fft.rfft(x)
    assert torch.ttnn.memory_allocated() > before  # the [48, 50] table stays
    torch.ttnn.empty_cache()
    assert torch.ttnn.memory_allocated() == before
    with ttnn_eager.record_ops() as rec:
        out = torch.fft.rfft(x).cpu()
    assert rec.stats["host_to_device"] == 1
    assert pcc(_real(out), _real(torch.fft.rfft(x.cpu().float()))) >= 0.9999


# ----------------------------------------------------------------------------------------------- refusals
def test_what_is_refused_falls_back_counted_with_a_reason():
    """Beyond MAX_N, or a table beyond MAX_TABLE_BYTES (c2c of 3000: 72 MB in bfloat16): the CPU fallback,
    counted, PyTorch's values; strict mode names the reason."""
    for fn, x, reason in ((torch.fft.rfft, bf(2, 4097), "MAX_N"), (torch.fft.fft, cbf(1, 3000), "MAX_TABLE_BYTES")):
        with ttnn_eager.record_ops() as rec:
            out = fn(x.to(DEV)).cpu()
        assert sum(rec.fallbacks.values()) == 1, rec.fallbacks
        assert pcc(_real(out), _real(fn(x))) >= 0.9999
        with ttnn_eager.strict(), pytest.raises(ttnn_eager.FallbackError, match=reason):
            fn(x.to(DEV))


def test_empty_inputs_and_bad_arguments_give_pytorchs_errors():
    for fn, x in ((torch.fft.fft, torch.zeros(0, 3)), (torch.fft.rfft, torch.zeros(3, 0)),
                  (torch.fft.ifft, torch.zeros(0, 3, dtype=C64)), (torch.fft.irfft, torch.zeros(0, 3, dtype=C64)),
                  (torch.fft.fft, torch.tensor(1.0)), (lambda c: torch.fft.irfft(c, n=0), cbf(2, 3))):
        with pytest.raises(Exception) as cpu:
            fn(x)
        with pytest.raises(type(cpu.value)):
            fn(x.to(DEV))


# ----------------------------------------------------------------------------------------------- OpInfo samples
COMPLEX_OPINFOS = ("fft.fft", "fft.fft2", "fft.fftn", "fft.ifft", "fft.ifft2", "fft.ifftn", "fft.irfft",
                   "fft.irfft2", "fft.irfftn", "fft.hfft", "fft.hfft2", "fft.hfftn")


def test_opinfo_samples_in_complex64():
    """PyTorch's OpInfo samples (op_db) of the FFTs in complex64 (bfloat16 parts): every one on the device
    (no fallback), within tools/opinfo.py's bfloat16 tolerance."""
    from torch.testing._internal.common_methods_invocations import op_db
    from ttnn_eager.tools import opinfo

    def rounded(x):
        return torch.complex(*(p.to(torch.bfloat16).float() for p in (x.real, x.imag))) \
            if isinstance(x, torch.Tensor) and x.dtype is C64 else x
    ran = 0
    for op in op_db:
        if op.name not in COMPLEX_OPINFOS:
            continue
        for sample in opinfo._samples(op, C64):
            sample = sample.transform(rounded)
            ref = opinfo._call(op, sample)
            with ttnn_eager.record_ops() as rec:
                out = opinfo._call(op, sample.transform(opinfo._to_device))
            problem = opinfo._compare(tuple(_real(o) for o in (out if isinstance(out, tuple) else (out,))),
                                      tuple(_real(r) for r in (ref if isinstance(ref, tuple) else (ref,))), False)
            assert not problem and not rec.fallbacks, (op.name, sample.input.shape, sample.kwargs, problem,
                                                       rec.fallbacks)
            ran += 1
    assert ran >= 40, ran


# ----------------------------------------------------------------------------------------------- models
def _istft_same(spec, window, n_fft: int, hop: int):
    """WavTokenizer's inverse STFT (transformers' modeling_wavtokenizer): irfft, window, overlap-add by fold."""
    frames = torch.fft.irfft(spec, n_fft, dim=-1, norm="backward").transpose(1, 2) * window[None, :, None]
    size = (spec.shape[1] - 1) * hop + n_fft
    pad = (n_fft - hop) // 2
    return F.fold(frames, output_size=(1, size), kernel_size=(1, n_fft), stride=(1, hop))[:, 0, 0, pad:-pad]


def test_the_models_patterns_run_on_the_device():
    """FNet's token mixing (fftn over sequence and hidden, real part) and WavTokenizer's inverse STFT
    (polar, irfft, window, fold)."""
    p, err, fallbacks = measure(lambda x: torch.fft.fftn(x, dim=(1, 2)).real, bf(2, 128, 64))
    assert not fallbacks and p >= 0.9999 and err <= 0.01, (p, err, fallbacks)
    mag, phase = bf(1, 12, 65).exp().clamp(max=100), bf(1, 12, 65, seed=1) * 3
    window = torch.hann_window(128)
    p, err, fallbacks = measure(lambda m, a, w: _istft_same(torch.polar(m, a), w, 128, 32), mag, phase, window)
    assert not fallbacks and p >= 0.9999 and err <= 0.02, (p, err, fallbacks)  # (measured 0.99997, 1.0%)


def test_stft_and_istft_on_the_device():
    """torch.stft runs whole on the device (reflection pad, as_strided frames, window, r2c); so does
    torch.istft (c2r, window, the overlap-add: unfold_backward, PyTorch's decomposition into an accumulating
    index_put; its window check: aten.equal, one value read)."""
    x, window = bf(2, 4000), torch.hann_window(400)
    p, err, fallbacks = measure(lambda x, w: torch.stft(x, 400, hop_length=100, window=w, return_complex=True),
                                x, window)
    assert not fallbacks and p >= 0.9999 and err <= 0.01, (p, err, fallbacks)
    spec = torch.stft(x, 400, hop_length=100, window=window, return_complex=True)
    spec = torch.complex(spec.real.bfloat16().float(), spec.imag.bfloat16().float())
    p, err, fallbacks = measure(lambda s, w: torch.istft(s, 400, hop_length=100, window=w, length=4000),
                                spec, window)
    assert not fallbacks and p >= 0.9999 and err <= 0.02, (p, err, fallbacks)


# ----------------------------------------------------------------------------------------------- property
FUZZ = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


@covers(aten._fft_r2c.default, aten._fft_c2c.default, aten._fft_c2r.default)
@FUZZ
@given(shape=st.lists(st.sampled_from([1, 2, 5, 31, 33, 64]), min_size=1, max_size=3).map(tuple),
       kind=st.sampled_from(["fftn", "rfftn", "irfftn", "ifftn"]), norm=st.sampled_from([None, "ortho", "forward"]),
       data=st.data())
def test_transforms_match_the_cpu(shape, kind, norm, data):
    """Any shape, any subset of dimensions (in any order), any norm: the CPU's values (or its error)."""
    dims = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape), unique=True))
    seed = data.draw(st.integers(0, 99))
    x = cbf(*shape, seed=seed) if kind in ("irfftn", "ifftn") or data.draw(st.booleans()) else bf(*shape, seed=seed)

    def fn(t):
        return getattr(torch.fft, kind)(t, dim=dims, norm=norm)
    try:
        ref = fn(x)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            fn(x.to(DEV))
        return
    with ttnn_eager.strict():
        out = fn(x.to(DEV))
    got, ref = _real(out), _real(ref)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    scale = ref.abs().max().item()
    assert (got - ref).abs().max().item() <= 0.02 * scale + 1e-6
    if ref.numel() > 16:
        assert pcc(got, ref) >= 0.9999

