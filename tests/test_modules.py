"""PyTorch's ModuleInfo samples: every torch.nn module class in `module_db` on ttnn:0 against the CPU
(src/ttnn_eager/tools/modules_check.py runs them; docs/modules.md is generated from docs/modules.json, which
`ttnn-eager modules` writes and this test checks is current).

Capped at the results file's samples per module and mode (3: the first ones in module_db's order) to keep
the run near a minute; `ttnn-eager modules --max-samples N` runs more."""
import json

import pytest

from ttnn_eager.tools import modules_check

with open(modules_check.RESULTS) as _f:
    RECORDED = json.load(_f)

# Modules whose samples are expected to fail, with the cause each failure must name (none today: the
# CircularPad modules, which wrote through views, pass since writes through views reach their base).
EXPECTED_FAILURES: dict = {}
MIN_MODULES_WITHOUT_FALLBACKS = 95


@pytest.fixture(scope="module")
def results():
    return modules_check.run(max_samples=RECORDED["max_samples_per_module"])


def test_every_module_class_is_run(results):
    assert len(results) == len(modules_check.module_infos()) >= 100
    assert all(r["samples"] for r in results), [r["module"] for r in results if not r["samples"]]


def test_every_sample_is_right_or_an_expected_failure(results):
    wrong = {r["module"]: r["failures"] for r in results
             if r["passed"] + r["refused"] < r["samples"] and r["module"] not in EXPECTED_FAILURES}
    assert not wrong, wrong


def test_refusals_are_float64_only(results):
    for r in results:
        for f in r["failures"]:
            if f["reason"].startswith(modules_check.REFUSED):
                assert "float64" in f["reason"], (r["module"], f)


def test_expected_failures_fail_for_their_stated_cause(results):
    by_name = {r["module"]: r for r in results}
    for name, cause in EXPECTED_FAILURES.items():
        failures = by_name[name]["failures"]
        assert failures, f"{name} passes now: remove it from EXPECTED_FAILURES"
        assert all(cause in f["reason"] for f in failures), failures


def test_most_modules_run_without_fallbacks(results):
    summary = modules_check.summary(results)
    assert summary["modules_without_fallbacks"] >= MIN_MODULES_WITHOUT_FALLBACKS, summary


def test_results_file_is_current(results):
    """docs/modules.json (and so docs/modules.md) says what this run found: rerun `ttnn-eager modules
    --docs` after changing a lowering."""
    def strip(rs):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rs]
    assert strip(json.loads(json.dumps(results))) == strip(RECORDED["modules"])
