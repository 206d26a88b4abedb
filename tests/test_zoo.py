"""The zoo (`ttnn-eager zoo`, src/ttnn_eager/tools/zoo.py): a sampled subset of transformers families through
the worker's own unit (run_one), the comparison helpers, and the driver surviving a worker that dies or
hangs (fake entries in tests/zoo_fakes.py), recording it, and resuming from its JSON."""
import os

import pytest
import torch

from ttnn_eager.tools import zoo

FAKES = os.path.join(os.path.dirname(__file__), "zoo_fakes.py")


def test_shrink_sets_issue_sizes_and_sub_configs():
    d = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
         "intermediate_size": 11008, "vocab_size": 32000, "head_dim": 128, "num_local_experts": 8,
         "num_experts_per_tok": 2, "layer_types": ["full", "sliding"] * 16, "n_inner": None,
         "rope_theta": 10000.0, "text_config": {"model_type": "x", "d_model": 512, "num_layers": 6}}
    s = zoo.shrink(d)
    assert (s["hidden_size"], s["num_attention_heads"], s["num_key_value_heads"], s["num_hidden_layers"],
            s["intermediate_size"], s["vocab_size"], s["head_dim"], s["num_local_experts"],
            s["num_experts_per_tok"]) == (64, 4, 2, 2, 128, 1024, 16, 4, 2)
    assert s["layer_types"] == ["full", "sliding"] and s["n_inner"] is None and s["rope_theta"] == 10000.0
    assert (s["text_config"]["d_model"], s["text_config"]["num_layers"]) == (64, 2)


def test_repair_drops_key_value_sharing_that_two_layers_cannot_hold():
    """Gemma3n's last 15 of 35 layers reuse earlier layers' caches, one producer per layer type needed before
    them: its plain shrunk config fails on the CPU; the repair rules share none (and change nothing else)."""
    from transformers import Gemma3nTextConfig
    d = Gemma3nTextConfig().to_dict()
    plain, repaired = zoo.shrink(d), zoo.shrink(d, repair=True)
    assert plain["num_kv_shared_layers"] == 15 and repaired["num_kv_shared_layers"] == 0
    with pytest.raises(ValueError, match="layer types producing a cache"):
        Gemma3nTextConfig(**plain).kv_sharing_modes
    assert Gemma3nTextConfig(**repaired).kv_sharing_modes == [None, None]



def test_repair_fills_expert_counts_left_none_and_keeps_a_moe_layer():
    """dots1's default leaves its expert counts None (its experts cannot be built); LFM2-MoE's 2 dense layers
    would leave no MoE layer in 2: the repair rules give the shrunk counts and 1 dense layer."""
    from transformers import Dots1Config, Lfm2MoeConfig
    d = Dots1Config().to_dict()
    plain, repaired = zoo.shrink(d), zoo.shrink(d, repair=True)
    assert plain["n_routed_experts"] is None and plain["num_experts_per_tok"] is None
    assert (repaired["n_routed_experts"], repaired["num_experts_per_tok"], repaired["n_shared_experts"]) == (4, 2, 1)
    assert Lfm2MoeConfig(**zoo.shrink(Lfm2MoeConfig().to_dict(), repair=True)).num_dense_layers == 1


def test_repair_keeps_latent_head_dim_the_sum_of_its_parts():
    """Mistral4's rotary part is head_dim x partial_rotary_factor (128 x 0.5 = qk_rope 64): head_dim stays
    qk_nope + qk_rope (32), so the rotary part is qk_rope_head_dim (16) again."""
    from transformers import Mistral4Config
    d = Mistral4Config().to_dict()
    assert zoo.shrink(d)["head_dim"] == 16
    r = zoo.shrink(d, repair=True)
    assert r["head_dim"] == r["qk_nope_head_dim"] + r["qk_rope_head_dim"] == 32


def test_repair_gives_sub_configs_and_none_settings_what_the_model_reads():
    """DBRX's attention reads attn_config.rope_theta and clamps by clip_qkv; Qwen4-Exp's indexer sizes, Step3p7's
    sliding window and Cohere Compass's per-kind rotary are None / empty by default."""
    from transformers import CohereCompassTextConfig, DbrxConfig, Qwen4ExpTextConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    Step3p5Config = CONFIG_MAPPING["step3p5"]
    attn = DbrxConfig(**zoo.shrink(DbrxConfig().to_dict(), repair=True)).attn_config
    assert attn.rope_theta == 10000.0 and attn.clip_qkv == 8.0
    q = zoo.shrink(Qwen4ExpTextConfig().to_dict(), repair=True)
    assert (q["indexer_n_heads"], q["indexer_kv_heads"], q["indexer_budget"] // q["indexer_compress_ratio"]) == (4, 1, 4)
    assert zoo.shrink(Step3p5Config().to_dict(), repair=True)["sliding_window"] == 16
    c = CohereCompassTextConfig(**zoo.shrink(CohereCompassTextConfig().to_dict(), repair=True))
    assert c.rope_parameters["full_attention"]["rope_type"] == "default"


def test_repair_places_layer_kinds_and_layer_indices_in_the_two_layers():
    """LFM2-MoE's layer_types None and GraniteMoeHybrid's all-linear default get one layer of each kind the
    model masks (_layer_kinds); Zamba2's hybrid_layer_ids name the kept hybrid layer; Zamba's 2 layers are
    both hybrid (its shared block is tied from the first hybrid layer to the others)."""
    from transformers import GraniteMoeHybridConfig, Lfm2MoeConfig, Zamba2Config, ZambaConfig
    lfm = zoo._layer_kinds(zoo.shrink(Lfm2MoeConfig().to_dict(), repair=True), Lfm2MoeConfig)
    assert lfm["layer_types"] == ["conv", "full_attention"]
    granite = zoo._layer_kinds(zoo.shrink(GraniteMoeHybridConfig().to_dict(), repair=True), GraniteMoeHybridConfig)
    assert granite["layer_types"] == ["linear_attention", "full_attention"]
    assert zoo.shrink(Zamba2Config().to_dict())["hybrid_layer_ids"][0] == 6
    assert zoo.shrink(Zamba2Config().to_dict(), repair=True)["hybrid_layer_ids"] == [1]
    assert zoo.shrink(ZambaConfig().to_dict(), repair=True)["layers_block_type"] == ["hybrid", "hybrid"]


def test_repair_shrinks_aliases_of_widths_and_codebook_ranges():
    """xLSTM's embedding_dim / num_blocks and its qk_dim_factor (its config rounds to 64, its layers do not);
    BLT's hidden_size_global; dots3's adapter widths; Apertus 1.5's codebook token ranges in the vocabulary."""
    from transformers import BltConfig, xLSTMConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    Apertus1p5Config, Dots3NoteConfig = CONFIG_MAPPING["apertus1p5"], CONFIG_MAPPING["dots3_note"]
    x = xLSTMConfig(**zoo.shrink(xLSTMConfig().to_dict(), repair=True))
    assert (x.embedding_dim, x.num_blocks, x.qk_dim, x.qk_head_dim) == (64, 2, 64, 16)
    assert zoo.shrink(BltConfig().to_dict(), repair=True)["encoder_config"]["hidden_size_global"] == 64
    Dots3NoteConfig(**zoo.shrink(Dots3NoteConfig().to_dict(), repair=True))  # (validates adapter = hidden)
    assert zoo.shrink(Apertus1p5Config().to_dict())["audio_token_offset"] == 262344
    a = zoo._config(Apertus1p5Config, repair=True)  # (validates the ranges; codebook_dim tied by _config)
    assert a.audio_token_offset + a.audio_config.codebook_size <= a.text_config.vocab_size == 1024


def test_compare_outputs_finds_shape_and_dtype_differences():
    ref = {"a": torch.randn(2, 24, 8), "b": torch.arange(6)}
    good = zoo.compare_outputs({"a": ref["a"] + 1e-4, "b": ref["b"].clone()}, ref)
    assert good["same_shapes_dtypes"] and good["pearson"] > 0.9999 and good["max_abs_err"] < 2e-4
    bad = zoo.compare_outputs({"a": ref["a"][:, :23], "b": ref["b"].int()}, ref)
    assert not bad["same_shapes_dtypes"] and len(bad["mismatches"]) == 2
    mask = torch.ones(2, 24, dtype=torch.long)
    mask[1, -6:] = 0
    noisy = ref["a"].clone()
    noisy[1, -6:] = 1e6  # masked positions are not compared
    assert zoo.compare_outputs({"a": noisy, "b": ref["b"]}, ref, mask)["pearson"] > 0.9999
    assert zoo.classify({"status": "ran", "same_shapes_dtypes": False, "pearson": 1.0}) == "shape/dtype differs"
    assert zoo.classify({"status": "ran", "same_shapes_dtypes": True, "pearson": 0.9999, "fallbacks": {}}) == "clean"


def test_empty_outputs_of_the_same_shape_are_equal():
    """A detector keeping no box on either side (FCOS, RetinaNet v2 with random weights) returns the CPU's
    outputs exactly; one that keeps boxes where the CPU keeps none is a shape difference."""
    none = [{"boxes": torch.zeros(0, 4), "scores": torch.zeros(0), "labels": torch.zeros(0, dtype=torch.long)}]
    same = zoo.compare_outputs([{k: v.clone() for k, v in none[0].items()}], none)
    assert same["same_shapes_dtypes"] and same["pearson"] == 1.0 and zoo.classify(
        dict(same, status="ran", fallbacks={})) == "clean"
    some = [{"boxes": torch.ones(1, 4), "scores": torch.ones(1), "labels": torch.ones(1, dtype=torch.long)}]
    assert zoo.classify(dict(zoo.compare_outputs(some, none), status="ran", fallbacks={})) == "shape/dtype differs"

@pytest.mark.parametrize("model_type", ["bert", "llama", "qwen3_moe"])
def test_sampled_families_clean(model_type):
    """A few families, sampled from the zoo: a dense encoder, a rotary decoder with grouped-query
    attention, a mixture of experts -- through the worker's unit, with issue 23's inputs."""
    r = zoo.run_one(model_type)
    assert r["status"] == "ran", r.get("error")
    assert r["same_shapes_dtypes"], r["mismatches"]
    assert r["fallbacks"] == {}
    assert r["pearson"] >= zoo.PEARSON_MIN
    assert r["ttnn_ops"] > 10 and r["aten_ops"] > 10
    assert zoo.classify(r) == "clean"


def test_a_low_pearson_is_explained_by_float32_storage_and_the_cpus_own_bfloat16():
    """explain_accuracy: with float32 stored as float32 and exact arithmetic a right lowering matches the CPU
    (a wrong one would not), and the CPU's own bfloat16 forward shows what bfloat16 costs the model."""
    model, inputs, _ = zoo.build("llama")
    inputs = inputs[0] if isinstance(inputs, zoo._Candidates) else inputs
    r = zoo.explain_accuracy("llama", inputs, "ttnn:0", 0)
    assert r["pearson_float32_storage"] > 0.999999, r
    assert 0.99 < r["cpu_bfloat16_pearson"] < 0.99999 and r["shapes_cpu_bfloat16"], r


def test_a_detector_runs_in_bfloat16_on_the_cpu_for_explain_accuracy():
    """torchvision's CPU nms and roi_align refuse bfloat16, and a detector's input is a list of images: without
    _nms_in_float32 and _bfloat16 the R-CNNs had no CPU bfloat16 figure. Within it the model runs with every
    box in bfloat16 (the detections' own dtype) and the 100 best boxes of each image; outside, torchvision's
    functions are its own again."""
    import torchvision.ops.boxes as box_ops
    import torchvision.ops.poolers as poolers
    nms, roi_align = box_ops.nms, poolers.roi_align
    model, inputs, _ = zoo.build("torchvision:fasterrcnn_mobilenet_v3_large_320_fpn")
    with torch.no_grad():
        ref = model(**inputs)
        low_inputs = zoo._bfloat16(inputs)
        assert [x.dtype for x in low_inputs["images"]] == [torch.bfloat16] * 2
        model = model.to(torch.bfloat16)
        with pytest.raises(RuntimeError, match="BFloat16"):
            model(**low_inputs)
        with zoo._nms_in_float32():
            low = model(**low_inputs)
    assert (box_ops.nms, poolers.roi_align) == (nms, roi_align)
    r = zoo.compare_outputs(low, ref)
    assert [m for m in r["mismatches"] if "dtype" not in m] == [], r
    assert all(d["boxes"].dtype == torch.bfloat16 and d["boxes"].shape == (100, 4) for d in low)
    # the sorted scores (0.1 +- 0.002) agree; which boxes hold them is bfloat16's tie order (zoo.NOTES)
    assert zoo._pearson(low[0]["scores"].float(), ref[0]["scores"]) > 0.9, r


def test_masked_image_model_gets_the_same_noise_on_both_runs():
    """ViT-MAE masks 75% of the patches by argsort of random noise: without a shared `noise` input the CPU and
    the device draw their own (Pearson 0.02 in the sweep); with it the network is what is compared."""
    model, inputs, _ = zoo.build("vit_mae")
    first = inputs[0]
    assert sorted(first) == ["noise", "pixel_values"] and first["noise"].shape == (zoo.BATCH, 196)
    assert all(torch.equal(row.sort().values, torch.arange(196.0)) for row in first["noise"])
    r = zoo.run_one("vit_mae")
    assert r["status"] == "ran" and r["inputs"] == ["noise", "pixel_values"], r
    assert r["same_shapes_dtypes"] and r["pearson"] >= zoo.PEARSON_MIN, r


def test_worker_crash_and_timeout_recorded_and_the_run_continues(tmp_path):
    path = str(tmp_path / "zoo.json")
    names = [f"file:{FAKES}:segv", f"file:{FAKES}:hangs", f"file:{FAKES}:tiny"]
    data = zoo.sweep(names, path, timeout=8, recycle=0)
    res = data["results"]
    assert res[names[0]]["status"] == "crash" and "SIGSEGV" in res[names[0]]["error"]
    assert res[names[1]]["status"] == "timeout"
    tiny = res[names[2]]
    assert tiny["status"] == "ran" and tiny["class_"] == "clean" and tiny["pearson"] > 0.999, tiny
    # resumable: the JSON has every result, and a second sweep measures nothing again
    again = zoo.sweep(names, path, timeout=4)
    assert again["results"] == res and zoo.load(path)["results"] == res
    md = zoo.zoo_md(again)
    assert "| crash | 1 |" in md and "| timeout | 1 |" in md and "| clean | 1 |" in md


# ----------------------------------------------------------------------------------------------- fallback fidelity
# The aten ops the CPU fallback served in the committed sweeps of earlier commits (git log -- docs/zoo.json
# docs/zoo_vision.json), since lowered: checked still, whichever path serves them now. (Not here: the FFT ops,
# whose OpInfos are fft.* -- tests/test_fft.py -- _weight_norm_interface -- tests/test_dispatch.py -- and
# col2im, which no OpInfo reaches.)
SERVED_BEFORE = (
    "aten._embedding_bag.default", "aten._euclidean_dist.default", "aten._unique2.default",
    "aten._upsample_bilinear2d_aa.default", "aten.acos.default", "aten.argmax.default", "aten.as_strided.default",
    "aten.asinh.default", "aten.atanh.default",
    "aten.bucketize.Tensor", "aten.ceil.default", "aten.convolution.default", "aten.cummax.default",
    "aten.cummin.default", "aten.flip.default", "aten.floor.default", "aten.grid_sampler_2d.default",
    "aten.histc.default", "aten.im2col.default", "aten.index.Tensor", "aten.index_select.default",
    "aten.linalg_solve_triangular.default", "aten.logsumexp.default", "aten.max_pool2d_with_indices.default",
    "aten.nan_to_num.default", "aten.nonzero.default", "aten.polar.default", "aten.pow.Scalar",
    "aten.prod.dim_int", "aten.repeat_interleave.Tensor", "aten.round.default", "aten.scatter_reduce.two",
    "aten.sort.default", "aten.unfold.default", "aten.unique_consecutive.default",
    "aten.upsample_bilinear2d.default", "aten.upsample_linear1d.default", "aten.upsample_nearest2d.default")


def _served_by_the_fallback() -> list:
    """The aten ops the CPU fallback served in the committed sweeps (docs/zoo.json, docs/zoo_vision.json),
    now and before (SERVED_BEFORE)."""
    ops = set(SERVED_BEFORE)
    for path in (zoo.JSON, zoo.VISION_JSON):
        ops |= {op for r in zoo.load(path)["results"].values() for op in (r.get("fallbacks") or {})}
    return sorted(op for op in ops if op.startswith("aten."))


# aten packets whose OpInfos are named after the Python function (every variant of the name)
OPINFO_NAMES = {"index": "__getitem__", "convolution": ("nn.functional.conv1d", "nn.functional.conv2d"),
                "upsample_bilinear2d": "nn.functional.interpolate", "upsample_linear1d": "nn.functional.interpolate",
                "upsample_nearest2d": "nn.functional.interpolate", "upsample_bicubic2d": "nn.functional.interpolate",
                "im2col": "nn.functional.unfold", "col2im": "nn.functional.fold", "scatter_reduce": "scatter_reduce",
                "_weight_norm_interface": "_weight_norm_interface", "roll": "roll", "polar": "polar",
                "_unique2": "unique", "_embedding_bag": "nn.functional.embedding_bag", "_euclidean_dist": "cdist",
                "_upsample_bilinear2d_aa": "nn.functional.interpolate",
                "max_pool2d_with_indices": "nn.functional.max_pool2d"}


def _opinfos(packet: str) -> list:
    from torch.testing._internal.common_methods_invocations import op_db
    names = OPINFO_NAMES.get(packet)
    if names is None:
        return [op for op in op_db if (op.aten_name or op.name) == packet and not op.variant_test_name]
    names = (names,) if isinstance(names, str) else names
    return [op for op in op_db if op.name in names]


@pytest.mark.parametrize("aten_op", _served_by_the_fallback())
def test_every_op_the_sweep_sent_to_the_fallback_gives_the_cpus_answer(aten_op):
    """Issue 23 item 6: each op the zoo's forwards ran on the CPU fallback, on PyTorch's OpInfo samples
    (float32, int64, bool where the op takes them; the first 3 of each), gives the CPU's dtypes, shapes and
    values on ttnn:0 (on the fallback or a lowering, whichever serves it now)."""
    from ttnn_eager.tools import opinfo
    ops = _opinfos(aten_op.split(".")[1])
    if not ops:
        pytest.skip(f"{aten_op}: no OpInfo samples (the routing ops: tests/test_moe.py FALLBACK_TABLE; weight_norm: tests/test_dispatch.py)")
    ran = 0
    for op in ops:
        for dtype in opinfo._dtypes(op):
            for i, sample in enumerate(opinfo._samples(op, dtype, cap=3)):
                if opinfo.expected_failure(opinfo.full_name(op), str(dtype).split(".")[-1], i):
                    continue
                status, detail = opinfo.run_sample(op, sample)
                assert status in ("pass", "refused"), f"{op.name} {dtype} sample {i}: {detail}"
                ran += 1
    assert ran > 0


def test_cpu_bfloat16_outputs_of_other_shapes_are_reported():
    """VITS' CPU bfloat16 forward makes a shorter waveform (a duration of 8.0186 frames is 8.0 in bfloat16): its
    Pearson then covers the outputs of the CPU's shape only (there the 2-value lengths: 1.0), so
    explain_accuracy says the shapes differ and docs/zoo.md shows it."""
    name = f"file:{FAKES}:rounded_length"
    model, inputs, _ = zoo.build(name)
    r = zoo.explain_accuracy(name, inputs, "ttnn:0", 0)
    assert r["shapes_cpu_bfloat16"] is False and r["cpu_bfloat16_pearson"] == 1.0, r
    assert r["shapes_float32_storage"] and r["pearson_float32_storage"] == 1.0, r
    r.update(name=name, status="ran", pearson=0.5, same_shapes_dtypes=True, fallbacks={})
    assert "the CPU in bfloat16: 1.00000 (other output shapes)" in zoo.zoo_md({"results": {name: r}})


def test_tied_repairs_sizes_across_sub_configs():
    """_tied (repair): SAM's vision neck and positional features follow its decoders' shrunk hidden size,
    SAM2's per-stage widths (and the channel list made of them) scale, ESM's None vocabulary is the shrunk one,
    a multi-scale head's Swin backbone keeps its 4 stages (1 block each), CLAP's audio Swin's last width."""
    from transformers import ClapConfig, EsmConfig, Mask2FormerConfig, Sam2Config, SamConfig

    def tied(cfg_class):
        d = cfg_class().to_dict()
        return zoo._tied(d, zoo.shrink(d, repair=True))
    sam = tied(SamConfig)
    assert sam["vision_config"]["output_channels"] == 64 == sam["prompt_encoder_config"]["hidden_size"]
    assert sam["vision_config"]["num_pos_feats"] == 32
    vision = tied(Sam2Config)["vision_config"]
    assert vision["backbone_config"]["embed_dim_per_stage"] == [64, 128, 256, 512]
    assert vision["backbone_channel_list"] == [512, 256, 128, 64] and vision["fpn_hidden_size"] == 64
    esm = tied(EsmConfig)
    assert (esm["vocab_size"], esm["pad_token_id"]) == (1024, 1)
    swin = tied(Mask2FormerConfig)["backbone_config"]
    assert swin["depths"] == [1, 1, 1, 1] and swin["out_features"] == ["stage1", "stage2", "stage3", "stage4"]
    assert swin["num_heads"] == [2, 4, 8, 16] and len(swin["stage_names"]) == 5
    audio = tied(ClapConfig)["audio_config"]
    assert audio["hidden_size"] == audio["patch_embeds_hidden_size"] * 2 ** (len(audio["depths"]) - 1)


def test_sub_config_builds_a_decoder_alone_from_its_composite_config():
    from transformers import MusicgenConfig, MusicgenDecoderConfig, MusicgenModel
    cfg = MusicgenConfig()
    assert isinstance(zoo._sub_config(cfg, MusicgenModel), MusicgenDecoderConfig)
    assert zoo._sub_config(cfg.decoder, MusicgenModel) is cfg.decoder


def test_more_inputs_codebooks_spectrogram_image_and_hidden_state_inputs():
    import inspect
    from types import SimpleNamespace

    def params(*names):
        return {n: inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names}
    g = torch.Generator().manual_seed(0)
    ids, mask = zoo._ids()
    text = {"input_ids": ids, "attention_mask": mask}
    music = zoo._more_inputs(SimpleNamespace(num_codebooks=4, vocab_size=2048), params("input_ids"), g, text, None)
    assert [tuple(c["input_ids"].shape) for c in music] == [(8, 24)]
    clap = zoo._more_inputs(SimpleNamespace(num_mel_bins=64), params("input_ids", "input_features"), g, text, None)
    assert tuple(clap[-1]["input_features"].shape) == (2, 1, zoo.AUDIO_FRAMES, 64) and "input_ids" in clap[-2]
    t5 = zoo._more_inputs(SimpleNamespace(hidden_size=64), params("input_values", "decoder_input_values"), g, None,
                          None)
    assert tuple(t5[0]["input_values"].shape) == tuple(t5[0]["decoder_input_values"].shape) == (2, 24, 64)


def test_image_text_places_the_image_tokens_before_the_text():
    import inspect
    from types import SimpleNamespace
    ids, mask = zoo._ids()
    ids[0, 0] = 1023
    pixels = torch.zeros(2, 3, 8, 8)
    p = {n: None for n in ("input_ids", "pixel_values", "attention_mask", "image_embeds_position_mask")}
    (c,) = zoo._image_text(SimpleNamespace(num_query_tokens=4, image_token_index=1023), p, {"input_ids": ids,
                                                                                            "attention_mask": mask}, pixels)
    assert (c["input_ids"] == 1023).sum() == 2 * 4 and tuple(c["attention_mask"].shape) == (2, 28)
    assert c["image_embeds_position_mask"][:, :4].all() and not c["image_embeds_position_mask"][:, 4:].any()
    assert zoo._image_text(SimpleNamespace(), p, {"input_ids": ids}, pixels) == []
    assert inspect.signature(zoo._image_text)


def test_tied_fills_image_token_and_vocabulary_map_left_to_processors():
    from transformers import Blip2Config, ChameleonConfig
    d = Blip2Config().to_dict()
    assert zoo._tied(d, zoo.shrink(d, repair=True))["image_token_index"] == 1023
    d = ChameleonConfig().to_dict()
    assert zoo._tied(d, zoo.shrink(d, repair=True))["vocabulary_map"] == {}


def test_more_inputs_time_series_padding_and_frequency():
    import inspect
    from types import SimpleNamespace
    p = {n: inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in ("past_values", "past_values_padding", "freq")}
    out = zoo._more_inputs(SimpleNamespace(context_length=16), p, torch.Generator().manual_seed(0), None, None)
    full = [c for c in out if "freq" in c]
    assert len(full) == 2 and all(tuple(c["past_values_padding"].shape) == (2, 16) for c in full)


def test_tied_layer_out_indices_and_box_embedding_width():
    from transformers import Data2VecVisionConfig, LiltConfig
    d = Data2VecVisionConfig().to_dict()
    assert zoo.shrink(d, repair=True)["out_indices"] is None
    assert zoo._tied(d, zoo.shrink(d, repair=True))["out_indices"] == [2]
    d = LiltConfig().to_dict()
    assert zoo._tied(d, zoo.shrink(d, repair=True))["hidden_size"] == 96


def test_repair_pixel_shuffle_adapter_widths_and_composite_tokens():
    """Llama-4's vision adapter takes hidden / r^2 shuffled channels and maps them through equal projector
    widths; its image token (at the top, the vocabulary in text_config) lands in the shrunk vocabulary."""
    from transformers import Llama4Config
    d = zoo.shrink(Llama4Config().to_dict(), repair=True)
    v = d["vision_config"]
    assert v["intermediate_size"] == 256 and v["projector_input_dim"] == v["projector_output_dim"] == 64
    assert v["vision_output_dim"] == 64
    assert d["image_token_index"] < d["text_config"]["vocab_size"]
    assert zoo.shrink(Llama4Config().to_dict())["image_token_index"] == 200092  # (plain: unchanged)
    cfg = zoo._config(Llama4Config, repair=True)
    assert zoo._patch_tokens(cfg) == 256


def test_repair_gives_tokens_the_model_reads_and_a_forecast_horizon():
    """The Qwen2.5-Omni thinker reads config.vision_start_token_id its class lacks: a spare id; Informer's
    prediction_length is required and None by default: 8 steps (its context_length follows)."""
    from transformers import InformerConfig, Qwen2_5OmniThinkerConfig
    c = zoo._config(Qwen2_5OmniThinkerConfig, repair=True)
    used = {c.image_token_id, c.video_token_id, c.audio_token_id, c.audio_start_token_id}
    assert c.vision_start_token_id < c.text_config.vocab_size and c.vision_start_token_id not in used
    assert not hasattr(zoo._config(Qwen2_5OmniThinkerConfig), "vision_start_token_id")
    assert zoo.shrink(InformerConfig().to_dict())["prediction_length"] is None
    i = zoo._config(InformerConfig, repair=True)
    assert (i.prediction_length, i.context_length) == (8, 8)


def test_repair_shrinks_cross_attention_sizes():
    """Dia's decoder names its cross-attention sizes with a cross_ prefix (cross_hidden_size 1024 = the
    encoder's width): the repair rules shrink them as the plain ones, and the plain shrink leaves them."""
    from transformers import DiaConfig
    d = DiaConfig().to_dict()
    assert zoo.shrink(d)["decoder_config"]["cross_hidden_size"] == 1024
    r = zoo.shrink(d, repair=True)["decoder_config"]
    assert (r["cross_hidden_size"], r["cross_num_attention_heads"], r["cross_num_key_value_heads"],
            r["cross_head_dim"]) == (64, 4, 2, 16)


def test_repair_moves_layer_hooks_into_the_two_layers():
    """DepthPro hooks its encoder's hidden states 11 and 5 (24 layers): the repair rules keep 2 hooks, on the
    last 2 layers in the list's order."""
    from transformers import DepthProConfig
    d = DepthProConfig().to_dict()
    assert zoo.shrink(d)["intermediate_hook_ids"] == [11, 5]
    assert zoo.shrink(d, repair=True)["intermediate_hook_ids"] == [1, 0]


def test_repair_gives_a_head_room_for_a_rotary_floor():
    """CLVP's rotary part is max(projection_dim // (2 heads), 32) channels of each head: the repair rules give
    its encoders projection_dim 64 and 2 heads of 32 (the plain shrink 4 heads of 16, which cannot hold it)."""
    from transformers import ClvpConfig
    assert zoo._config(ClvpConfig).text_config.num_attention_heads == 4
    c = zoo._config(ClvpConfig, repair=True)
    for sub in (c.text_config, c.speech_config):
        assert (sub.projection_dim, sub.num_attention_heads) == (64, 2)
        assert max(sub.projection_dim // (sub.num_attention_heads * 2), 32) <= sub.hidden_size // sub.num_attention_heads


def test_the_cpu_in_bfloat16_stands_in_for_the_device(tmp_path):
    """`ttnn-eager zoo --bfloat16-cpu`: the same entries with the CPU in bfloat16 where ttnn:0 stands (no
    device op), classified alike; docs/zoo.md then says what bfloat16 arithmetic alone allows against the
    device's classes."""
    import ttnn_eager
    path = str(tmp_path / "cpu.json")
    names = [f"file:{FAKES}:tiny", f"file:{FAKES}:rounded_length"]
    ttnn_eager.reset_stats()
    r = zoo.run_one(names[1], bfloat16_cpu=True)
    assert ttnn_eager.stats()["ttnn_ops"] == 0
    assert r["status"] == "ran" and zoo.classify(r) == "shape/dtype differs", r  # 8.0186 frames are 8.0 in bf16
    cpu = zoo.sweep(names, path, timeout=60, recycle=0, bfloat16_cpu=True)
    assert cpu["meta"]["reference"] == "the CPU in bfloat16"
    assert cpu["results"][names[0]]["class_"] == "clean" and cpu["results"][names[1]]["class_"] == "shape/dtype differs"
    device = {"results": {n: {"name": n, "status": "ran", "pearson": 1.0, "same_shapes_dtypes": True,
                              "fallbacks": {}} for n in names}}
    md = zoo.zoo_md(device, None, cpu)
    assert "of the 2 types that run, 1 are clean (50.0%; `ttnn:0`: 2)" in md, md
    assert f"Clean on `ttnn:0` but not on the CPU in bfloat16 (1): {names[1]}" in md


def test_compiled_entries_are_measured_against_eager_mode(tmp_path):
    """`ttnn-eager zoo --compile`: each entry compiled with backend="ttnn" as well, classified by its compiled
    result (every call against the CPU), with its graphs, graph breaks, recompiles and TT-NN ops against eager."""
    r = zoo.run_one(f"file:{FAKES}:graph_break", compiled=True)
    assert r["status"] == "ran" and zoo.classify(r) == "clean", r
    assert r["graphs"] == 2 and r["graph_breaks"] == 1 and r["recompiles"] == 0, r
    assert r["eager"]["ttnn_ops"] > 0 and r["ttnn_ops"] > 0 and r["ops_ratio"] == round(
        r["ttnn_ops"] / r["eager"]["ttnn_ops"], 3)
    path = str(tmp_path / "compiled.json")
    data = zoo.sweep([f"file:{FAKES}:tiny"], path, timeout=120, recycle=0, compiled=True)
    tiny = data["results"][f"file:{FAKES}:tiny"]
    assert data["meta"]["compiled"] and tiny["class_"] == "clean" and tiny["graph_breaks"] == 0, tiny
    assert tiny["graphs"] == 1 and tiny["pearson"] > 0.999 and tiny["eager"]["pearson"] > 0.999 and tiny["replayed"]
