"""The zoo: every model type of the installed transformers (and every torchvision model) on `ttnn:0` against
float32 PyTorch on the CPU -- `ttnn-eager zoo`, docs/zoo.json and docs/zoo.md (issue 23).

Each model type is built from its default config shrunk generically (`shrink`: hidden 64, 4 heads, 2
key-value heads, head size 16, 2 layers, feed-forward 128, vocabulary 1024, 4 experts with 2 per token),
with seeded weights, and run forward under `no_grad` on input_ids (2, 24) whose second row has its last 6
positions masked, first on the CPU in float32, then on `ttnn:0`. A result (`compare`): shapes and dtypes of
every output tensor equal to the CPU's, Pearson and max error of the float outputs (valid positions),
the CPU fallbacks (which aten ops), aten and TT-NN op counts, the error text.

A model can kill its process (a TT_FATAL, a SIGSEGV) or hang, so the models run one after another in a
worker subprocess (`python -m ttnn_eager.tools.zoo --worker`: one entry name a line in, one JSON line
out) that the parent restarts after a crash or a timeout, recording the crash (signal or exit code, the
last line of its stderr) as that model's result. Results are written to the JSON after every model, so an
interrupted sweep resumes where it stopped.

    entries(source)          the names a sweep runs ("transformers", "torchvision")
    build(name)              (CPU model, inputs, class name)
    compare(model, inputs)   one forward on the CPU and on ttnn:0, compared (compiled=True: compiled too,
                             compare_compiled: `ttnn-eager zoo --compile`, docs/zoo_compile.json)
    run_one(name)            the worker's unit: build + compare, errors as results
    sweep(names, path, ...)  the crash- and timeout-proof driver, resumable JSON
    classify(result)         its failure class (CLASSES)
    zoo_md(data...)          docs/zoo.md

The package's modules, by what they do: shrinking (the sizes, `shrink`), configs (a type's config and its
repairs), inputs (inputs per modality), building (entries, `build`), outputs (comparing outputs, the failure
classes), compiled (`--compile` and its section of docs/zoo.md), run (`run_one`, `compare`), worker (the subprocess
driver), results (the JSON), notes and report (docs/zoo.md). Every name is re-exported here:
`from ttnn_eager.tools import zoo; zoo.build(...)`.
"""
from .shrinking import (  # noqa: F401
    _consistent, _consistent_moe, _dicts, _each_config, _EXPERTS, _FFN, _first_layers, _H, _HEAD_DIM, _HEADS,
    _is_int, _KV, _LAYERS, _LORA, _PER_TOKEN, _split, _tied, _towers, BATCH, FLOAT64, MASKED, NECKS, PAIR_SIZE, SEQ,
    SHRINK, shrink, VISION_SIZE)
from .configs import (  # noqa: F401
    _config, _derived, _indexed_kinds, _layer_kinds, _modeling_source, _mrope, _pretrained_config, _read_tokens,
    _rope_heads, _rotary_floor)
from .inputs import (  # noqa: F401
    _Candidates, _find, _find_any, _ids, _image_text, _masking_noise, _more_inputs, _patch_tokens, _required,
    _source, _transformers_inputs, AUDIO_FRAMES, IMAGE_TOKENS, MELS)
from .building import (  # noqa: F401
    _build_file, _build_torchvision, _build_transformers, _construct, _sub_config, _tuple_outputs, _vision_kind,
    build, entries, MISSING, VISION_KINDS)
from .outputs import (  # noqa: F401
    _fmt_p, _pearson, _to, _valid, CLASSES, classify, compare_outputs, leaves, PEARSON_MIN)
from .compiled import (  # noqa: F401
    compare_compiled, COMPILED_CALLS, compiled_md, compiled_summary)
from .run import (  # noqa: F401
    _bfloat16, _error_text, _nms_in_float32, _uncache, _unset, compare, cpu_bfloat16, explain_accuracy, run_one)
from .results import (  # noqa: F401
    DOCS, load, save, SRC)
from .worker import (  # noqa: F401
    _commit, STARTUP_TIMEOUT, sweep, Worker, worker_main)
from .notes import (  # noqa: F401
    COMPILED_NOTES, NOTES)
from .report import (  # noqa: F401
    _section, BFLOAT16_CPU_JSON, bfloat16_cpu_md, COMPILE_JSON, COMPILE_VISION_JSON, fallback_table,
    JSON, totals, VISION_JSON, write_doc, zoo_md)
