"""One entry measured (`run_one`, the worker's unit): build, the CPU forward, the device forward
(`compare`), and when accuracy is low, what explains it (`explain_accuracy`: float32 storage, and the CPU in
bfloat16: `cpu_bfloat16`)."""
from __future__ import annotations

import contextlib
import time

import torch

from .building import build
from .compiled import compare_compiled
from .inputs import _Candidates
from .outputs import PEARSON_MIN, _to, classify, compare_outputs
from .shrinking import FLOAT64


def _unset(model) -> dict:
    """The module attributes that are None now (id(module) -> names): _uncache's reference."""
    return {id(m): [k for k, v in vars(m).items() if v is None] for m in model.modules()}


def _uncache(model, unset: dict) -> None:
    """Caches a CPU forward filled (attributes None in `unset` that now hold a tensor: Mimi's codebook `_embed`)
    are None again, so the device forward fills its own (`model.to` moves only parameters and buffers)."""
    for m in model.modules():
        for k in unset.get(id(m), ()):
            if isinstance(getattr(m, k, None), torch.Tensor):
                setattr(m, k, None)


def compare(model, inputs: dict, device: str = "ttnn:0", compiled: bool = False) -> dict:
    """One forward on the CPU (float32), then one on `device` (the model moved there, float64 tensors stored
    as float32: FLOAT64): compare_outputs plus the CPU fallbacks and the aten and TT-NN op counts of the
    device forward. A device error raises. Both forwards start from one state of the CPU generator, so the
    draws a forward makes on the host (ViLT's torch.multinomial choice of patches; VITS' noise: a ttnn
    device's random factories draw from the CPU generator) are the same draws. Tensors the CPU forward cached
    in module attributes that were None are None again before the device forward. compiled: then the model
    compiled on `device` too (compare_compiled): the result is the compiled one's, eager mode's under "eager"."""
    from ... import config
    from ...features.inventory import record_ops
    rng = torch.random.get_rng_state()
    unset = _unset(model)
    with torch.no_grad():
        ref = model(**inputs)
    _uncache(model, unset)
    model.to(device)
    dinputs = _to(inputs, device)
    torch.random.set_rng_state(rng)
    previous = config.configure(float64=FLOAT64)
    try:
        with torch.no_grad(), record_ops() as rec:
            out = model(**dinputs)
        out = _to(out, "cpu") if not isinstance(out, torch.Tensor) else out.cpu()
        r = compare_outputs(out, ref, inputs.get("attention_mask"))
        r.update(fallbacks=dict(rec.fallbacks.most_common()), aten_ops=sum(rec.aten.values()),
                 ttnn_ops=sum(rec.ttnn.values()))
        if compiled:
            r = compare_compiled(model, dinputs, ref, inputs.get("attention_mask"), rng, eager=r)
    finally:
        config.configure(**previous)
    return r


def _error_text(e: BaseException) -> str:
    """The error's type and first line; for ttnn's TT_FATAL / TT_THROW, its location and its "info:" line."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    fatal = [i for i, ln in enumerate(lines) if "TT_FATAL" in ln or "TT_THROW" in ln]
    if fatal:
        i = fatal[0]
        info = lines[i + 2] if i + 2 < len(lines) and lines[i + 1] == "info:" else ""
        return f"{type(e).__name__}: {lines[i][:200]}{' -- ' + info[:200] if info else ''}"
    return f"{type(e).__name__}: {(lines or [''])[0][:300]}"


def run_one(name: str, device: str = "ttnn:0", seed: int = 0, bfloat16_cpu: bool = False,
            compiled: bool = False) -> dict:
    """One entry, measured: build (a failure: "cpu fails"), the CPU forward (a failure: "cpu fails"), the
    device forward (a failure: "error"); a low Pearson or a shape that differs: explain_accuracy's figures
    (with CPU fallbacks too). A transformers model whose plain shrunk config fails to build or
    to run on the CPU is tried again with shrink's repair rules (then "repaired": true; a failure of both is
    the repaired one's error). bfloat16_cpu: the CPU in bfloat16 (cpu_bfloat16) stands where the device
    would, so the same classes say what bfloat16 arithmetic alone allows (`ttnn-eager zoo --bfloat16-cpu`).
    compiled: the model compiled as well (compare_compiled; `ttnn-eager zoo --compile`), classified by its
    compiled result. Never raises."""
    import gc
    import warnings
    t0 = time.perf_counter()
    rec = {"name": name}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            repairable = not name.startswith(("file:", "torchvision:"))
            for repair in (False, True) if repairable else (False,):
                try:
                    model, inputs, cls = build(name, seed, repair)
                    rec["class"] = cls
                    rec["params"] = sum(p.numel() for p in model.parameters())
                    unset = _unset(model)
                    for k, candidate in enumerate(inputs if isinstance(inputs, _Candidates) else [inputs]):
                        try:
                            with torch.no_grad():
                                model(**candidate)
                            inputs = candidate
                            break
                        except Exception:
                            if k == len(inputs) - 1 or not isinstance(inputs, _Candidates):
                                raise
                    rec["inputs"] = sorted(inputs)
                    _uncache(model, unset)  # (the probe's caches)
                    if repair:
                        rec["repaired"] = True
                    break
                except Exception as e:
                    model = inputs = None
                    if repair or not repairable:
                        rec.update(status="cpu fails", error=_error_text(e))
                        return rec
            if bfloat16_cpu:
                r = cpu_bfloat16(name, inputs, seed, rec.get("repaired", False))
                if "cpu_bfloat16_error" in r:
                    rec.update(status="error", error=r["cpu_bfloat16_error"])
                else:
                    rec.update(status="ran", pearson=r["cpu_bfloat16_pearson"], fallbacks={},
                               same_shapes_dtypes=r["shapes_cpu_bfloat16"],
                               mismatches=r.get("cpu_bfloat16_mismatches", []))
                return rec
            try:
                rec.update(compare(model, inputs, device, compiled))
                rec["status"] = "ran"
                low = rec.get("pearson") is None or not rec["pearson"] >= PEARSON_MIN  # (a fallback's too)
                if not compiled and (classify(rec) in ("low accuracy", "shape/dtype differs") or low):
                    model = None
                    rec.update(explain_accuracy(name, inputs, device, seed, rec.get("repaired", False)))
            except Exception as e:
                from ... import counters
                rec.update(status="error", error=_error_text(e),
                           fallbacks={str(k): v for k, v in counters.fallback_by_op.items()})
    finally:
        rec["seconds"] = round(time.perf_counter() - t0, 2)
        model = inputs = None
        gc.collect()
    return rec


def explain_accuracy(name: str, inputs: dict, device: str, seed: int, repair: bool = False) -> dict:
    """Where a low Pearson comes from: the same forward on `device` with float32 stored as float32 and the
    shadow's arithmetic exact (a lowering that is wrong stays wrong there; bfloat16 storage's loss goes away),
    and the CPU itself in bfloat16 against its float32 (how much bfloat16 alone costs this model; with
    `shapes_cpu_bfloat16` false its outputs have other shapes, which its Pearson leaves out)."""
    from ... import config
    out = {}
    previous = config.configure(float32_storage="float32", shadow_numerics="exact")
    try:
        r = compare(build(name, seed, repair)[0], inputs, device)
        out["pearson_float32_storage"], out["shapes_float32_storage"] = r["pearson"], r["same_shapes_dtypes"]
    except Exception as e:  # noqa: BLE001 -- a diagnosis only
        out["pearson_float32_storage_error"] = _error_text(e)
    finally:
        config.configure(**previous)
    return {**out, **cpu_bfloat16(name, inputs, seed, repair)}


def cpu_bfloat16(name: str, inputs: dict, seed: int = 0, repair: bool = False) -> dict:
    """The CPU itself in bfloat16 (`model.to(torch.bfloat16)`, floating inputs too) against its float32: how
    much bfloat16 arithmetic alone costs this model (`shapes_cpu_bfloat16` false: its outputs have other
    shapes, which its Pearson leaves out; `cpu_bfloat16_error`: the model's code does not run in bfloat16)."""
    out = {}
    try:
        model = build(name, seed, repair)[0]
        rng = torch.random.get_rng_state()  # (one generator state for both forwards, as compare's)
        with torch.no_grad():
            ref = model(**inputs)
            torch.random.set_rng_state(rng)
            with _nms_in_float32():
                low = model.to(torch.bfloat16)(**_bfloat16(inputs))
        r = compare_outputs(low, ref, inputs.get("attention_mask"))
        out["cpu_bfloat16_pearson"] = r["pearson"]
        # (compare_outputs leaves outputs of other shapes out of its Pearson: VITS' bfloat16 durations make a
        # shorter waveform, and the Pearson left is the 2-value sequence_lengths' 1.0)
        shapes = [m for m in r["mismatches"] if ": dtype " not in m]  # (its outputs are bfloat16: not news)
        out["shapes_cpu_bfloat16"] = not shapes
        if shapes:
            out["cpu_bfloat16_mismatches"] = shapes
    except Exception as e:  # noqa: BLE001
        out["cpu_bfloat16_error"] = _error_text(e)
    return out


def _bfloat16(x):
    """x's floating-point tensors in bfloat16, through dicts, lists and tuples (a detector's list of images)."""
    if isinstance(x, torch.Tensor):
        return x.to(torch.bfloat16) if x.is_floating_point() else x
    if isinstance(x, dict):
        return {k: _bfloat16(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_bfloat16(v) for v in x)
    return x


@contextlib.contextmanager
def _nms_in_float32():
    """torchvision's CPU nms and roi_align refuse bfloat16: within this, `torchvision.ops.boxes.nms` (what
    batched_nms and the detectors call) gets its boxes and scores in float32, and the R-CNN poolers' roi_align
    its features and boxes (its result back in the features' dtype), so a detector runs in bfloat16 on the
    CPU. The rest stays bfloat16, batched_nms's class offsets added to the boxes too (as on the device).
    Without torchvision: nothing."""
    try:
        import torchvision.ops.boxes as box_ops
        import torchvision.ops.poolers as poolers
    except ImportError:
        yield
        return
    nms, roi_align = box_ops.nms, poolers.roi_align

    def roi_align32(x, boxes, *args, **kwargs):
        boxes = boxes.float() if isinstance(boxes, torch.Tensor) else [b.float() for b in boxes]
        return roi_align(x.float(), boxes, *args, **kwargs).to(x.dtype)
    box_ops.nms = lambda boxes, scores, iou_threshold: nms(boxes.float(), scores.float(), iou_threshold)
    poolers.roi_align = roi_align32
    try:
        yield
    finally:
        box_ops.nms, poolers.roi_align = nms, roi_align
