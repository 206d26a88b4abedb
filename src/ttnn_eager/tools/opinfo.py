"""PyTorch's own conformance data: the OpInfo sample inputs of `op_db`, run on `ttnn:0` against the CPU.

Which OpInfos: every entry of `torch.testing._internal.common_methods_invocations.op_db` whose op, run on
its first float32 sample on the CPU, reaches only aten ops that have a lowering here (recorded with a
TorchDispatchMode; a lowering for complex tensors counts: torch.fft.irfft of a float32 input reaches
_to_copy to complex64 and _fft_c2r) -- so the sample runs on the device, not on the CPU fallback -- or whose
own aten op (`aten_name`: matmul, whose 1-D samples become aten.dot) has a lowering. The selection follows the
registry: a new lowering brings its OpInfos in.

Each selected OpInfo runs its first `CAP` samples in float32, one integer dtype and bool (those the OpInfo
supports on the CPU), on the CPU and on `ttnn:0`, and the results are compared:

    floating results    bfloat16 tolerance: |device - cpu| <= ATOL * max(1, max |cpu|) + RTOL * |cpu|
                        (float inputs are rounded to bfloat16 first, so what is measured is the op)
    integer, bool       exact
    comparison ops      inputs not rounded (values closer than bfloat16's resolution), run under
                        configure(float32_storage="float32"), exact
    an error            the device raises PyTorch's exception type

Samples refused by design -- float64 and complex128 tensors (the device has neither; complex64 is stored as real
pairs, tests/test_complex.py runs its samples) -- must raise the documented TypeError ("ttnn devices do not
support ..."): one float64 and one complex128 sample per OpInfo that supports them, and any sample that
converts to such a dtype, count as *refused*. Complex results are compared with the floating tolerance.

`run(storage="float32")` runs the float32 samples again under configure(float32_storage="float32") (the
accurate setting: float32 tensors meet ttnn ops whose dtype rules differ from bfloat16's); the same list of
known failures holds for it (tests/test_opinfo.py).

`EXPECTED_FAILURES` is the one list of samples known to fail, each with its reason; tests/test_opinfo.py
fails when a sample fails that is not listed, or a listed one passes; `ttnn-eager docs` lists them in
docs/ops.md. `python -m ttnn_eager.tools.opinfo` prints samples run / passed / refused per op family.
"""
from __future__ import annotations

import collections
import dataclasses
import itertools

import torch
from torch.utils._pytree import tree_flatten, tree_map

DEV = "ttnn:0"
CAP = 4                   # samples per OpInfo and dtype (the whole suite runs in < 60 s on 2 cores)
ATOL, RTOL = 0.03, 0.02   # bfloat16: 8 bits of mantissa, a few roundings per op
INT_DTYPE = torch.int64
COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}
REFUSED = "ttnn devices do not support"
UNDEFINED_VALUES = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_permuted", "empty_strided"}
CPU_ARGS = {"tensor_split"}  # tensor arguments PyTorch requires on the CPU (indices_or_sections)

TIES = ("a bool tensor of 8000 elements is all ties: the values equal the CPU's, the indices are the stable order "
        "(ties by index), while the CPU's unstable sort orders ties its own way (its indices differ from its own "
        "stable=True result too)")

# (OpInfo name[.variant], dtype name or "*", sample index or "*") -> why it fails
EXPECTED_FAILURES: dict = {
    ("sort", "bool", 0): TIES,
    ("argsort", "bool", 0): TIES,
}


@dataclasses.dataclass
class Result:
    op: str          # OpInfo name[.variant]
    family: str      # the lowering module of its aten ops (elementwise, reduction, views, ...)
    dtype: str       # sample dtype
    index: int       # sample index (-1: the float64/complex128 refusal check)
    status: str      # "pass", "refused", "fail"
    detail: str = ""


def full_name(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def expected_failure(name: str, dtype: str, index: int):
    for key in ((name, dtype, index), (name, dtype, "*"), (name, "*", index), (name, "*", "*")):
        if key in EXPECTED_FAILURES:
            return EXPECTED_FAILURES[key]
    return None


# ----------------------------------------------------------------------------------------------- selection
def _recorded_ops(op, sample) -> set:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.add(func)
            return func(*args, **(kwargs or {}))

    seen: set = set()
    with Record():
        op(sample.input, *sample.args, **sample.kwargs)
    return seen


def select() -> list:
    """[(OpInfo, family)] of the OpInfos whose first float32 sample reaches only lowered aten ops. Scanning
    all of op_db takes ~10 s: the choice is cached per torch version and set of lowerings."""
    import hashlib
    import json
    import os

    from torch.testing._internal.common_methods_invocations import op_db

    from ..core.registry import COMPLEX
    from ..lowerings import REGISTRY
    from ..device.runtime import cache_dir
    lowered = {**COMPLEX, **REGISTRY}  # (an op lowered both ways: its real lowering)
    key = hashlib.sha1(" ".join([torch.__version__, *sorted(map(str, REGISTRY)),
                                 *sorted(f"complex:{op}" for op in COMPLEX)]).encode()).hexdigest()[:16]
    path = os.path.join(cache_dir(), f"opinfo-selection-{key}.json")
    try:
        with open(path) as f:
            names = dict(json.load(f))
        return [(op, names[full_name(op)]) for op in op_db if full_name(op) in names]
    except (OSError, ValueError, KeyError):
        pass
    chosen = _scan(op_db, lowered)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + f".tmp{os.getpid()}", "w") as f:
        json.dump([(full_name(op), family) for op, family in chosen], f)
    os.replace(path + f".tmp{os.getpid()}", path)
    return chosen


def _scan(op_db, REGISTRY) -> list:
    import warnings
    chosen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in op_db:
            _choose(op, REGISTRY, chosen)
    return chosen


# an OpInfo reaching several families counts in the first (others: by name)
_FAMILY_ORDER = ("fft", "matmul", "normalization", "reduction", "indexing", "embedding", "attention",
                 "elementwise", "factory", "views")


def _choose(op, REGISTRY, chosen: list) -> None:
    if torch.float32 not in op.supported_dtypes("cpu"):
        return
    try:
        ops = _recorded_ops(op, _samples(op, torch.float32, 1)[0])
    except Exception:  # noqa: BLE001 - an OpInfo whose sample does not run on this CPU build
        return
    own = getattr(torch.ops.aten, op.aten_name or "", None)
    own = [getattr(own, ov) for ov in own.overloads()] if isinstance(own, torch._ops.OpOverloadPacket) else []
    own = [o for o in own if o in REGISTRY]
    if ops and (all(o in REGISTRY for o in ops) or own):
        families = {REGISTRY[o].fn.__module__.rsplit(".", 1)[-1] for o in [*ops, *own] if o in REGISTRY}
        ranked = [f for f in _FAMILY_ORDER if f in families] + sorted(families - set(_FAMILY_ORDER))
        chosen.append((op, ranked[0]))


# ----------------------------------------------------------------------------------------------- one sample
def _dtypes(op) -> list:
    supported = op.supported_dtypes("cpu")
    return [d for d in (torch.float32, INT_DTYPE, torch.bool) if d in supported]


def _samples(op, dtype, cap: int = CAP) -> list:
    """The first `cap` samples, from the OpInfo's generator itself (OpInfo.sample_inputs wraps it in an
    iterator that inspects the call stack and reseeds every generator PyTorch knows of, per sample: most of
    the suite's time)."""
    torch.random.default_generator.manual_seed(0)
    return list(itertools.islice(op.sample_inputs_func(op, "cpu", dtype, False), cap))


def _bf16(x):
    if isinstance(x, torch.Tensor) and x.dtype == torch.float32:
        return x.to(torch.bfloat16).float()
    return x


def _to_device(x):
    return x.to(DEV) if isinstance(x, torch.Tensor) else x


def _call(op, sample):
    return op(sample.input, *sample.args, **sample.kwargs)


def _compare(out, ref, exact: bool, values: bool = True) -> str:
    outs, _ = tree_flatten(out)
    refs, _ = tree_flatten(ref)
    if len(outs) != len(refs):
        return f"{len(outs)} outputs, expected {len(refs)}"
    for o, r in zip(outs, refs):
        if not isinstance(r, torch.Tensor):
            if isinstance(o, torch.Tensor) or o != r and not (isinstance(r, float) and abs(o - r) <= ATOL * max(1, abs(r))):
                return f"got {o!r}, expected {r!r}"
            continue
        if not isinstance(o, torch.Tensor):
            return f"got {type(o).__name__}, expected a tensor"
        if o.dtype != r.dtype or o.shape != r.shape:
            return f"got {o.dtype} {list(o.shape)}, expected {r.dtype} {list(r.shape)}"
        if r.device.type == "cpu" and o.device.type != "cpu" and o.device.type != "ttnn":
            return f"on {o.device}"
        if not values:  # torch.empty and friends: uninitialized memory on either side
            continue
        got = o.detach().cpu()
        r = r.detach()
        if (r.dtype.is_floating_point or r.dtype.is_complex) and not exact:
            finite = r[torch.isfinite(r)]
            scale = max(1.0, finite.abs().max().item()) if finite.numel() else 1.0
            ok = torch.isclose(got, r, rtol=RTOL, atol=ATOL * scale, equal_nan=True)
            if not ok.all():
                err = (got - r).abs()[~ok].max().item()
                return f"max error {err:.3g} at scale {scale:.3g} ({int((~ok).sum())} of {r.numel()} elements)"
        elif not torch.equal(got, r) and not (r.is_floating_point() and torch.equal(got.isnan(), r.isnan())
                                              and torch.equal(got[~r.isnan()], r[~r.isnan()])):
            return f"{int((got != r).sum())} of {r.numel()} elements differ"
    return ""


def run_sample(op, sample, storage: str | None = None) -> tuple:
    """(status, detail) of one sample: its result on ttnn:0 against the CPU's ("CPU fallback": a pass on
    which some aten op of the sample ran on the counted CPU fallback). storage: run under
    configure(float32_storage=storage) (compared as the default's float32 samples are)."""
    from .. import config, counters
    exact = op.name in COMPARISONS
    if not exact:
        sample = sample.transform(_bf16)
    if op.name in UNDEFINED_VALUES:  # only shapes and dtypes matter (some samples are themselves torch.empty)
        sample = sample.transform(lambda x: torch.zeros_like(x) if isinstance(x, torch.Tensor) else x)
    try:
        ref = _call(op, sample)
        ref_error = None
    except Exception as e:  # noqa: BLE001 - PyTorch's exception is the specification
        ref, ref_error = None, e
    setting = "float32" if exact else storage
    previous = config.configure(float32_storage=setting) if setting else None
    fallbacks = counters.counts["fallbacks"]
    try:
        moved = sample.transform(_to_device)
        if op.name in CPU_ARGS:
            moved.args = sample.args
        out = _call(op, moved)
        error = None
    except Exception as e:  # noqa: BLE001
        out, error = None, e
    finally:
        if previous is not None:
            config.settings.update(previous)
    if error is not None and isinstance(error, TypeError) and REFUSED in str(error):
        return "refused", str(error).split(";")[0]
    if ref_error is not None:
        if error is not None and isinstance(error, type(ref_error)):
            return "pass", f"raises {type(ref_error).__name__} as PyTorch"
        got = "no error" if error is None else f"{type(error).__name__}: {str(error).splitlines()[0][:150]}"
        return "fail", f"PyTorch raises {type(ref_error).__name__}, device: {got}"
    if error is not None:
        return "fail", f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
    problem = _compare(out, ref, exact, values=op.name not in UNDEFINED_VALUES)
    if problem:
        return "fail", problem
    return "pass", "CPU fallback" if counters.counts["fallbacks"] > fallbacks else ""


def refusal_checks(op) -> list:
    """The float64 and complex128 samples of `op` (one each, when it supports them): moving one to the device
    must raise the documented TypeError."""
    results = []
    supported = op.supported_dtypes("cpu")
    for dtype in (torch.float64, torch.complex128):
        if dtype not in supported:
            continue
        samples = _samples(op, dtype, 1)
        tensors = [t for t in tree_flatten((samples[0].input, samples[0].args, samples[0].kwargs))[0]
                   if isinstance(t, torch.Tensor) and t.dtype == dtype] if samples else []
        if not tensors:
            continue
        try:
            tensors[0].to(DEV)
            status, detail = "fail", f"{dtype} accepted"
        except TypeError as e:
            status, detail = ("refused", str(e).split(";")[0]) if REFUSED in str(e) else ("fail", str(e))
        results.append((str(dtype).split(".")[1], status, detail))
    return results


# ----------------------------------------------------------------------------------------------- the suite
def run(cap: int = CAP, chosen: list | None = None, storage: str | None = None) -> list:
    """Every sample of every selected OpInfo: a list of Result. storage ("float32", "mixed"): the float32
    samples alone, each run under configure(float32_storage=storage), no refusal checks."""
    import warnings
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op, family in (chosen if chosen is not None else select()):
            name = full_name(op)
            for dtype in _dtypes(op) if storage is None else [d for d in _dtypes(op) if d == torch.float32]:
                dname = str(dtype).split(".")[1]
                try:
                    samples = _samples(op, dtype, cap)
                except Exception:  # noqa: BLE001
                    continue
                for i, sample in enumerate(samples):
                    status, detail = run_sample(op, sample, storage)
                    results.append(Result(name, family, dname, i, status, detail))
            for dname, status, detail in refusal_checks(op) if storage is None else ():
                results.append(Result(name, family, dname, -1, status, detail))
    return results


def summary(results: list) -> dict:
    """family -> Counter(run, pass, fallback (passes that used the CPU fallback), refused, fail, expected)."""
    table: dict = collections.defaultdict(collections.Counter)
    for r in results:
        row = table[r.family]
        row["run"] += 1
        row[r.status] += 1
        if r.status == "pass" and r.detail == "CPU fallback":
            row["fallback"] += 1
        if r.status == "fail" and expected_failure(r.op, r.dtype, r.index):
            row["expected"] += 1
    return dict(table)


def failures_md() -> str:
    """The section of docs/ops.md listing every sample known to fail (EXPECTED_FAILURES) and why."""
    out = ["\n## OpInfo samples that fail\n\n",
           "PyTorch's OpInfo samples (`op_db`) run on `ttnn:0` against the CPU by tests/test_opinfo.py "
           "(src/ttnn_eager/tools/opinfo.py: which OpInfos, which dtypes, the tolerances). Samples that fail, and "
           "why (the test fails when another sample fails, or one of these passes):\n\n"]
    if not EXPECTED_FAILURES:
        return "".join(out) + "None.\n"
    out.append("| OpInfo | dtype | sample | why |\n|---|---|---|---|\n")
    for (name, dtype, index), why in sorted(EXPECTED_FAILURES.items(), key=lambda kv: tuple(map(str, kv[0]))):
        out.append(f"| `{name}` | {dtype} | {index} | {why} |\n")
    return "".join(out)


def main() -> None:
    import time
    start = time.perf_counter()
    results = run()
    table = summary(results)
    print(f"{'family':<14} {'run':>5} {'pass':>5} {'(fallback)':>10} {'refused':>8} {'fail':>5} {'(listed)':>9}")
    total = collections.Counter()
    for family in [*sorted(table), "total"]:
        row = total if family == "total" else table[family]
        if family != "total":
            total.update(row)
        print(f"{family:<14} {row['run']:>5} {row['pass']:>5} {row['fallback']:>10} {row['refused']:>8} "
              f"{row['fail']:>5} {row['expected']:>9}")
    other = total["run"] - total["refused"]
    print(f"pass rate of non-refused samples: {total['pass'] / max(other, 1):.2%}  ({time.perf_counter() - start:.0f} s)")
    for r in results:
        if r.status == "fail":
            mark = "listed" if expected_failure(r.op, r.dtype, r.index) else "NEW"
            print(f"  [{mark}] {r.op} {r.dtype} #{r.index}: {r.detail}")


if __name__ == "__main__":
    main()
