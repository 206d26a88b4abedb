"""`ttnn-eager`: the command line.

    ttnn-eager bert [--model NAME_OR_PATH] [--batch B] [--seq S] [--attn sdpa|eager] [--layers N]
                    [--weight-dtype bfloat16|bfloat8_b] [--math-fidelity F] [--fp32-dest-acc on|off]
                    [--math-approx on|off] [--shadow-numerics hardware|exact] [--json]
    ttnn-eager validate [--layers N] [--batch B] [--seq S] [--attn sdpa|eager|both] [--out DIR]
                    [--no-sweep | --sweep-only] [--sweep-scale K]
                    [--weight-dtype ...] [--math-fidelity ...] ...   accuracy report (Markdown + JSON) of
                    every lowering at bert-large shapes, every op bert-large sends to the backend, at its
                    shapes, and its forward, on whatever device is found
    ttnn-eager ops  [--model NAME_OR_PATH] [--batch B] [--seq S] [--attn sdpa|eager]
                    [--grad no_grad|inference_mode] [--mask ones|padded] [--json]
    ttnn-eager report [--model NAME_OR_PATH] [--task base|masked-lm|sequence-classification|question-answering]
                    [--batch B] [--seq S] [--layers N] [--json] [--png PATH]
    ttnn-eager vision [--model resnet18|resnet50|mobilenet_v2|...|resnext50_32x4d] [--compile]
                    [--batch B] [--size S] [--strict] [--json]
    ttnn-eager modules [--max-samples N] [--docs]   ModuleInfo samples of every torch.nn module -> docs/modules.json
    ttnn-eager docs [--check]        regenerate docs/ops.md, docs/bert.md, docs/layouts.md, docs/modules.md
    ttnn-eager generate [MODEL] [--prompt TEXT_OR_IDS] [--max-new-tokens N] [--cache dynamic|static] [--mesh RxC]
                    [--mode greedy|sample|beam] [--float32-storage bfloat16|float32|mixed] [--strict] [--json]
    ttnn-eager docs [--check] [--models] [--zoo]   regenerate docs/ops.md, docs/bert.md, docs/layouts.md (or
                    check them); --models: docs/models.md, the Hugging Face family matrix (measured); --zoo:
                    docs/zoo.md from docs/zoo.json (and docs/zoo_vision.json)
    ttnn-eager zoo [--vision] [--json PATH] [--only A,B] [--limit N] [--shuffle] [--timeout S] [--redo] [--redo-class C] [--recycle N]
                    [--nice N] [--bfloat16-cpu] [--compile] [--docs]   every transformers model type (--vision: torchvision
                    model) on ttnn:0 against the CPU, in a worker subprocess (crashes and timeouts recorded), resumable;
                    --bfloat16-cpu: the CPU in bfloat16 in place of ttnn:0 (docs/zoo_bfloat16_cpu.json);
                    --compile: each model compiled with backend="ttnn" too, TT-NN ops compiled vs eager
                    (docs/zoo_compile.json)
    ttnn-eager serve [--model PATH] [--device ttnn:0|cpu] [--host 127.0.0.1] [--port N] [--max-memory-percent F]
                    [--max-batch-tokens N] [--block-size N] [--num-blocks N]   transformers' own server (/v1/completions,
                    /v1/chat/completions, streaming) with continuous batching on the device; with no --model, a
                    tiny seeded Llama and a byte tokenizer made here (docs/serving.md)
"""
from __future__ import annotations

import argparse
import json
import sys


def _model_args(p):
    p.add_argument("--model", default=None, help="a name in the local Hugging Face cache or a path "
                   "(default: bert-large-uncased, or its config with seeded random weights)")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--attn", choices=("sdpa", "eager"), default="sdpa")
    p.add_argument("--weight-dtype", choices=("bfloat16", "bfloat8_b"), default="bfloat16",
                   help="device dtype of matmul weights (bfloat8_b: TILE only, ~half the memory)")


def _numerics_args(p):
    p.add_argument("--math-fidelity", choices=("LoFi", "HiFi2", "HiFi3", "HiFi4"), default=None,
                   help="for every op that takes a compute-kernel config (default: each op's own, layout.COMPUTE)")
    p.add_argument("--fp32-dest-acc", choices=("on", "off"), default=None, help="32-bit Dst accumulation")
    p.add_argument("--math-approx", choices=("on", "off"), default=None, help="approximate SFPU functions")
    p.add_argument("--shadow-numerics", choices=("hardware", "exact"), default=None,
                   help="mock devices: the Tensix numerics model (default) or float32 golden functions")
    p.add_argument("--layers", type=int, default=None, help="keep only the first N encoder layers")


def _configure_numerics(args) -> None:
    import ttnn_eager
    onoff = {"on": True, "off": False, None: None}
    ttnn_eager.configure(weight_dtype=args.weight_dtype, math_fidelity=args.math_fidelity,
                         fp32_dest_acc=onoff[args.fp32_dest_acc], math_approx=onoff[args.math_approx],
                         shadow_numerics=args.shadow_numerics)


def cmd_bert(args) -> int:
    import torch
    from . import bert

    _configure_numerics(args)
    model, source = bert.load_bert(args.model, args.attn, layers=args.layers)
    ids, mask = bert.make_inputs(args.batch, args.seq, model.config.vocab_size)
    result = {"model": source, "batch": args.batch, "seq": args.seq, "attn": args.attn,
              "weight_dtype": args.weight_dtype}
    result.update(bert.compare(model, ids, mask, grad_mode=args.grad))
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"model   {source}\ndevice  {result['device']}\ninput   batch {args.batch}, seq {args.seq}, "
          f"attention {args.attn}, {args.grad}, padded positions {int((mask == 0).sum())}, "
          f"matmul weights {args.weight_dtype}")
    print(f"numerics  shadow {result['shadow_numerics']}, matmul {result['math_fidelity']}, "
          f"fp32_dest_acc {result['fp32_dest_acc']}, math_approx {result['math_approx']}")
    print(f"accuracy vs float32 CPU (valid positions):")
    print(f"  last_hidden_state  pearson {result['pcc_last_hidden_state']:.6f}  "
          f"max abs err {result['max_abs_err_last_hidden_state']:.4g}")
    print(f"  pooler_output      pearson {result['pcc_pooler_output']:.6f}  "
          f"max abs err {result['max_abs_err_pooler_output']:.4g}")
    print(f"time    {result['seconds']:.3f} s (first forward, building programs: "
          f"{result['seconds_first_forward']:.3f} s)")
    print("counts (second forward):")
    for key in ("aten_ops", "ttnn_ops", "fallbacks", "layout_conversions", "host_to_device", "device_to_host"):
        print(f"  {key:<19} {result[key]}")
    del torch
    return 0


def cmd_ops(args) -> int:
    import torch
    import ttnn_eager
    from . import bert

    model, source = bert.load_bert(args.model, args.attn)
    model.to("ttnn:0")
    ids, mask = bert.make_inputs(args.batch, args.seq, model.config.vocab_size,
                                 padded=None if args.mask == "padded" else 0)
    if args.mask == "padded" and args.batch == 1:
        mask[0, -(args.seq // 5):] = 0
    with bert.grad_context(args.grad), ttnn_eager.record_ops() as rec:
        model(input_ids=ids.to("ttnn:0"), attention_mask=mask.to("ttnn:0"))
    if args.json:
        print(json.dumps({"model": source, **vars(args), **rec.as_dict()}, indent=1))
        return 0
    print(f"{source}: {sum(rec.aten.values())} aten calls, {len(rec.aten)} distinct ops, "
          f"{sum(rec.fallbacks.values())} fallbacks")
    for op, n in rec.aten.most_common():
        print(f"  {n:6d}  {op}")
    del torch
    return 0


TASKS = {"base": "AutoModel", "masked-lm": "AutoModelForMaskedLM",
         "sequence-classification": "AutoModelForSequenceClassification",
         "question-answering": "AutoModelForQuestionAnswering"}


def load_for_task(name_or_path, task: str, attn: str, layers: int | None = None):
    """A model for `task` from a path or the local cache; with none given, bert-large's config with seeded
    random weights. `layers`: keep only the first N encoder layers."""
    import torch
    import transformers
    from . import bert
    auto = getattr(transformers, TASKS[task])
    extra = {} if layers is None else {"num_hidden_layers": layers}
    few = "" if layers is None else f", first {layers} layers"
    if name_or_path:
        model = auto.from_pretrained(name_or_path, local_files_only=True, attn_implementation=attn, **extra)
        return model.eval(), name_or_path + few
    torch.manual_seed(0)
    return auto.from_config(bert.bert_large_config(attn, **extra)).eval(), \
        f"bert-large-uncased config with seeded random weights{few}"


def cmd_report(args) -> int:
    import torch
    import ttnn_eager
    from . import bert

    model, source = load_for_task(args.model, args.task, args.attn, args.layers)
    model.to("ttnn:0")
    ids, mask = bert.make_inputs(args.batch, args.seq, model.config.vocab_size)
    inputs = {"input_ids": ids.to("ttnn:0"), "attention_mask": mask.to("ttnn:0")}
    with torch.no_grad():
        model(**inputs)  # first forward builds the device programs: not what the report is about
        rep = ttnn_eager.report(model, **inputs)
    if args.png:
        rep.save_png(args.png, title=f"{source} ({args.task}): backend host time by op family")
    if args.json:
        print(json.dumps({"model": source, "task": args.task, "batch": args.batch, "seq": args.seq,
                          **rep.as_dict(), "time_by_family": rep.by_family(), "png": args.png}, indent=1))
        return 0
    print(f"# ttnn_eager report: {source}, task {args.task}, batch {args.batch}, seq {args.seq}\n")
    print(rep.markdown())
    if args.png:
        print(f"chart: {args.png}")
    return 0


def cmd_validate(args) -> int:
    from . import sweep, validate
    _configure_numerics(args)
    attns = ("sdpa", "eager") if args.attn == "both" else (args.attn,)
    dims = None if args.no_sweep else sweep.bert_large(args.batch, args.sweep_scale)
    rep = validate.run(layers=args.layers, batch=args.batch, seq=args.seq, model=args.model, attns=attns,
                       forward=not args.sweep_only, sweep_dims=dims)
    md, js = validate.write(rep, args.out)
    print(validate.markdown(rep))
    print(f"written: {md}, {js}")
    return 0


def _prompt_ids(text: str | None, tokenizer, vocab: int):
    """The prompt as token ids: text through the model's tokenizer, else integers ("12 7 99" or "12,7,99");
    none given: 8 seeded random ids."""
    import torch
    from . import models
    if text is None:
        return models.prompt_ids(vocab), None
    if tokenizer is not None:
        return tokenizer(text, return_tensors="pt").input_ids, text
    try:
        ids = [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise SystemExit(f"ttnn-eager generate: this model has no tokenizer, so the prompt must be token ids "
                         f"(e.g. --prompt '12 7 99'), not {text!r}") from None
    if not ids or min(ids) < 0 or max(ids) >= vocab:
        raise SystemExit(f"ttnn-eager generate: token ids must be in [0, {vocab - 1}] for this model")
    return torch.tensor([ids]), None


def _mesh_shape(spec: str) -> tuple:
    """--mesh ROWSxCOLS; with no card and TTNN_EAGER_DEVICE unset (or auto), the mock board that has the chips."""
    import os
    try:
        shape = tuple(int(p) for p in spec.lower().split("x"))
        assert len(shape) == 2 and min(shape) >= 1
    except (ValueError, AssertionError):
        raise SystemExit(f"ttnn-eager generate: --mesh {spec!r}: expected ROWSxCOLS, such as 1x2 or 2x4") from None
    if os.environ.get("TTNN_EAGER_DEVICE", "auto") in ("", "auto") and not os.path.exists("/dev/tenstorrent"):
        os.environ["TTNN_EAGER_DEVICE"] = "mock-n300" if shape[0] * shape[1] <= 2 else "mock-t3000"
    return shape


def cmd_generate(args) -> int:
    shape = _mesh_shape(args.mesh) if args.mesh else None
    import ttnn_eager
    from . import models

    ttnn_eager.configure(float32_storage=args.float32_storage)
    try:
        model, fam, tokenizer, source = models.load(args.model, args.seed, heads=None if shape is None else shape[1])
    except (OSError, ValueError) as e:
        raise SystemExit(f"ttnn-eager generate: cannot load {args.model!r}: {e}") from None
    if fam.kind == "vision":
        raise SystemExit(f"ttnn-eager generate: {args.model} is a vision model (no generate()); "
                         f"use a causal or seq2seq language model")
    ids, text = _prompt_ids(args.prompt, tokenizer, model.config.vocab_size)
    on_device, mesh_info = None, {}
    if shape is not None:
        try:
            on_device, mesh_info = models.tensor_parallel(model, shape)
        except ValueError as e:
            raise SystemExit(f"ttnn-eager generate: --mesh {args.mesh}: {e}") from None
    try:
        r = models.compare_generate(model, ids, max_new_tokens=args.max_new_tokens, cache=args.cache,
                                    mode=args.mode, strict=args.strict, seed=args.seed, on_device=on_device)
    except ValueError as e:
        raise SystemExit(f"ttnn-eager generate: {e}") from None
    result = {"model": source, "prompt_ids": ids.tolist(), "max_new_tokens": args.max_new_tokens,
              "cache": args.cache, "mode": args.mode, "float32_storage": args.float32_storage,
              "strict": args.strict, **{k: v for k, v in r.items() if k not in ("total_ttnn_by_op",)}}
    if shape is not None:
        totals = r["totals"]
        result.update(mesh=list(shape), **mesh_info, tokens_equal_cpu=r["tokens"] == r["cpu_tokens"],
                      ccl_ops={k: v for k, v in r["total_ttnn_by_op"].items() if k in models.CCL_OPS},
                      collective_pcie_bytes=totals["collective_d2h_bytes"] + totals["collective_h2d_bytes"])
    if tokenizer is not None:
        result["text"] = tokenizer.decode(r["tokens"][0])
        result["cpu_text"] = tokenizer.decode(r["cpu_tokens"][0])
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    per = r["per_token"]
    print(f"model     {source}\nprompt    {text if text is not None else ids.tolist()[0]}")
    print(f"decoding  {args.mode}, {args.cache} cache, float32 stored as {args.float32_storage}"
          f"{', strict' if args.strict else ''}")
    print(f"tokens    {r['tokens'][0]}")
    if "text" in result:
        print(f"text      {result['text']!r}")
    agree = "identical" if r["exact"] else (f"first difference at new token {r['first_divergence']}" if
                                            r["first_divergence"] is not None else "differs")
    print(f"cpu       {r['cpu_tokens'][0]}\nagreement {r['token_agreement']:.3f} of tokens ({agree}); "
          f"logits pearson >= {r['min_step_logits_pearson']:.6f} over {r['steps_compared']} steps")
    print(f"speed     {r['tokens_per_s']:.2f} tokens/s; host time per token {r['host_ms_per_token']:.1f} ms "
          f"(prefill {1e3 * r['prefill_seconds']:.1f} ms)")
    print(f"per token ttnn ops {per.get('ttnn_ops', 0):.1f}, aten ops {per.get('aten_ops', 0):.1f}, "
          f"device->host {per.get('device_to_host', 0):.2f}, host->device {per.get('host_to_device', 0):.2f}, "
          f"fallbacks {per.get('fallbacks', 0):.2f}")
    b = r["cache_buffers"]
    if b["tensors"]:
        print(f"kv cache  {b['tensors']} device tensors, {b['reallocated']} reallocated across "
              f"{b['steps']} forwards" + (" (written in place)" if not b["reallocated"] else ""))
    return 0


def cmd_docs(args) -> int:
    from . import docs
    if args.zoo:  # from the measured JSON
        from . import zoo
        zoo.write_doc()
        return 0
    if args.models:  # measured, so slow (minutes): only on request
        import os
        from . import models
        models.write_doc(os.path.join(docs.DOCS, "models.md"))
        return 0
    stale = docs.write_all(check=args.check)
    if stale:
        print("stale: " + ", ".join(stale) + " (run `ttnn-eager docs`)", file=sys.stderr)
        return 1
    return 0


def vision_models() -> tuple:
    from .vision import MODELS
    return MODELS


def cmd_vision(args) -> int:
    import contextlib

    import ttnn_eager
    from . import vision

    model = vision.load(args.model)
    x = vision.make_input(args.batch, args.size)
    with ttnn_eager.strict() if args.strict else contextlib.nullcontext():
        result = {"model": f"torchvision {args.model} (seeded random weights)", "batch": args.batch,
                  "size": args.size, "strict": args.strict}
        result.update(vision.compare(model, x, compiled=args.compile))
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"model   {result['model']}\ndevice  {result['device']}\ninput   batch {args.batch}, "
          f"3x{args.size}x{args.size}, no_grad{', strict (no CPU fallback allowed)' if args.strict else ''}")
    print("accuracy vs float32 CPU:")
    print(f"  logits  pearson {result['pcc_logits']:.6f}  max abs err {result['max_abs_err_logits']:.4g}  "
          f"top-1 agreement {result['top1_agreement']:.3f}")
    print(f"time    {result['seconds']:.3f} s (first forward, building programs and preparing weights: "
          f"{result['seconds_first_forward']:.3f} s)")
    print(f"peak device memory  {result['peak_device_memory_mib']:.1f} MiB (between ops)")
    print("counts (second forward):")
    for key in ("aten_ops", "ttnn_ops", "fallbacks", "layout_conversions", "host_to_device", "device_to_host"):
        print(f"  {key:<19} {result[key]}")
    return 0


def cmd_modules(args) -> int:
    import json
    import warnings

    from . import docs, modules_check
    warnings.simplefilter("ignore")
    results = modules_check.run(max_samples=args.max_samples)
    modules_check.write(results, args.max_samples)
    if args.docs:
        docs.write_all(bert=False)
    print(json.dumps(modules_check.summary(results)))
    return 0


def cmd_zoo(args) -> int:
    from . import zoo
    source = "torchvision" if args.vision else "transformers"
    if args.bfloat16_cpu and args.vision:
        raise SystemExit("ttnn-eager zoo: --bfloat16-cpu measures the transformers entries only")
    if args.bfloat16_cpu and args.compile:
        raise SystemExit("ttnn-eager zoo: --compile measures ttnn:0, --bfloat16-cpu the CPU: one of them")
    path = args.json or (zoo.BFLOAT16_CPU_JSON if args.bfloat16_cpu else
                         (zoo.COMPILE_VISION_JSON if args.vision else zoo.COMPILE_JSON) if args.compile else
                         zoo.VISION_JSON if args.vision else zoo.JSON)
    names = zoo.entries(source)
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        names = [n if n.startswith(("file:", "torchvision:")) or not args.vision else f"torchvision:{n}"
                 for n in wanted]
    if args.shuffle:  # a partial sweep then measures a fair sample
        import random
        random.Random(0).shuffle(names)
    if args.limit:
        names = names[:args.limit]
    data = zoo.sweep(names, path, timeout=args.timeout, redo=args.redo, recycle=args.recycle, nice=args.nice,
                     source=source, log=lambda m: print(m, file=sys.stderr, flush=True),
                     redo_classes=tuple(args.redo_class or ()), bfloat16_cpu=args.bfloat16_cpu,
                     compiled=args.compile)
    if args.docs:
        zoo.write_doc()
    tot = zoo.totals(data["results"])
    print(json.dumps({"measured": len(data["results"]), **{c: tot[c] for c in zoo.CLASSES}}))
    return 0


def cmd_serve(args) -> int:
    from . import serve
    return serve.main(args)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="ttnn-eager", description="PyTorch on Tenstorrent through TT-NN")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("bert", help="run BERT on ttnn:0 and on the CPU; print accuracy and counts")
    _model_args(p)
    p.add_argument("--grad", choices=("no_grad", "inference_mode"), default="no_grad")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _numerics_args(p)
    p.set_defaults(fn=cmd_bert)
    p = sub.add_parser("validate", help="accuracy report (Markdown + JSON) of every lowering at bert-large "
                       "shapes, of every op a bert-large forward sends, and of the forward, on whatever device "
                       "is found")
    p.add_argument("--model", default=None, help="as for `bert` (default: bert-large-uncased or its config)")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--attn", choices=("sdpa", "eager", "both"), default="both",
                   help="attention implementations whose ops are checked (default both)")
    p.add_argument("--weight-dtype", choices=("bfloat16", "bfloat8_b"), default="bfloat16")
    _numerics_args(p)
    p.add_argument("--out", default="ttnn_eager_validation", help="directory of the report files")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--no-sweep", action="store_true", help="skip the sweep of every lowering")
    which.add_argument("--sweep-only", action="store_true", help="only the sweep of every lowering (no model)")
    p.add_argument("--sweep-scale", type=int, default=1, help="divide the sweep's bert-large dimensions "
                   "(not the batch or head size) by this (default 1: bert-large itself)")
    p.set_defaults(fn=cmd_validate)
    p = sub.add_parser("ops", help="list the aten ops a BERT forward sends to the backend")
    _model_args(p)
    p.add_argument("--grad", choices=("no_grad", "inference_mode"), default="no_grad")
    p.add_argument("--mask", choices=("ones", "padded"), default="ones")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_ops)
    p = sub.add_parser("report", help="coverage report: per aten op, the TT-NN ops, fallbacks, time share")
    _model_args(p)
    p.add_argument("--task", choices=sorted(TASKS), default="base")
    p.add_argument("--layers", type=int, default=None, help="keep only the first N encoder layers")
    p.add_argument("--json", action="store_true")
    p.add_argument("--png", default="ttnn_eager_report.png", help="bar chart of time by op family "
                   "(default: ttnn_eager_report.png; '' for none)")
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser("vision", help="run a torchvision model on ttnn:0 and on the CPU; print accuracy, "
                       "counts, peak device memory")
    p.add_argument("--model", choices=vision_models(), default="resnet18")
    p.add_argument("--compile", action="store_true", help="torch.compile(backend=\"ttnn\") (counts of a replay)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--size", type=int, default=224, help="image height and width (default 224)")
    p.add_argument("--strict", action="store_true", help="forbid the CPU fallback (an error names the op)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(fn=cmd_vision)
    p = sub.add_parser("modules", help="run PyTorch's ModuleInfo samples of every torch.nn module on ttnn:0 "
                       "against the CPU; write docs/modules.json")
    p.add_argument("--max-samples", type=int, default=3, help="samples per module and mode (default 3)")
    p.add_argument("--docs", action="store_true", help="also regenerate the docs (not bert.md)")
    p.set_defaults(fn=cmd_modules)
    p = sub.add_parser("generate", help="generate() on ttnn:0 and on the CPU: tokens, speed, agreement")
    p.add_argument("model", nargs="?", default="llama", help="a local path or cached model name, or a tiny "
                   "seeded config: gpt2, llama, mistral, qwen2, qwen3, phi, phi3, opt, gemma, gemma2, t5, bart "
                   "(default: llama)")
    p.add_argument("--prompt", default=None, help="text (models with a tokenizer) or token ids '12 7 99' "
                   "(default: 8 seeded random ids)")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--cache", choices=("dynamic", "static"), default="dynamic")
    p.add_argument("--mode", choices=("greedy", "sample", "beam"), default="greedy",
                   help="sample: top_k 20, top_p 0.9, temperature 0.8, seeded; beam: 3 beams")
    p.add_argument("--float32-storage", choices=("bfloat16", "float32", "mixed"), default="bfloat16")
    p.add_argument("--strict", action="store_true", help="refuse the CPU fallback")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--mesh", default=None, metavar="ROWSxCOLS", help="tensor parallel over a mesh of chips in this "
                   "process (1x2: an n300, 2x4 or 1x8: a T3000), the attention and MLP projections split over a "
                   "row's chips (Llama-style families)")
    p.set_defaults(fn=cmd_generate)
    p = sub.add_parser("docs", help="regenerate docs/ops.md and docs/bert.md from the registry")
    p.add_argument("--check", action="store_true", help="exit 1 if a generated doc is stale")
    p.add_argument("--models", action="store_true", help="measure every Hugging Face family on the device "
                   "and write docs/models.md (minutes)")
    p.add_argument("--zoo", action="store_true", help="write docs/zoo.md from docs/zoo.json (no measuring)")
    p.set_defaults(fn=cmd_docs)
    p = sub.add_parser("zoo", help="every transformers model type (or torchvision model) on ttnn:0 against the "
                       "CPU, crash- and timeout-proof, resumable JSON (docs/zoo.json)")
    p.add_argument("--vision", action="store_true", help="torchvision's models (docs/zoo_vision.json)")
    p.add_argument("--json", default=None, help="results file (default docs/zoo.json or docs/zoo_vision.json)")
    p.add_argument("--only", default=None, help="comma-separated entries (model types, torchvision names)")
    p.add_argument("--limit", type=int, default=0, help="the first N entries only")
    p.add_argument("--shuffle", action="store_true", help="in a seeded random order (a partial run: a sample)")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per model (default 180)")
    p.add_argument("--redo", action="store_true", help="measure entries already in the JSON again")
    p.add_argument("--redo-class", action="append", help="measure again the entries of this class ('cpu fails', "
                   "'crash', ...; repeatable) measured at another commit")
    p.add_argument("--recycle", type=int, default=20, help="restart the worker every N models (0: never)")
    p.add_argument("--nice", type=int, default=0, help="niceness of the worker")
    p.add_argument("--bfloat16-cpu", action="store_true", help="the CPU in bfloat16 in place of ttnn:0 "
                   "(docs/zoo_bfloat16_cpu.json): what bfloat16 arithmetic alone allows")
    p.add_argument("--compile", action="store_true",
                   help='each model compiled with torch.compile(backend="ttnn") too, classified by its compiled '
                        'result, with graphs, graph breaks, recompiles, compile seconds and TT-NN ops compiled '
                        'against eager (docs/zoo_compile.json, --vision: docs/zoo_compile_vision.json)')
    p.add_argument("--docs", action="store_true", help="then write docs/zoo.md")
    p.set_defaults(fn=cmd_zoo)
    p = sub.add_parser("serve", help="transformers' OpenAI-compatible server (continuous batching) with its model "
                       "on ttnn:0 (docs/serving.md)")
    from . import serve
    serve.add_arguments(p)
    p.set_defaults(fn=cmd_serve)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
