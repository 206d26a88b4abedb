"""The zoo's shrunk configs (src/ttnn_eager/tools/zoo/shrinking.py, configs.py): the generic shrink, its repair rules
and the sizes tied across sub-configs."""
import pytest

from ttnn_eager.tools import zoo


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


def test_tied_fills_image_token_and_vocabulary_map_left_to_processors():
    from transformers import Blip2Config, ChameleonConfig
    d = Blip2Config().to_dict()
    assert zoo._tied(d, zoo.shrink(d, repair=True))["image_token_index"] == 1023
    d = ChameleonConfig().to_dict()
    assert zoo._tied(d, zoo.shrink(d, repair=True))["vocabulary_map"] == {}


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
