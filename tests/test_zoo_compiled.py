"""`ttnn-eager zoo --compile` (src/ttnn_eager/tools/zoo/compiled.py)."""
import os

from ttnn_eager.tools import zoo

FAKES = os.path.join(os.path.dirname(__file__), "zoo_fakes.py")


def test_compiled_entries_are_measured_against_eager_mode(tmp_path):
    """`ttnn-eager zoo --compile`: each entry compiled with backend="ttnn" as well, classified by its compiled
    result (every call against the CPU), with its graphs, graph breaks, recompiles and TT-NN ops against eager."""
    r = zoo.run_one(f"file:{FAKES}:graph_break", compiled=True)
    assert r["status"] == "ran" and zoo.classify(r) == "clean", r
    assert r["graphs"] == 2 and r["graph_breaks"] == 1 and r["recompiles"] == 0, r
    assert r["eager"]["ttnn_ops"] > 0 and r["ttnn_ops"] > 0 and r["ops_ratio"] == round(
        r["ttnn_ops"] / r["eager"]["ttnn_ops"], 3)
    path = str(tmp_path / "compiled.json")
    data = zoo.sweep([f"file:{FAKES}:tiny"], path, timeout=120, recycle=0, compiled=True)
    tiny = data["results"][f"file:{FAKES}:tiny"]
    assert data["meta"]["compiled"] and tiny["class_"] == "clean" and tiny["graph_breaks"] == 0, tiny
    assert tiny["graphs"] == 1 and tiny["pearson"] > 0.999 and tiny["eager"]["pearson"] > 0.999 and tiny["replayed"]
