"""The inputs of a transformers zoo entry by modality: input_ids with a padded row (`_ids`), pixel
values, audio features and waveforms, image-text pairs, keypoint-matcher pairs, and the arguments a forward
requires beyond them (`_more_inputs`, `_required`); `_Candidates` when several input sets may fit."""
from __future__ import annotations

import inspect
import math

import torch

from .shrinking import BATCH, MASKED, PAIR_SIZE, SEQ, SHRINK, _H, _dicts, _is_int


def _ids(seed: int = 0) -> tuple:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, SHRINK["vocab"], (BATCH, SEQ), generator=g)
    mask = torch.ones_like(ids)
    mask[1, -MASKED:] = 0
    return ids, mask


class _Candidates(list):
    """Input sets to try in order: the first the CPU forward accepts is the model's (run_one)."""


def _transformers_inputs(model, cfg, seed: int) -> list:
    """input_ids (+ attention_mask, + decoder_input_ids for encoder-decoders); then the same with an image
    (dual encoders such as CLIP need both); an image alone (first with the masking noise of a model that
    takes one: _masking_noise); audio samples alone. Then _more_inputs'; a pair of images (batch, 2, c, h, w),
    the image's PAIR_SIZE x PAIR_SIZE corner and its mirror, for a forward that asks for one (the keypoint matchers
    LightGlue, EfficientLoFTR: their all-pairs tensors grow with the square of the keypoints, and in bfloat16 the
    shrunk SuperPoint's scores, all within 2e-4 of 1/65, round to one value, so its NMS keeps every pixel: 784
    keypoints an image at 32 x 32, 8464 at 96 x 96);
    the waveform with a clip of 4 frames of 224 x 224 for a forward that takes both (PE audio-video's encoder);
    then _required's."""
    ids, mask = _ids(seed)
    params = inspect.signature(model.forward).parameters
    g = torch.Generator().manual_seed(seed)
    pixels = None
    if "pixel_values" in params:  # an image of the config's size
        vc = getattr(cfg, "vision_config", None) or cfg
        size = getattr(vc, "image_size", 224)
        size = size[0] if isinstance(size, (list, tuple)) else size
        if isinstance(size, dict):
            size = size.get("height", 224)
        pixels = torch.randn(BATCH, getattr(vc, "num_channels", 3), size, size, generator=g)
    out = []
    if "input_ids" in params:
        text = {"input_ids": ids}
        if "attention_mask" in params:
            text["attention_mask"] = mask
        if getattr(cfg, "is_encoder_decoder", False) and "decoder_input_ids" in params:
            text["decoder_input_ids"] = ids
        out.append(text)
        if pixels is not None:
            out.append(dict(text, pixel_values=pixels))
    if pixels is not None:
        noise = _masking_noise(params, cfg, g)
        if noise is not None:
            out.append({"pixel_values": pixels, "noise": noise})
        out.append({"pixel_values": pixels})
    if "input_values" in params:  # audio: 0.24 s at 16 kHz (a multiple of 320 and of 96 samples)
        wave = torch.randn(BATCH, 3840, generator=g)
        out += [{"input_values": wave}, {"input_values": wave[:, None]}]  # (batch, samples), (batch, 1, samples)
    text = out[0] if out and "input_ids" in out[0] else None
    out = (out or [{}]) + _more_inputs(cfg, params, g, text, pixels)
    if pixels is not None and "(batch_size, 2, num_channels, height, width)" in _source(type(model).forward):
        corner = pixels[..., :PAIR_SIZE, :PAIR_SIZE]  # (keypoint matchers: image pairs)
        out.append({"pixel_values": torch.stack([corner, corner.flip(-1)], 1)})
    if "input_values" in params and "pixel_values_videos" in params:  # (PE audio-video: the sound with a clip)
        g2 = torch.Generator().manual_seed(seed + 1)
        out.append({"input_values": torch.randn(BATCH, 1, 3840, generator=g2),
                    "pixel_values_videos": torch.randn(BATCH, 4, 3, 224, 224, generator=g2)})
    return out + _required(cfg, params, g, text, out)


def _source(fn) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def _find(cfg, keys, subs=("audio_config", "encoder_config", "speech_config", "vision_config")):
    """The first integer among `keys` on the config, else on its sub-configs `subs`."""
    for c in (cfg, *(getattr(cfg, k, None) for k in subs)):
        for k in keys:
            v = getattr(c, k, None) if c is not None else None
            v = v[0] if isinstance(v, (list, tuple)) and v else v
            if _is_int(v) and v > 0:
                return v
    return None


AUDIO_FRAMES = 128  # mel frames of the audio-feature input (whisper-style encoders: 2 x 64 positions)


def _more_inputs(cfg, params, g, text, pixels) -> list:
    """The inputs that the first candidates do not cover, tried after them (so a model running with those
    keeps its inputs): mel features (input_features, both (batch, mels, frames) and (batch, frames, mels),
    with all-ones feature masks; an audio spectrogram as input_values), flattened patches with their grid
    (grid_thw: 2 images of 2 x 2 merged patches each), a video clip (batch, frames, channels, h, w), a time
    series (past_values), and the extra inputs of some text models (bbox, qformer_input_ids, visual_feats).
    Then, last (`late`), the ones added for models that ran with none of those: mel features as a one-channel
    image (batch, 1, frames, mels: CLAP); an image of the vision backbone's size (backbone_config.image_size:
    SAM2's Hiera, when the vision config has none); hidden states as input_values and decoder_input_values (an
    encoder-decoder without its pre-nets: SpeechT5Model); text with an image's placeholder tokens
    (_image_text); the text with mel features (batch, mels, 128) whose mel count only the decoder sub-config
    names (CLVP's conditioning encoder: decoder_config.feature_size); audio codes of several codebooks (num_codebooks: input_ids (batch x codebooks, seq):
    MusicGen's decoder; and decoder_input_ids (batch, seq, channels), then (batch x channels, seq), for a
    decoder sub-config of several channels or codebooks: Dia's 9, whose 2-d path makes a view of a transposed
    tensor); a time series with a zero padding mask and frequency class (TimesFM); the text
    without a cache (use_cache=False: a model whose cache cannot be made from its config, BLT's); text with
    an image's placeholder tokens counted from the patch grid (_patch_tokens: Llama-4, no count named); the
    text with one image per sample (batch, 1, c, h, w) that every text token attends to (image_attention_mask
    (batch, seq, 1) of ones: IDEFICS's cross-attention); hidden states of d_model as `inputs` with the attention
    mask (PerceiverModel without a preprocessor); a forecaster's past (past_values of context_length plus the
    largest lag, past_time_features of num_time_features, an all-ones past_observed_mask; with future_values
    and future_time_features of prediction_length first: Autoformer, Informer, Time Series Transformer); an
    video clip of the frames the model pads to (max_img_size: TVP's 448), with the text, then of one sample
    (TVP's 2-d position embedding works for a batch of 1 only); an
    image, a prompt image and its mask of half the image size's height (SegGPT stacks the prompt over the
    image); an image whose smallest scale (scaled_images_ratios) still holds one patch_size patch (DepthPro:
    224 with its repaired patch_size 56); an image with a task prompt's token ids (task_inputs
    (batch, task_seq_len): OneFormer); the Q-Former's query tokens with the image features it cross-attends to
    (encoder_hidden_states (batch, 16, encoder_hidden_size): BLIP-2's Q-Former alone); mel features stacked
    num_stacked_frames at a time, with their mask (Fun-ASR: 7 x 80); the text with mel features of
    audio_length_per_tok frames per text token (Voxtral realtime: 8, its audio and text positions added); an
    image of about the backbone's size whose patch grid splits into its num_windows windows a side (RF-DETR's
    windowed DINOv2: 504 = 14 x 4 x 9, not 518). (_required's come after these.)"""
    out, late = [], []  # (late: the candidates added for models that ran with none of `out`'s, tried last)
    g_late = torch.Generator().manual_seed(1)  # (draws of late candidates added later: g's draws stay as they were)
    ids = text["input_ids"] if text else _ids()[0]
    mels = _find(cfg, ("num_mel_bins", "input_feat_size", "n_mels", "input_feat_per_channel", "feature_size",
                       "feature_projection_input_dim"))
    feat_key = next((k for k in ("input_features", "audio_mel") if k in params), None)
    if feat_key and mels:
        msp = _find(cfg, ("max_source_positions",))
        window = _find(cfg, ("n_window",))  # (Qwen3-ASR: frames in chunks of 2 x n_window)
        frames = 2 * msp if msp and msp <= 64 else 2 * window if window else AUDIO_FRAMES
        feats = torch.randn(BATCH, mels, frames, generator=g)
        masks = {k: torch.ones(BATCH, frames, dtype=torch.long) for k in
                 ("input_features_mask", "feature_attention_mask", "audio_mel_mask") if k in params}
        if "attention_mask" in params and "input_ids" not in params:
            masks["attention_mask"] = torch.ones(BATCH, frames, dtype=torch.long)
        if "audio_mel_mask" in masks:  # (Gemma3n: True marks padding)
            masks["audio_mel_mask"] = torch.zeros(BATCH, frames, dtype=torch.bool)
        extra = {"decoder_input_ids": ids} if "decoder_input_ids" in params else {}
        for f in (feats, feats.transpose(1, 2).contiguous()):
            out += [dict(extra, **{feat_key: f}), dict(extra, **{feat_key: f}, **masks)]
        stacked = _find(cfg, ("input_dim",))  # (Granite Speech 5: frames stacked, 4 x 80 features)
        if stacked and stacked != mels:
            f = torch.randn(BATCH, frames, stacked, generator=g)
            out += [dict(extra, **{feat_key: f}), dict(extra, **{feat_key: f}, **masks)]
        per_tok = _find(cfg, ("audio_length_per_tok",), ())  # (Voxtral realtime: 8 frames per text token)
        if text and per_tok:
            f = torch.randn(BATCH, mels, text["input_ids"].shape[1] * per_tok, generator=g_late)
            late += [dict(text, **{feat_key: f}), dict(text, **{feat_key: f.transpose(1, 2).contiguous()})]
        times = _find(cfg, ("num_stacked_frames",), ())  # (Fun-ASR: 7 frames stacked, 7 x 80 features)
        if times and times > 1:
            late.append(dict(extra, **{feat_key: feats.transpose(1, 2).repeat(1, 1, times)}, **masks))
        if text:  # (models that take the text beside the audio: Voxtral realtime)
            out += [dict(text, **{feat_key: f}) for f in (feats, feats.transpose(1, 2).contiguous())]
        image = feats.transpose(1, 2)[:, None].contiguous()  # (CLAP: a one-channel image (batch, 1, frames, mels))
        late += ([dict(text, **{feat_key: image})] if text else []) + [{feat_key: image}]
    dec_mels = _find(cfg, ("feature_size", "num_mel_bins"), ("decoder_config",)) if feat_key and not mels else None
    if text and dec_mels:  # (CLVP: its conditioning encoder takes the text and mel features of decoder_config's)
        late.append(dict(text, **{feat_key: torch.randn(BATCH, dec_mels, AUDIO_FRAMES, generator=g)}))
    if "input_values" in params and ("decoder_input_ids" in params or text):  # (Moonshine; PE audio)
        wave = torch.randn(BATCH, 3840, generator=g)
        other = dict(text) if text else {}
        if "decoder_input_ids" in params:
            other["decoder_input_ids"] = ids
        out += [dict(other, input_values=wave), dict(other, input_values=wave[:, None])]
    size = getattr(getattr(cfg, "vision_config", None) or cfg, "image_size", None)
    if isinstance(size, (list, tuple)) and len(size) == 2 and size[0] != size[1] and "pixel_values" in params:
        image = torch.randn(BATCH, 3, *size, generator=g)  # (a non-square image size: MGP-STR 32 x 128)
        vis = {"pixel_values": image}
        if "prompt_pixel_values" in params:  # (SegGPT: a prompt image and its mask)
            vis.update(prompt_pixel_values=image, prompt_masks=torch.randn(BATCH, 3, *size, generator=g))
        out.append(vis)
        if "prompt_pixel_values" in params:  # (SegGPT stacks the prompt over the image: each half the height)
            half = (size[0] // 2, size[1])
            late.append({"pixel_values": torch.randn(BATCH, 3, *half, generator=g),
                         "prompt_pixel_values": torch.randn(BATCH, 3, *half, generator=g),
                         "prompt_masks": torch.randn(BATCH, 3, *half, generator=g)})
    backbone = getattr(getattr(cfg, "vision_config", None) or cfg, "backbone_config", None)
    bsize = getattr(backbone, "image_size", None)
    bsize = bsize[0] if isinstance(bsize, (list, tuple)) and bsize else bsize
    if _is_int(bsize) and "pixel_values" in params and (pixels is None or pixels.shape[-1] != bsize):
        late.append({"pixel_values": torch.randn(BATCH, 3, bsize, bsize, generator=g)})  # (SAM2: its backbone's)
    windows, bpatch = getattr(backbone, "num_windows", None), getattr(backbone, "patch_size", None)
    if _is_int(bsize) and _is_int(windows) and _is_int(bpatch) and "pixel_values" in params:  # (RF-DETR: 518 -> 504)
        side = bpatch * windows * max(1, bsize // (bpatch * windows))
        late.append({"pixel_values": torch.randn(BATCH, 3, side, side, generator=g_late)})
    if "query_embeds" in params:  # (BLIP-2's Q-Former alone: the query tokens)
        hidden = _find(cfg, ("hidden_size",), ())
        if hidden:
            out.append({"query_embeds": torch.randn(BATCH, 8, hidden, generator=g)})
            enc = _find(cfg, ("encoder_hidden_size",), ())  # (with the image features it cross-attends to)
            if enc:
                late.append(dict(out[-1], encoder_hidden_states=torch.randn(BATCH, 16, enc, generator=g_late)))
    if "states" in params and "returns_to_go" in params:  # (Decision Transformer: a trajectory)
        sd, ad = getattr(cfg, "state_dim", None), getattr(cfg, "act_dim", None)
        if _is_int(sd) and _is_int(ad):
            out.append({"states": torch.randn(BATCH, SEQ, sd, generator=g),
                        "actions": torch.randn(BATCH, SEQ, ad, generator=g),
                        "returns_to_go": torch.randn(BATCH, SEQ, 1, generator=g),
                        "timesteps": torch.arange(SEQ).repeat(BATCH, 1),
                        "attention_mask": _ids()[1]})
    if "input_values" in params and mels and "input_features" not in params:  # a spectrogram (AST)
        length = getattr(cfg, "max_length", None)
        out.append({"input_values": torch.randn(BATCH, length if _is_int(length) else AUDIO_FRAMES, mels, generator=g)})
    grid_key = next((k for k in ("grid_thw", "image_grid_thw") if k in params), None)
    if grid_key and "input_ids" not in params:
        patch = _find(cfg, ("patch_size",), ())
        tp = _find(cfg, ("temporal_patch_size", "patch_temporal"), ()) or 1
        ch = _find(cfg, ("in_channels", "num_channels", "in_chans"), ()) or 3
        merge = _find(cfg, ("spatial_merge_size", "merge_size"), ()) or 2
        if patch:
            grid = torch.tensor([[1, 2 * merge, 2 * merge]] * BATCH)
            n = int(grid.prod(-1).sum())
            flat = torch.randn(n, ch * tp * patch * patch, generator=g)
            key = "hidden_states" if "hidden_states" in params else "pixel_values"
            extra = {"merge_sizes": torch.tensor([merge] * BATCH)} if "merge_sizes" in params else {}
            out += [dict(extra, **{key: flat, grid_key: grid}),
                    dict(extra, **{key: flat.view(n, ch, tp, patch, patch).squeeze(2), grid_key: grid})]
    if "spatial_shapes" in params and pixels is not None:  # (SigLIP2: patches (batch, 4 x 4, c p p) + their grid)
        patch = _find(cfg, ("patch_size",), ("vision_config",))
        ch = _find(cfg, ("num_channels",), ("vision_config",)) or 3
        if patch:
            vis = {"pixel_values": torch.randn(BATCH, 16, ch * patch * patch, generator=g),
                   "pixel_attention_mask": torch.ones(BATCH, 16, dtype=torch.long),
                   "spatial_shapes": torch.tensor([[4, 4]] * BATCH)}
            out += [dict(text, **vis)] if text else []
            out.append(vis)
    frames = _find(cfg, ("num_frames", "frames_per_clip"), ("vision_config",))
    video_key = next((k for k in ("pixel_values_videos", "pixel_values") if k in params), None)
    if frames and video_key:
        vc = getattr(cfg, "vision_config", None) or cfg
        size = getattr(vc, "image_size", None) or getattr(vc, "crop_size", None) or 224
        size = size[0] if isinstance(size, (list, tuple)) else size
        ch = _find(vc, ("num_channels", "in_channels", "in_chans"), ()) or 3
        video = torch.randn(BATCH, min(frames, 4), ch, size, size, generator=g)
        if text:
            out.append(dict(text, **{video_key: video}))
        out.append({video_key: video})
        top = getattr(cfg, "max_img_size", None)  # (TVP pads its frames to max_img_size, 448)
        if _is_int(top) and top != size:
            video = torch.randn(BATCH, min(frames, 4), ch, top, top, generator=g)
            late += ([dict(text, **{video_key: video})] if text else []) + [{video_key: video}]
            if text:  # (and one sample: TVP views its column embeddings as (batch, 1, width, hidden))
                late.append({k: v[:1] for k, v in dict(text, **{video_key: video}).items()})
    hidden = _find(cfg, _H, ())
    if "decoder_input_values" in params and "input_values" in params and hidden:  # (SpeechT5Model: no prenets,
        h = torch.randn(BATCH, SEQ, hidden, generator=g)                          # hidden states both sides)
        late += [{"input_values": h, "decoder_input_values": h.flip(1)},
                {"input_values": h, "attention_mask": _ids()[1], "decoder_input_values": h.flip(1)}]
    if text and pixels is not None:
        late += _image_text(cfg, params, text, pixels)
    video_tok = ("video_token_index", "video_token_id")
    if text and pixels is not None and _find(cfg, video_tok, ()) is not None and not _find(
            cfg, ("image_token_id", "image_token_index"), ()) and _find(cfg, IMAGE_TOKENS, ()):
        clip = pixels[:, None].repeat(1, 4, 1, 1, 1)  # (InstructBLIP-Video: 4 frames, each its query tokens)
        late += _image_text(cfg, params, text, clip, 4 * _find(cfg, IMAGE_TOKENS, ()), video_tok)
    codebooks = getattr(cfg, "num_codebooks", None)
    if text and _is_int(codebooks) and codebooks > 1:  # (MusicGen's decoder: audio codes (batch x codebooks, seq))
        late.append({"input_ids": ids.repeat_interleave(codebooks, 0) % getattr(cfg, "vocab_size", SHRINK["vocab"])})
    dec = getattr(cfg, "decoder_config", None)
    dec_books = _find(dec, ("num_channels", "num_codebooks"), ()) if dec is not None else None
    if text and "decoder_input_ids" in text and dec_books and dec_books > 1:  # (Dia: the decoder's audio codes,
        codes = ids[..., None].repeat(1, 1, dec_books) % getattr(dec, "vocab_size", SHRINK["vocab"])  # 9 channels)
        late += [dict(text, decoder_input_ids=codes), dict(text, decoder_input_ids=codes.transpose(1, 2).flatten(0, 1))]
    if "past_values" in params:
        length = _find(cfg, ("context_length",), ()) or 32
        ch = _find(cfg, ("num_input_channels", "input_size"), ()) or 1
        series = torch.randn(BATCH, length, ch, generator=g)
        out += [{"past_values": series}, {"past_values": series[..., 0]}]
        if "past_values_padding" in params:  # (TimesFM: no padding, frequency class 0)
            pad = torch.zeros(BATCH, length, dtype=torch.long)
            late += [{"past_values": series[..., 0], "past_values_padding": pad, "freq": f}
                    for f in (torch.zeros(BATCH, dtype=torch.long), torch.zeros(BATCH, 1, dtype=torch.long))]
    if "past_time_features" in params and _is_int(getattr(cfg, "context_length", None)) and _is_int(
            getattr(cfg, "prediction_length", None)):  # (GluonTS-style forecasters: the context plus the lags)
        length = cfg.context_length + max(getattr(cfg, "lags_sequence", None) or [0])
        ch, tf = getattr(cfg, "input_size", 1) or 1, getattr(cfg, "num_time_features", 0) or 0
        shape = (BATCH, length) if ch == 1 else (BATCH, length, ch)
        fshape = (BATCH, cfg.prediction_length) + shape[2:]
        past = {"past_values": torch.randn(*shape, generator=g),
                "past_time_features": torch.randn(BATCH, length, tf, generator=g),
                "past_observed_mask": torch.ones(shape)}
        future = {"future_values": torch.randn(*fshape, generator=g),
                  "future_time_features": torch.randn(BATCH, cfg.prediction_length, tf, generator=g)}
        late += [dict(past, **future), past]
    if text and "bbox" in params:
        corner = torch.randint(0, 500, (BATCH, SEQ, 2), generator=g)
        box = torch.cat([corner, corner + torch.randint(1, 500, (BATCH, SEQ, 2), generator=g)], -1)
        out += [dict(text, bbox=box), dict(text, bbox=box.float() / 1000)]
    if text and "qformer_input_ids" in params and pixels is not None:
        out.append(dict(text, pixel_values=pixels, qformer_input_ids=ids,
                        **({"qformer_attention_mask": text["attention_mask"]} if "attention_mask" in text else {})))
    if text and "visual_feats" in params:
        feat, pos = getattr(cfg, "visual_feat_dim", None), getattr(cfg, "visual_pos_dim", None)
        if _is_int(feat) and _is_int(pos):
            out.append(dict(text, visual_feats=torch.randn(BATCH, 8, feat, generator=g),
                            visual_pos=torch.rand(BATCH, 8, pos, generator=g)))
    if text and "use_cache" in params:  # (a model whose cache cannot be made from its config: BLT's)
        late.append(dict(text, use_cache=False))
    task_len = _find(cfg, ("task_seq_len",), ())
    if "task_inputs" in params and pixels is not None and task_len:  # (OneFormer: the task prompt's token ids,
        late.append({"pixel_values": pixels,                         # task_seq_len of them)
                     "task_inputs": torch.randint(3, SHRINK["vocab"], (BATCH, task_len), generator=g)})
    ratios, patch = getattr(cfg, "scaled_images_ratios", None), getattr(cfg, "patch_size", None)
    if "pixel_values" in params and isinstance(ratios, list) and ratios and _is_int(patch) and min(ratios) > 0:
        size = int(math.ceil(patch / min(ratios)))  # (DepthPro: its smallest scale still one patch)
        late.append({"pixel_values": torch.randn(BATCH, 3, size, size, generator=g)})
    d_model = _find(cfg, ("d_model",), ())
    if "inputs" in params and "input_ids" not in params and d_model:  # (Perceiver without a preprocessor)
        late.append({"inputs": torch.randn(BATCH, SEQ, d_model, generator=g), "attention_mask": _ids()[1]})
    if text and pixels is not None and "image_attention_mask" in params:  # (IDEFICS: images per sample, each
        late.append(dict(text, pixel_values=pixels[:, None],                # text token sees the sample's one)
                         image_attention_mask=torch.ones(*text["input_ids"].shape, 1, dtype=torch.long)))
    if text and pixels is not None and not _find(cfg, IMAGE_TOKENS, ()) and _patch_tokens(cfg):
        late += _image_text(cfg, params, text, pixels, _patch_tokens(cfg))  # (Llama-4: a token per 2 x 2 patches)
    return out + late


MELS = 128  # the mel bins of an audio input whose config names none (Gemma-4's audio tower: 128)


def _find_any(cfg, keys):
    """The first positive integer among `keys` on the config or on any sub-config under it, depth first."""
    d = cfg.to_dict() if hasattr(cfg, "to_dict") else cfg
    return next((v[k] for v in _dicts(d) for k in keys if _is_int(v.get(k)) and v[k] > 0), None)


def _required(cfg, params, g, text, given: list) -> list:
    """Candidates, tried last, for a forward with required arguments (no default) that no other candidate
    gives, each built from its name and the config (all the required ones, so that one candidate has them
    together): input_features mel features (the mel count of the config
    or of any sub-config, else MELS; (batch, mels, frames) then (batch, frames, mels); beside a waveform
    (input_values, 0.24 s at 16 kHz, (batch, samples) then (batch, 1, samples)) as many frames as the
    config's downsampling_ratios make of it: X-Codec2's semantic and acoustic frames are concatenated);
    pixel_values_videos a clip of 4 frames of the vision config's image size (PE Video); patch positions
    (pixel_position_ids: the (x, y) of a grid of 2 x pooling_kernel_size patches a side) with the patches
    flattened as pixel_values (batch, patches, 3 x patch_size^2) (Gemma-4's vision tower); any other tensor
    (Mimi's and Pocket-TTS's decoder latents, VibeVoice's hidden_states, Nemotron's inputs_embeds, MuSE's
    noise_embeds and context_hidden_states) hidden-size features, (batch, hidden, 24) then (batch, 24, hidden)
    (and for a width-1 channels config: a waveform (batch, channels, samples), VibeVoice's encoder). With the
    text when the forward takes input_ids. [] when every required argument is given by some candidate."""
    import itertools
    need = [k for k, p in params.items() if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if all(any(k in c for c in given) for k in need):
        return []
    samples = 3840
    hidden = _find(cfg, _H, ()) or _find_any(cfg, _H) or SHRINK["hidden"]
    hop = getattr(cfg, "downsampling_ratios", None)
    forms = {}
    for k in need:
        if k == "input_features":
            mels = _find_any(cfg, ("num_mel_bins", "input_feat_size", "n_mels", "feature_size",
                                   "feature_projection_input_dim")) or MELS
            frames = samples // math.prod(hop) if "input_values" in params and isinstance(hop, list) and hop \
                else AUDIO_FRAMES
            f = torch.randn(BATCH, mels, frames, generator=g)
            forms[k] = [f, f.transpose(1, 2).contiguous()]
        elif k == "input_values":
            wave = torch.randn(BATCH, samples, generator=g)
            forms[k] = [wave, wave[:, None]]
        elif k == "pixel_values_videos":
            vc = getattr(cfg, "vision_config", None) or cfg
            size = getattr(vc, "image_size", None)
            size = size[0] if isinstance(size, (list, tuple)) else size if _is_int(size) else 224
            forms[k] = [torch.randn(BATCH, 4, 3, size, size, generator=g)]
        elif k.endswith("position_ids") and "pixel_values" in params and _find(cfg, ("patch_size",), ()):
            side = 2 * (_find(cfg, ("pooling_kernel_size", "spatial_merge_size", "merge_size"), ()) or 2)
            ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
            forms[k] = [torch.stack([xs.flatten(), ys.flatten()], -1).repeat(BATCH, 1, 1)]
            patch = _find(cfg, ("patch_size",), ())
            forms["pixel_values"] = [torch.randn(BATCH, side * side, 3 * patch * patch, generator=g)]
        elif k not in ("input_ids",) and not (k == "pixel_values" and any(
                x.endswith("position_ids") for x in need)):
            h = torch.randn(BATCH, hidden, SEQ, generator=g)
            forms[k] = [h, h.transpose(1, 2).contiguous()]
            ch = getattr(cfg, "channels", None)
            if _is_int(ch) and ch < 4:
                forms[k].append(torch.randn(BATCH, ch, samples, generator=g))
    base = dict(text) if text and "input_ids" in params else {}
    return [dict(base, **dict(zip(forms, combo))) for combo in itertools.product(*forms.values())]


IMAGE_TOKENS = ("num_query_tokens", "latent_query_num", "image_seq_length", "mm_tokens_per_image")


def _patch_tokens(cfg) -> int | None:
    """The image tokens of one image for a config that names no count (IMAGE_TOKENS) but whose every patch
    becomes a token, r x r patches merged into one by a pixel shuffle (Llama-4: (448 / 14)^2 x 0.5^2 = 256):
    (image_size // patch_size)^2 x pixel_shuffle_ratio^2 of the vision config; None without a patch grid."""
    vc = getattr(cfg, "vision_config", None)
    size, patch = getattr(vc, "image_size", None), getattr(vc, "patch_size", None)
    ratio = getattr(vc, "pixel_shuffle_ratio", None) or 1.0
    if not (_is_int(size) and _is_int(patch) and patch > 0):
        return None
    n = (size // patch) ** 2 * ratio ** 2
    return int(n) if n == int(n) and n >= 1 else None


def _image_text(cfg, params, text: dict, pixels, n: int | None = None,
                keys=("image_token_id", "image_token_index")) -> list:
    """Text with an image's placeholders, for the multimodal models that take both and place the image's
    embeddings at marked positions: the config's image-token count (IMAGE_TOKENS: BLIP-2's 32 query tokens,
    Kosmos-2's 64 latent queries) placed before the text's 24 tokens, as the config's image token (text ids
    equal to it become 3) and, for a model that takes image_embeds_position_mask (Kosmos-2), marked there;
    the attention mask grows by as many ones. [] when the config names no count (`n`: the count to use
    instead of the config's: _patch_tokens; `keys`: the names of the placeholder token)."""
    n = n or _find(cfg, IMAGE_TOKENS, ())
    if not n:
        return []
    tok = next((getattr(cfg, k) for k in keys if _is_int(getattr(cfg, k, None))), None)
    if tok is None and "image_embeds_position_mask" not in params:
        return []
    ids = text["input_ids"]
    body = torch.where(ids == tok, 3, ids) if tok is not None else ids
    lead = torch.full((ids.shape[0], n), tok if tok is not None else 3, dtype=ids.dtype)
    cand = {"input_ids": torch.cat([lead, body], 1), "pixel_values": pixels}
    if "attention_mask" in text:
        cand["attention_mask"] = torch.cat([torch.ones_like(lead), text["attention_mask"]], 1)
    if "image_embeds_position_mask" in params:
        marks = torch.zeros_like(cand["input_ids"], dtype=torch.bool)
        marks[:, :n] = True
        cand["image_embeds_position_mask"] = marks
    if "qformer_input_ids" in params:
        cand.update(qformer_input_ids=ids, **({"qformer_attention_mask": text["attention_mask"]}
                                               if "attention_mask" in text else {}))
    return [cand]


def _masking_noise(params, cfg, g):
    """The `noise` input of a masked-image model (ViT-MAE's random_masking argsorts it to pick the patches
    kept), given to both runs so the comparison is of the network, not of two random generators: one random
    permutation of 0..n-1 a row over the n patches (distinct integers: exact in bfloat16 up to 256, so the
    device's argsort sees the CPU's order). None when the model takes no noise or has no patch grid."""
    if "noise" not in params:
        return None
    vc = getattr(cfg, "vision_config", None) or cfg
    size, patch = getattr(vc, "image_size", None), getattr(vc, "patch_size", None)
    size = size[0] if isinstance(size, (list, tuple)) else size
    patch = patch[0] if isinstance(patch, (list, tuple)) else patch
    if not (_is_int(size) and _is_int(patch) and patch > 0):
        return None
    n = (size // patch) ** 2
    return torch.stack([torch.randperm(n, generator=g) for _ in range(BATCH)]).float()
