"""The zoo (`ttnn-eager zoo`, src/ttnn_eager/tools/zoo/) end to end: a sampled subset of transformers families
through the worker's own unit (run_one), what explains a low Pearson (float32 storage, the CPU in bfloat16),
and every op the sweeps sent to the fallback. Each part of the package has its own tests too:
tests/test_zoo_shrinking.py, test_zoo_inputs.py, test_zoo_outputs.py, test_zoo_worker.py, test_zoo_compiled.py,
test_zoo_report.py."""
import os

import pytest
import torch

from ttnn_eager.tools import zoo

FAKES = os.path.join(os.path.dirname(__file__), "zoo_fakes.py")


@pytest.mark.parametrize("model_type", ["bert", "llama", "qwen3_moe"])
def test_sampled_families_clean(model_type):
    """A few families, sampled from the zoo: a dense encoder, a rotary decoder with grouped-query
    attention, a mixture of experts -- through the worker's unit, with issue 23's inputs."""
    r = zoo.run_one(model_type)
    assert r["status"] == "ran", r.get("error")
    assert r["same_shapes_dtypes"], r["mismatches"]
    assert r["fallbacks"] == {}
    assert r["pearson"] >= zoo.PEARSON_MIN
    assert r["ttnn_ops"] > 10 and r["aten_ops"] > 10
    assert zoo.classify(r) == "clean"


def test_a_low_pearson_is_explained_by_float32_storage_and_the_cpus_own_bfloat16():
    """explain_accuracy: with float32 stored as float32 and exact arithmetic a right lowering matches the CPU
    (a wrong one would not), and the CPU's own bfloat16 forward shows what bfloat16 costs the model."""
    model, inputs, _ = zoo.build("llama")
    inputs = inputs[0] if isinstance(inputs, zoo._Candidates) else inputs
    r = zoo.explain_accuracy("llama", inputs, "ttnn:0", 0)
    assert r["pearson_float32_storage"] > 0.999999, r
    assert 0.99 < r["cpu_bfloat16_pearson"] < 0.99999 and r["shapes_cpu_bfloat16"], r


def test_a_detector_runs_in_bfloat16_on_the_cpu_for_explain_accuracy():
    """torchvision's CPU nms and roi_align refuse bfloat16, and a detector's input is a list of images: without
    _nms_in_float32 and _bfloat16 the R-CNNs had no CPU bfloat16 figure. Within it the model runs with every
    box in bfloat16 (the detections' own dtype) and the 100 best boxes of each image; outside, torchvision's
    functions are its own again."""
    import torchvision.ops.boxes as box_ops
    import torchvision.ops.poolers as poolers
    nms, roi_align = box_ops.nms, poolers.roi_align
    model, inputs, _ = zoo.build("torchvision:fasterrcnn_mobilenet_v3_large_320_fpn")
    with torch.no_grad():
        ref = model(**inputs)
        low_inputs = zoo._bfloat16(inputs)
        assert [x.dtype for x in low_inputs["images"]] == [torch.bfloat16] * 2
        model = model.to(torch.bfloat16)
        with pytest.raises(RuntimeError, match="BFloat16"):
            model(**low_inputs)
        with zoo._nms_in_float32():
            low = model(**low_inputs)
    assert (box_ops.nms, poolers.roi_align) == (nms, roi_align)
    r = zoo.compare_outputs(low, ref)
    assert [m for m in r["mismatches"] if "dtype" not in m] == [], r
    assert all(d["boxes"].dtype == torch.bfloat16 and d["boxes"].shape == (100, 4) for d in low)
    # the sorted scores (0.1 +- 0.002) agree; which boxes hold them is bfloat16's tie order (zoo.NOTES)
    assert zoo._pearson(low[0]["scores"].float(), ref[0]["scores"]) > 0.9, r


# ----------------------------------------------------------------------------------------------- fallback fidelity
# The aten ops the CPU fallback served in the committed sweeps of earlier commits (git log -- docs/zoo.json
# docs/zoo_vision.json), since lowered: checked still, whichever path serves them now. (Not here: the FFT ops,
# whose OpInfos are fft.* -- tests/test_fft.py -- _weight_norm_interface -- tests/test_dispatch.py -- and
# col2im, which no OpInfo reaches.)
SERVED_BEFORE = (
    "aten._embedding_bag.default", "aten._euclidean_dist.default", "aten._unique2.default",
    "aten._upsample_bilinear2d_aa.default", "aten.acos.default", "aten.argmax.default", "aten.as_strided.default",
    "aten.asinh.default", "aten.atanh.default",
    "aten.bucketize.Tensor", "aten.ceil.default", "aten.convolution.default", "aten.cummax.default",
    "aten.cummin.default", "aten.flip.default", "aten.floor.default", "aten.grid_sampler_2d.default",
    "aten.histc.default", "aten.im2col.default", "aten.index.Tensor", "aten.index_select.default",
    "aten.linalg_solve_triangular.default", "aten.logsumexp.default", "aten.max_pool2d_with_indices.default",
    "aten.nan_to_num.default", "aten.nonzero.default", "aten.polar.default", "aten.pow.Scalar",
    "aten.prod.dim_int", "aten.repeat_interleave.Tensor", "aten.round.default", "aten.scatter_reduce.two",
    "aten.sort.default", "aten.unfold.default", "aten.unique_consecutive.default",
    "aten.upsample_bilinear2d.default", "aten.upsample_linear1d.default", "aten.upsample_nearest2d.default")


def _served_by_the_fallback() -> list:
    """The aten ops the CPU fallback served in the committed sweeps (docs/zoo.json, docs/zoo_vision.json),
    now and before (SERVED_BEFORE)."""
    ops = set(SERVED_BEFORE)
    for path in (zoo.JSON, zoo.VISION_JSON):
        ops |= {op for r in zoo.load(path)["results"].values() for op in (r.get("fallbacks") or {})}
    return sorted(op for op in ops if op.startswith("aten."))


# aten packets whose OpInfos are named after the Python function (every variant of the name)
OPINFO_NAMES = {"index": "__getitem__", "convolution": ("nn.functional.conv1d", "nn.functional.conv2d"),
                "upsample_bilinear2d": "nn.functional.interpolate", "upsample_linear1d": "nn.functional.interpolate",
                "upsample_nearest2d": "nn.functional.interpolate", "upsample_bicubic2d": "nn.functional.interpolate",
                "im2col": "nn.functional.unfold", "col2im": "nn.functional.fold", "scatter_reduce": "scatter_reduce",
                "_weight_norm_interface": "_weight_norm_interface", "roll": "roll", "polar": "polar",
                "_unique2": "unique", "_embedding_bag": "nn.functional.embedding_bag", "_euclidean_dist": "cdist",
                "_upsample_bilinear2d_aa": "nn.functional.interpolate",
                "max_pool2d_with_indices": "nn.functional.max_pool2d"}


def _opinfos(packet: str) -> list:
    from torch.testing._internal.common_methods_invocations import op_db
    names = OPINFO_NAMES.get(packet)
    if names is None:
        return [op for op in op_db if (op.aten_name or op.name) == packet and not op.variant_test_name]
    names = (names,) if isinstance(names, str) else names
    return [op for op in op_db if op.name in names]


@pytest.mark.parametrize("aten_op", _served_by_the_fallback())
def test_every_op_the_sweep_sent_to_the_fallback_gives_the_cpus_answer(aten_op):
    """Issue 23 item 6: each op the zoo's forwards ran on the CPU fallback, on PyTorch's OpInfo samples
    (float32, int64, bool where the op takes them; the first 3 of each), gives the CPU's dtypes, shapes and
    values on ttnn:0 (on the fallback or a lowering, whichever serves it now)."""
    from ttnn_eager.tools import opinfo
    ops = _opinfos(aten_op.split(".")[1])
    if not ops:
        pytest.skip(f"{aten_op}: no OpInfo samples (the routing ops: tests/test_moe.py FALLBACK_TABLE; weight_norm: tests/test_dispatch.py)")
    ran = 0
    for op in ops:
        for dtype in opinfo._dtypes(op):
            for i, sample in enumerate(opinfo._samples(op, dtype, cap=3)):
                if opinfo.expected_failure(opinfo.full_name(op), str(dtype).split(".")[-1], i):
                    continue
                status, detail = opinfo.run_sample(op, sample)
                assert status in ("pass", "refused"), f"{op.name} {dtype} sample {i}: {detail}"
                ran += 1
    assert ran > 0


def test_cpu_bfloat16_outputs_of_other_shapes_are_reported():
    """VITS' CPU bfloat16 forward makes a shorter waveform (a duration of 8.0186 frames is 8.0 in bfloat16): its
    Pearson then covers the outputs of the CPU's shape only (there the 2-value lengths: 1.0), so
    explain_accuracy says the shapes differ and docs/zoo.md shows it."""
    name = f"file:{FAKES}:rounded_length"
    model, inputs, _ = zoo.build(name)
    r = zoo.explain_accuracy(name, inputs, "ttnn:0", 0)
    assert r["shapes_cpu_bfloat16"] is False and r["cpu_bfloat16_pearson"] == 1.0, r
    assert r["shapes_float32_storage"] and r["pearson_float32_storage"] == 1.0, r
    r.update(name=name, status="ran", pearson=0.5, same_shapes_dtypes=True, fallbacks={})
    assert "the CPU in bfloat16: 1.00000 (other output shapes)" in zoo.zoo_md({"results": {name: r}})


def test_the_cpu_in_bfloat16_stands_in_for_the_device(tmp_path):
    """`ttnn-eager zoo --bfloat16-cpu`: the same entries with the CPU in bfloat16 where ttnn:0 stands (no
    device op), classified alike; docs/zoo.md then says what bfloat16 arithmetic alone allows against the
    device's classes."""
    import ttnn_eager
    path = str(tmp_path / "cpu.json")
    names = [f"file:{FAKES}:tiny", f"file:{FAKES}:rounded_length"]
    ttnn_eager.reset_stats()
    r = zoo.run_one(names[1], bfloat16_cpu=True)
    assert ttnn_eager.stats()["ttnn_ops"] == 0
    assert r["status"] == "ran" and zoo.classify(r) == "shape/dtype differs", r  # 8.0186 frames are 8.0 in bf16
    cpu = zoo.sweep(names, path, timeout=60, recycle=0, bfloat16_cpu=True)
    assert cpu["meta"]["reference"] == "the CPU in bfloat16"
    assert cpu["results"][names[0]]["class_"] == "clean" and cpu["results"][names[1]]["class_"] == "shape/dtype differs"
    device = {"results": {n: {"name": n, "status": "ran", "pearson": 1.0, "same_shapes_dtypes": True,
                              "fallbacks": {}} for n in names}}
    md = zoo.zoo_md(device, None, cpu)
    assert "of the 2 types that run, 1 are clean (50.0%; `ttnn:0`: 2)" in md, md
    assert f"Clean on `ttnn:0` but not on the CPU in bfloat16 (1): {names[1]}" in md


