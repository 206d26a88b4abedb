"""docs/zoo.md from the measured JSON (src/ttnn_eager/tools/zoo/report.py, results.py), and the package's paths
(the docs, the worker's sources) found from where the package lies."""
import json
import os
import subprocess
import sys

from ttnn_eager.tools import zoo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_paths_are_the_repositorys_docs_and_sources():
    """The package lies one directory deeper than zoo.py did: its docs/ and the src/ a worker puts first on its
    PYTHONPATH (so that it runs these sources) are still the repository's."""
    assert zoo.DOCS == os.path.join(ROOT, "docs") and zoo.SRC == os.path.join(ROOT, "src")
    assert os.path.exists(zoo.JSON) and os.path.exists(zoo.COMPILE_JSON)
    assert os.path.exists(os.path.join(zoo.SRC, "ttnn_eager", "tools", "zoo", "__main__.py"))


def test_the_worker_entry_point_takes_only_the_worker_flags():
    r = subprocess.run([sys.executable, "-m", "ttnn_eager.tools.zoo", "--compile"], capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src")))
    assert r.returncode == 1 and "usage: ttnn-eager zoo" in r.stderr, r.stderr[-500:]


def test_results_are_saved_whole_and_loaded_back(tmp_path):
    path = str(tmp_path / "z.json")
    assert zoo.load(path) == {"meta": {}, "results": {}}  # (no file yet: an empty sweep)
    data = {"meta": {"entries": 2}, "results": {"b": {"status": "crash"}, "a": {"status": "ran"}}}
    zoo.save(data, path)
    assert zoo.load(path) == data and not os.path.exists(path + ".tmp")
    with open(path) as f:
        assert list(json.load(f)["results"]) == ["a", "b"]  # (sorted keys: diffs stay small)


def test_write_doc_joins_every_sweep(tmp_path):
    """write_doc: the transformers table, the CPU in bfloat16 beside it, torchvision, and the compiled section,
    each from its own JSON."""
    def res(**kw):
        return {"name": "x", "status": "ran", "pearson": 1.0, "same_shapes_dtypes": True, "fallbacks": {}, **kw}
    paths = {}
    for key, data in {"json_path": {"a": res()}, "vision_path": {"torchvision:r": res()},
                      "bfloat16_cpu_path": {"a": res(pearson=0.99)},
                      "compile_path": {"a": res(ttnn_ops=5, ops_ratio=0.5, eager={"pearson": 1.0, "fallbacks": {},
                                                                                   "ttnn_ops": 10})}}.items():
        paths[key] = str(tmp_path / f"{key}.json")
        zoo.save({"meta": {}, "results": data}, paths[key])
    text = zoo.write_doc(str(tmp_path / "zoo.md"), **paths)
    assert open(tmp_path / "zoo.md").read() == text
    assert "## transformers" in text and "## torchvision" in text
    assert "of the 1 types that run, 0 are clean" in text  # (the CPU in bfloat16: 0.99)
    assert "## Compiled" in text and "median **0.500**" in text
