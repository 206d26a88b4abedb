"""PyTorch's OpInfo samples (`op_db`) as the conformance suite (issue 11 item 2): every OpInfo whose op runs
on lowered aten ops, its samples in float32, int64 and bool on ttnn:0 against the CPU (the rules are in
src/ttnn_eager/tools/opinfo.py). One run of the whole suite per session; the tests read its results."""
import collections
import functools

import pytest

from ttnn_eager.tools import opinfo


@functools.cache
def results():
    return opinfo.run()


def test_float64_and_complex_samples_are_refused_with_the_documented_type_error():
    checks = [r for r in results() if r.index == -1]
    assert len(checks) > 50  # most OpInfos support float64 and complex
    bad = [f"{r.op} {r.dtype}: {r.detail}" for r in checks if r.status != "refused"]
    assert not bad, "\n".join(bad)


def test_every_failing_sample_is_listed_with_its_reason():
    failing = {(r.op, r.dtype, r.index): r.detail for r in results() if r.status == "fail"}
    new = [f"{op} {dtype} #{i}: {why}" for (op, dtype, i), why in failing.items()
           if not opinfo.expected_failure(op, dtype, i)]
    assert not new, "samples failing that opinfo.EXPECTED_FAILURES does not list:\n" + "\n".join(new)


def test_listed_failures_still_fail():
    """A listed failure that passes now must leave the list (so docs/ops.md stays true)."""
    by_key = {}
    for r in results():
        by_key.setdefault((r.op, r.dtype, r.index), r.status)
    stale = []
    for (op, dtype, index), why in opinfo.EXPECTED_FAILURES.items():
        matching = [s for (o, d, i), s in by_key.items()
                    if o == op and (dtype == "*" or d == dtype) and (index == "*" or i == index)]
        if not matching or "fail" not in matching:
            stale.append(f"{op} {dtype} #{index}: {why}")
    assert not stale, "listed as failing but none of its samples fails (remove them):\n" + "\n".join(stale)


def test_float32_samples_under_float32_storage():
    """The float32 samples again with configure(float32_storage="float32") (the accurate setting, and what
    "mixed" does to every tensor but a module's parameters): float32 tensors meet ttnn ops whose dtype rules
    differ from bfloat16's (TT-NN's pools, binary_ng's dtype pairs). The same list of known failures holds."""
    results = opinfo.run(storage="float32")
    assert len(results) > 1000 and {r.dtype for r in results} == {"float32"}
    new = [f"{r.op} #{r.index}: {r.detail}" for r in results
           if r.status == "fail" and not opinfo.expected_failure(r.op, r.dtype, r.index)]
    assert not new, "samples failing under float32 storage only:\n" + "\n".join(new)
    statuses = collections.Counter(r.status for r in results)
    print(dict(statuses))  # 1322 pass, 29 refused (samples that make float64 or complex128 tensors)
    assert statuses["pass"] >= 0.97 * len(results), statuses


def test_at_least_99_percent_of_the_other_samples_pass():
    table = opinfo.summary(results())
    run = sum(row["run"] for row in table.values())
    refused = sum(row["refused"] for row in table.values())
    passed = sum(row["pass"] for row in table.values())
    assert run > 1000
    assert passed / (run - refused) >= 0.99, (passed, run - refused, table)


@pytest.mark.parametrize("name", ["add", "matmul", "softmax", "sum", "cat", "gather", "nn.functional.embedding",
                                  "nn.functional.layer_norm", "where", "logical_not", "view", "zeros_like"])
def test_the_core_ops_are_in_the_suite(name):
    assert any(r.op == name and r.status == "pass" for r in results())
