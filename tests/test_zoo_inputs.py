"""The zoo's inputs per modality (src/ttnn_eager/tools/zoo/inputs.py, building.py)."""
import torch

from ttnn_eager.tools import zoo


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


def test_more_inputs_time_series_padding_and_frequency():
    import inspect
    from types import SimpleNamespace
    p = {n: inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in ("past_values", "past_values_padding", "freq")}
    out = zoo._more_inputs(SimpleNamespace(context_length=16), p, torch.Generator().manual_seed(0), None, None)
    full = [c for c in out if "freq" in c]
    assert len(full) == 2 and all(tuple(c["past_values_padding"].shape) == (2, 16) for c in full)
