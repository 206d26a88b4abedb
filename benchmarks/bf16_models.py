"""bfloat16 models on ttnn:0 against the same bfloat16 model on the CPU (docs/numerics.md, "bfloat16 models").

Each zoo entry (its shrunk config and inputs: ttnn_eager.tools.zoo.build) is cast to bfloat16 and run on the CPU
and on ttnn:0 under three settings; every figure is the Pearson of all floating outputs against the float32
model on the CPU, with the TT-NN ops of the device forward:

    default                        float32 stored as bfloat16 (so an explicit upcast is not honored), HiFi2
    float32_storage="float32"      in a bfloat16 model only explicit upcasts make float32 tensors: kept exact
    ... and math_fidelity="HiFi4"  bfloat16 matmul operands multiplied exactly, as the CPU does

    PYTHONPATH=src .venv/bin/python benchmarks/bf16_models.py flex_olmo,mixtral,llama
"""
import sys, time, torch, ttnn_eager, warnings
warnings.simplefilter("ignore")
from ttnn_eager.tools import zoo
def flat(o):
    if isinstance(o, torch.Tensor): return [o]
    if isinstance(o, dict) or hasattr(o, "values"): return [t for v in o.values() for t in flat(v)]
    if isinstance(o, (list, tuple)): return [t for v in o for t in flat(v)]
    return []
def pcc(a, b):
    a = torch.cat([x.detach().float().cpu().flatten() for x in flat(a) if x.is_floating_point()]).double()
    b = torch.cat([x.detach().float().cpu().flatten() for x in flat(b) if x.is_floating_point()]).double()
    return torch.corrcoef(torch.stack([a, b]))[0, 1].item()
settings = [dict(), dict(float32_storage="float32"), dict(float32_storage="float32", math_fidelity="HiFi4")]
print("| model | CPU bfloat16 | ttnn:0 default | float32_storage=\"float32\" | and HiFi4 |\n|---|---|---|---|---|")
measured = zoo.load(zoo.JSON)["results"]
for name in sys.argv[1].split(","):
    repair = measured.get(name, {}).get("repaired", False)  # (the config the zoo measured: repaired or plain)
    model, inputs, _ = zoo.build(name, 0, repair)
    if isinstance(inputs, list): inputs = inputs[0]
    row = [name]
    with torch.no_grad():
        ref = model(**inputs)
        m16 = model.to(torch.bfloat16)
        half = {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in inputs.items()}
        row.append(f"{pcc(m16(**half), ref):.6f}")
        for s in settings:
            prev = ttnn_eager.configure(**s)
            try:
                dev = zoo.build(name, 0, repair)[0].to(torch.bfloat16).to("ttnn:0")
                with ttnn_eager.record_ops() as rec:
                    d = dev(**{k: v.to("ttnn:0") for k, v in half.items()})
                    p = pcc(d, ref)
                row.append(f"{p:.6f} ({sum(rec.ttnn.values())} ops)")
            finally:
                ttnn_eager.configure(**prev)
    print("| " + " | ".join(row) + " |", flush=True)
