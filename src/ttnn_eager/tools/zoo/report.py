"""docs/zoo.md from the measured JSON files (`zoo_md`, `write_doc`) and their paths."""
from __future__ import annotations

import collections
import os

from .compiled import compiled_md
from .notes import NOTES
from .outputs import CLASSES, _fmt_p, classify
from .shrinking import BATCH, MASKED, SEQ, SHRINK
from .results import DOCS, load


def totals(results: dict) -> collections.Counter:
    return collections.Counter(r.get("class_") or classify(r) for r in results.values())


def fallback_table(results: dict) -> list:
    """(aten op, architectures where it fell back, total calls), most architectures first."""
    archs, calls = collections.Counter(), collections.Counter()
    for r in results.values():
        for op, n in (r.get("fallbacks") or {}).items():
            archs[op] += 1
            calls[op] += n
    return [(op, archs[op], calls[op]) for op, _ in archs.most_common()]


def _section(title: str, data: dict, source: str) -> list:
    results, meta = data.get("results", {}), data.get("meta", {})
    tot = totals(results)
    ran_cpu = sum(v for k, v in tot.items() if k != "cpu fails")
    commits = collections.Counter(r.get("commit", "?") for r in results.values())
    out = [f"## {title}\n\n",
           f"{len(results)} of {meta.get('entries', len(results))} entries measured, at commit(s) "
           f"{', '.join(f'`{c}` ({n})' for c, n in commits.most_common())}; torch {meta.get('torch')}, "
           f"{source} {meta.get(source)}; a worker subprocess restarted after every crash or timeout "
           f"({meta.get('timeout_s')} s) and every {meta.get('recycle')} entries.\n\n",
           "| class | entries | share of those whose CPU forward runs |\n|---|---|---|\n"]
    for c in CLASSES:
        share = f"{100 * tot[c] / ran_cpu:.1f}%" if c != "cpu fails" and ran_cpu else "-"
        out.append(f"| {c} | {tot[c]} | {share} |\n")
    out.append(f"| **total** | {len(results)} | {ran_cpu} run on the CPU |\n\n")
    fb = fallback_table(results)
    if fb:
        out.append("CPU fallbacks by the number of architectures where they happen (the ops to lower):\n\n"
                   "| aten op | architectures | calls in one forward, summed |\n|---|---|---|\n")
        out += [f"| `{op}` | {n} | {c} |\n" for op, n, c in fb]
        out.append("\n")
    errors = collections.Counter(r.get("error", "")[:90] for r in results.values()
                                 if (r.get("class_") or classify(r)) in ("error", "crash", "timeout"))
    if errors:
        out.append("Errors, crashes and timeouts by their text (first 90 characters):\n\n"
                   "| entries | error |\n|---|---|\n")
        out += [f"| {n} | {e.replace('|', '/')} |\n" for e, n in errors.most_common()]
        out.append("\n")
    notes = [n for n in sorted(results) if n in NOTES]
    if notes:
        out.append("Notes:\n\n" + "".join(f"- **{n}**: {NOTES[n]}\n" for n in notes) + "\n")
    out.append("| entry | class | result | Pearson | max abs err | fallbacks (aten op x calls) | aten / TT-NN ops "
               "| error or difference |\n|---|---|---|---|---|---|---|---|\n")
    for name in sorted(results):
        r = results[name]
        fbs = ", ".join(f"`{k}` x{v}" for k, v in (r.get("fallbacks") or {}).items()) or "0"
        ops = f"{r['aten_ops']} / {r['ttnn_ops']}" if "ttnn_ops" in r else "-"
        err = (r.get("error") or "; ".join(r.get("mismatches") or [])).replace("|", "/").replace("\n", " ")
        if "pearson_float32_storage" in r or "cpu_bfloat16_pearson" in r:
            same = "" if r.get("shapes_float32_storage", True) else " (shapes differ there too)"
            low = "" if r.get("shapes_cpu_bfloat16", True) else " (other output shapes)"
            err = (f"with float32 storage and exact arithmetic: {_fmt_p(r.get('pearson_float32_storage'))}{same}; "
                   f"the CPU in bfloat16: {_fmt_p(r.get('cpu_bfloat16_pearson'))}{low}. " + err).strip()
        err_s = err[:200] + ("..." if len(err) > 200 else "")
        maxe = f"{r['max_abs_err']:.3g}" if r.get("max_abs_err") is not None else "-"
        out.append(f"| {name.split(':', 1)[-1]} (`{r.get('class', '?')}`) | {r.get('class_') or classify(r)} | "
                   f"{r.get('status')} | {_fmt_p(r.get('pearson'))} | {maxe} | {fbs} | {ops} | {err_s} |\n")
    return out


def bfloat16_cpu_md(data: dict, cpu: dict) -> list:
    """The paragraph that compares ttnn:0 with the CPU in bfloat16 on the same entries (`--bfloat16-cpu`)."""
    dev, ref = data.get("results", {}), cpu.get("results", {})
    both = [n for n in dev if dev[n].get("status") == "ran" and n in ref]
    if not both:
        return []
    cls = {n: ref[n].get("class_") or classify(ref[n]) for n in both}
    clean_dev = {n for n in both if (dev[n].get("class_") or classify(dev[n])) == "clean"}
    clean_cpu = {n for n in both if cls[n] == "clean"}
    counts = collections.Counter(cls.values())
    either = len(clean_dev | clean_cpu)

    def names(s):
        return ", ".join(sorted(s)) or "none"
    return [f"\n**The CPU in bfloat16 on the same entries** (`ttnn-eager zoo --bfloat16-cpu`, "
            f"docs/zoo_bfloat16_cpu.json: `model.to(torch.bfloat16)` and its floating inputs on the CPU where "
            f"`ttnn:0` stands above, against the same float32 forward): of the {len(both)} types that run, "
            f"{counts['clean']} are clean ({100 * counts['clean'] / len(both):.1f}%; `ttnn:0`: {len(clean_dev)}), "
            f"{counts['low accuracy']} low accuracy, {counts['shape/dtype differs']} shape/dtype differs, "
            f"{counts['error']} do not run in bfloat16 (their code mixes dtypes). Clean on either: {either} "
            f"({100 * either / len(both):.1f}%): bfloat16 arithmetic done as well as by either leaves the rest "
            f"below Pearson 0.999. Clean on the CPU in bfloat16 but not on `ttnn:0` "
            f"({len(clean_cpu - clean_dev)}): {names(clean_cpu - clean_dev)}. Clean on `ttnn:0` but not on the "
            f"CPU in bfloat16 ({len(clean_dev - clean_cpu)}): {names(clean_dev - clean_cpu)}.\n"]


def zoo_md(data: dict, vision: dict | None = None, bfloat16_cpu: dict | None = None,
           compiled: dict | None = None) -> str:
    s = SHRINK
    out = ["<!-- generated by `ttnn-eager zoo --docs` / `ttnn-eager docs --zoo` (src/ttnn_eager/tools/zoo/) "
           "from docs/zoo.json (docs/zoo_vision.json, docs/zoo_bfloat16_cpu.json, docs/zoo_compile.json); "
           "do not edit by hand -->\n\n",
           "# The zoo: every transformers model type (and torchvision model) on `ttnn:0`\n\n",
           "Each model type of `transformers.models.auto.modeling_auto.MODEL_MAPPING_NAMES`, its default config "
           f"shrunk generically (hidden {s['hidden']}, {s['heads']} heads, {s['kv_heads']} key-value heads, head "
           f"size {s['head_dim']}, {s['layers']} layers, feed-forward {s['ffn']}, vocabulary {s['vocab']}, "
           f"{s['experts']} experts with {s['per_token']} per token; sub-configs too), seeded weights, forward "
           f"under `no_grad` on input_ids ({BATCH}, {SEQ}) with the second row's last {MASKED} positions masked "
           "(pixel_values / input_values for models that take no input_ids), first in float32 on the CPU, then on "
           "`ttnn:0` (default storage: float32 as bfloat16). Every output tensor is compared on the valid "
           "positions: shape and dtype, Pearson (the lowest over the outputs), max absolute error.\n\n",
           "Classes: **clean** = 0 CPU fallbacks, Pearson >= 0.999 and every output's shape and dtype the "
           "CPU's; **fallback ops** = ran, with CPU fallbacks; **low accuracy** = no fallback, Pearson < 0.999; "
           "**shape/dtype differs** = an output's shape or dtype is not the CPU's (a wrong answer); **error** = the "
           "device forward raised; **crash** = the process died (TT_FATAL, signal); **timeout**; **cpu fails** "
           "= the model cannot be built or run this way on the CPU (not counted in the shares).\n\n",
           "Reproduce: `ttnn-eager zoo [--vision] [--only a,b] [--timeout S] [--docs]` (resumes from the JSON; "
           "`--redo` measures again).\n\n"]
    out += _section("transformers", data, "transformers")
    out += bfloat16_cpu_md(data, bfloat16_cpu or {})
    if vision and vision.get("results"):
        out.append("\n")
        out += _section("torchvision (classification 2x3x96x96, ViT/Swin/MaxViT 224; video 2x3x8x112x112; "
                        "segmentation and detection 2 images 3x96x96, 10 classes)", vision, "torchvision")
        out.append("\nDetection outputs are boxes chosen by thresholds and non-maximum suppression on random "
                   "weights: a low Pearson there says that some other boxes were kept, not that an op is wrong.\n")
    out += compiled_md(compiled or {})
    return "".join(out)


JSON = os.path.join(DOCS, "zoo.json")
VISION_JSON = os.path.join(DOCS, "zoo_vision.json")
BFLOAT16_CPU_JSON = os.path.join(DOCS, "zoo_bfloat16_cpu.json")  # `ttnn-eager zoo --bfloat16-cpu`
COMPILE_JSON = os.path.join(DOCS, "zoo_compile.json")  # `ttnn-eager zoo --compile`
COMPILE_VISION_JSON = os.path.join(DOCS, "zoo_compile_vision.json")  # `ttnn-eager zoo --compile --vision`


def write_doc(path: str | None = None, json_path: str = JSON, vision_path: str = VISION_JSON,
              bfloat16_cpu_path: str = BFLOAT16_CPU_JSON, compile_path: str = COMPILE_JSON) -> str:
    text = zoo_md(load(json_path), load(vision_path), load(bfloat16_cpu_path), load(compile_path))
    with open(path or os.path.join(DOCS, "zoo.md"), "w") as f:
        f.write(text)
    return text
