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


def _result(pearson=1.0, fallbacks=None, ttnn=50, eager_ttnn=100, eager_fallbacks=None, **kw):
    return {"status": "ran", "pearson": pearson, "same_shapes_dtypes": True, "fallbacks": fallbacks or {},
            "ttnn_ops": ttnn, "ops_ratio": round(ttnn / eager_ttnn, 3), "replayed": True, "graph_breaks": 0,
            "recompiles": 0, "eager": {"pearson": 1.0, "fallbacks": eager_fallbacks or {}, "ttnn_ops": eager_ttnn},
            **kw}


def test_compiled_summary_names_what_eager_mode_does_better():
    """The summary says which types are clean eagerly and not compiled, which fallbacks only the compiled run
    has (a fallback eager mode has too is not counted against compile), the ops ratio and who is above eager."""
    results = {"a": _result(ttnn=60), "b": _result(fallbacks={"aten.copy.default": 2}, ttnn=90),
               "c": _result(ttnn=120, replayed=False, graph_breaks=2),
               "d": _result(fallbacks={"aten.nms.default": 1}, eager_fallbacks={"aten.nms.default": 1}),
               "e": {"status": "crash", "error": "killed by SIGSEGV"}, "f": _result(ttnn=100)}
    results["f"]["eager"]["pearson"] = 0.99  # clean compiled, not eagerly: not one of "the clean eagerly"
    for r in results.values():
        r["class_"] = zoo.classify(r)
    s = zoo.compiled_summary(results)
    assert (s["entries"], s["ran"], s["clean"], s["clean_eager"], s["clean_both"]) == (6, 5, 3, 3, 2)
    assert s["clean_eager_not_compiled"] == ["b"] and s["compiled_only_fallbacks"] == {"aten.copy.default": ["b"]}
    assert s["ratio_median"] == 0.9 and s["ratio_max"] == 1.2 and s["above_eager"] == ["c"]
    assert s["not_ran"] == ["e"] and s["not_replayed"] == ["c"] and s["graph_breaks"] == 2
    md = "".join(zoo.compiled_md({"results": results}))
    assert "clean compiled: **2** of the 3 clean eagerly (3 clean compiled in all)" in md and "`aten.copy.default` (1: b)" in md
    assert "median **0.900**, max 1.200; more than eager: c" in md and "did not run: e (crash)" in md
    assert "| c | clean | 1.00000 (1.00000) | 120 / 100 | 1.2 | no | - | 2 | 0 |" in md
    # a type with a note on its compiled result: the note, before the table
    md = "".join(zoo.compiled_md({"results": {**results, "siglip": _result(pearson=0.99)}}))
    assert md.index(f"- **siglip**: {zoo.COMPILED_NOTES['siglip']}") < md.index("| type | class |")
