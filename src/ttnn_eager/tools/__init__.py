"""Programs that use the backend from outside, as a user would: the `ttnn-eager` command and what it runs.

    cli.py                   the `ttnn-eager` command (bert, vision, modules, generate, validate, docs, ...)
    bert.py, vision.py       BERT and torchvision models on ttnn:0 against the CPU
    models.py                Hugging Face families: tiny seeded configs, forward and generate() vs the CPU
    modules_check.py         PyTorch's ModuleInfo samples of every torch.nn module class
    opinfo.py                PyTorch's OpInfo samples of every lowered op
    validate.py, sweep.py    the accuracy report: every lowering at bert-large shapes, a forward op by op
    compare.py               device results read back and compared with float32 PyTorch
    docs.py, layout_probe.py the generated docs (docs/ops.md, bert.md, layouts.md) and the layout probe

Imports: anything of the package; nothing outside tools imports a tool.
"""
