"""Comparing a zoo entry's outputs with the CPU's and classifying the result (src/ttnn_eager/tools/zoo/outputs.py)."""
import torch

from ttnn_eager.tools import zoo


def test_compare_outputs_finds_shape_and_dtype_differences():
    ref = {"a": torch.randn(2, 24, 8), "b": torch.arange(6)}
    good = zoo.compare_outputs({"a": ref["a"] + 1e-4, "b": ref["b"].clone()}, ref)
    assert good["same_shapes_dtypes"] and good["pearson"] > 0.9999 and good["max_abs_err"] < 2e-4
    bad = zoo.compare_outputs({"a": ref["a"][:, :23], "b": ref["b"].int()}, ref)
    assert not bad["same_shapes_dtypes"] and len(bad["mismatches"]) == 2
    mask = torch.ones(2, 24, dtype=torch.long)
    mask[1, -6:] = 0
    noisy = ref["a"].clone()
    noisy[1, -6:] = 1e6  # masked positions are not compared
    assert zoo.compare_outputs({"a": noisy, "b": ref["b"]}, ref, mask)["pearson"] > 0.9999
    assert zoo.classify({"status": "ran", "same_shapes_dtypes": False, "pearson": 1.0}) == "shape/dtype differs"
    assert zoo.classify({"status": "ran", "same_shapes_dtypes": True, "pearson": 0.9999, "fallbacks": {}}) == "clean"


def test_empty_outputs_of_the_same_shape_are_equal():
    """A detector keeping no box on either side (FCOS, RetinaNet v2 with random weights) returns the CPU's
    outputs exactly; one that keeps boxes where the CPU keeps none is a shape difference."""
    none = [{"boxes": torch.zeros(0, 4), "scores": torch.zeros(0), "labels": torch.zeros(0, dtype=torch.long)}]
    same = zoo.compare_outputs([{k: v.clone() for k, v in none[0].items()}], none)
    assert same["same_shapes_dtypes"] and same["pearson"] == 1.0 and zoo.classify(
        dict(same, status="ran", fallbacks={})) == "clean"
    some = [{"boxes": torch.ones(1, 4), "scores": torch.ones(1), "labels": torch.ones(1, dtype=torch.long)}]
    assert zoo.classify(dict(zoo.compare_outputs(some, none), status="ran", fallbacks={})) == "shape/dtype differs"
