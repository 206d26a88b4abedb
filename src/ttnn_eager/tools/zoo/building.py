"""The zoo's entries (`entries`) and how each is built (`build`): a transformers model type from its
shrunk config with seeded weights, a torchvision model with its images or clip, or a `file:PATH:FUNCTION`
entry (tests' fakes)."""
from __future__ import annotations

import inspect
import re
import sys

import torch

from .configs import _config
from .inputs import _Candidates, _transformers_inputs
from .shrinking import BATCH, VISION_SIZE


def entries(source: str = "transformers") -> list:
    if source == "transformers":
        from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
        return sorted(MODEL_MAPPING_NAMES)
    if source == "torchvision":
        import torchvision
        return sorted(f"torchvision:{n}" for n in torchvision.models.list_models()
                      if _vision_kind(n) in VISION_KINDS)
    raise ValueError(f"source must be transformers or torchvision, not {source!r}")


# torchvision's model modules whose inputs are simple (a batch of images; a clip for video)
VISION_KINDS = ("classification", "segmentation", "video", "detection")


def _vision_kind(name: str) -> str:
    import torchvision.models as tvm
    for kind, mod in (("segmentation", tvm.segmentation), ("video", tvm.video), ("detection", tvm.detection),
                      ("optical_flow", tvm.optical_flow), ("quantization", tvm.quantization)):
        if name in tvm.list_models(module=mod):
            return kind
    return "classification"


def _build_transformers(model_type: str, seed: int = 0, repair: bool = False):
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    class_name = MODEL_MAPPING_NAMES[model_type]
    if isinstance(class_name, (tuple, list)):
        class_name = class_name[0]
    cfg_class = CONFIG_MAPPING[model_type]
    cfg = _config(cfg_class, repair)
    torch.manual_seed(seed)
    model_class = getattr(transformers, class_name)
    if repair:
        cfg = _sub_config(cfg, model_class)
    model = (_construct(model_class, cfg) if repair else model_class(cfg)).eval()
    inputs = _Candidates(_transformers_inputs(model, cfg, seed))
    if repair and _tuple_outputs(model):
        model.config.return_dict = False
        inputs = _Candidates(dict(c, return_dict=True) for c in sorted(inputs, key=lambda c: "pixel_values" not in c))
    return model, inputs, class_name


MISSING = {"num_key_value_heads": lambda c: c.num_attention_heads, "dropout_rate": lambda c: 0.0}


def _construct(model_class, cfg):
    """model_class(cfg), and when that fails on a setting in MISSING that a (sub)config lacks (MoonshineStreaming's
    decoder config has no num_key_value_heads, T5Gemma2's text config no dropout_rate, both read by their modeling
    modules: transformers bugs the released configs do not hit), that setting on the configs of that class --
    the key-value heads as many as the heads (multi-head attention), dropout 0.0 -- and again (a repair rule)."""
    def configs(c):
        yield c
        for k in getattr(type(c), "sub_configs", {}) or {}:
            sub = getattr(c, k, None)
            if sub is not None and hasattr(sub, "to_dict"):
                yield from configs(sub)
    for _ in range(len(MISSING) + 1):
        try:
            return model_class(cfg)
        except AttributeError as e:
            m = re.search(r"'(\w+)' object has no attribute '(\w+)'", str(e))
            if not m or m.group(2) not in MISSING:
                raise
            for c in configs(cfg):
                if type(c).__name__ == m.group(1):
                    setattr(c, m.group(2), MISSING[m.group(2)](c))
    return model_class(cfg)


def _tuple_outputs(model) -> bool:
    """Whether the model's forward builds its output object from a field its language model's output class
    does not declare (Llama-4: `image_outputs=outputs.image_outputs` of a MoeCausalLMOutputWithPast, so the
    dict path always raises: a transformers bug). Such a model (a repair rule) returns tuples: config.return_dict
    False, and every input candidate return_dict=True (capture_outputs pops the keyword, and its own to_tuple
    of a False one would fail on the forward's tuple), the candidates with an image first (the field is the
    image's: the vision tower runs too)."""
    import dataclasses
    lm = getattr(model, "language_model", None)
    if lm is None:
        return False
    try:
        src = inspect.getsource(type(model).forward)
        ann = str(inspect.signature(type(lm).forward).return_annotation)
    except (OSError, TypeError, ValueError):
        return False
    mod = sys.modules.get(type(lm).__module__)
    cls = next((c for c in (getattr(mod, n, None) for n in re.findall(r"\w+", ann))
                if isinstance(c, type) and dataclasses.is_dataclass(c)), None)
    if cls is None:
        return False
    declared = {f.name for f in dataclasses.fields(cls)}
    return any(f not in declared for f in re.findall(r"\b\w+=outputs\.(\w+)\b", src))


def _sub_config(cfg, model_class):
    """The config a model class is built from: a composite config's sub-config when the class's
    config_class is that sub-config's class (MusicGen: the auto mapping's MusicgenModel is the decoder alone,
    built from MusicgenConfig.decoder), else `cfg` (a repair rule)."""
    want = getattr(model_class, "config_class", None)
    if want is None or isinstance(cfg, want):
        return cfg
    for k in getattr(type(cfg), "sub_configs", {}) or {}:
        sub = getattr(cfg, k, None)
        if isinstance(sub, want):
            return sub
    return cfg


def _build_torchvision(name: str, seed: int = 0):
    import torchvision
    from .. import vision
    kind = _vision_kind(name)
    torch.manual_seed(seed)
    kw = {"weights": None}
    if kind in ("detection", "segmentation"):
        kw.update(weights_backbone=None, num_classes=10)
    if kind == "detection" and not name.startswith("ssd"):  # (R-CNN, RetinaNet, FCOS resize to 800-1333
        kw.update(min_size=VISION_SIZE, max_size=VISION_SIZE)  # by default; SSDs have their fixed size)
    model = torchvision.models.get_model(name, **kw).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # random batch-norm statistics (vision.load's reason)
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=g) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 0.5 + 0.75)
    size = VISION_SIZE
    if kind == "classification" and name.startswith(("vit_", "swin", "maxvit")):
        size = 224  # fixed positions / windows: the native size
    x = vision.make_input(BATCH, size, seed)
    if kind == "video":  # 8 frames of 112x112; MViT and S3D: their native 16 x 224x224 (fixed position tables
        frames, side = (16, 224) if name.startswith(("mvit", "s3d")) else (8, 112)  # and a final 2x7x7 pool)
        x = torch.randn(BATCH, 3, frames, side, side, generator=torch.Generator().manual_seed(seed))
    if kind == "detection":
        return model, {"images": list(x)}, type(model).__name__
    import inspect  # (the input's name: x, or input for LRASPP)
    return model, {next(iter(inspect.signature(model.forward).parameters)): x}, type(model).__name__


def _build_file(spec: str, seed: int = 0):
    """file:/path/to/module.py:function -- the function returns (model, inputs) (tests' fake entries)."""
    import importlib.util
    path, fn = spec[len("file:"):].rsplit(":", 1)
    sp = importlib.util.spec_from_file_location("zoo_entry_" + fn, path)
    mod = importlib.util.module_from_spec(sp)
    sp.loader.exec_module(mod)
    model, inputs = getattr(mod, fn)()
    return model, inputs, type(model).__name__


def build(name: str, seed: int = 0, repair: bool = False):
    """(CPU model in eval mode with seeded weights, its inputs (a dict of keyword arguments), class name).
    repair: a transformers model type's config with shrink's repair rules (_config)."""
    if name.startswith("file:"):
        return _build_file(name, seed)
    if name.startswith("torchvision:"):
        return _build_torchvision(name.split(":", 1)[1], seed)
    return _build_transformers(name, seed, repair)
