"""What a zoo result means where docs/zoo.md's table alone would mislead (each measured)."""
from __future__ import annotations

# What a result means where the table alone would mislead (each measured: the command is in the note)
NOTES = {
    "blt": "its hash embeddings take a rolling polynomial hash of byte n-grams in int64: powers of primes up to "
    "9.6e9 whose products wrap around int64 on purpose. The device's integers are int32, so those values are kept "
    "exactly on the host and the four ops on them (pow, mul, sum, remainder) run on the counted CPU fallback; the "
    "hash modulo the table size fits int32 and goes back to the device for the embedding lookup: the hashes equal the "
    "CPU's.",
    "depth_pro": "repaired: patch_size 56 (4 of its DINOv2 encoders' 14-pixel patches, their image_size 56), so "
    "the default 224 x 224 image holds one patch at its smallest scale (0.25). With the default 384 patches the "
    "image had to be 1536 x 1536 and the device forward took over 25 minutes; now 84 s in all.",
    "glm46v": "its text path only (input_ids): the image path needs image_grid_thw and the matching placeholder "
    "tokens, which the zoo does not build for it. Repaired: its text model's mrope_section, read from glm4v's "
    "module ([8, 12, 12], scaled to the shrunk rotary half: [2, 3, 3]).",
    "glmga": "as glm46v: the text path only, mrope_section from glm4v's module.",
    "deepseek_ocr2": "its text path only (input_ids). Repaired: mlp_layer_types, None by default and indexed by "
    "layer, every layer \"sparse\" (the mixture of experts runs).",
    "lightglue": "image pairs of 32 x 32. Shapes differ as on the CPU in bfloat16: the shrunk SuperPoint's "
    "keypoint scores all lie within 2e-4 of 1/65 (0.015383 to 0.015386 in float32), finer than bfloat16's step "
    "there (6e-5), so in bfloat16 every score is 0.015381, every pixel ties with its neighbourhood's maximum and "
    "NMS keeps them all: 784 keypoints an image against the CPU's 17 (at 96 x 96, 8464 against 184: the "
    "[4, 1, 8464, 8464] attention mask and the mock's float32 shadows of the all-pairs tensors took the host "
    "past 16 GB; at 224 x 224 a 17.9 GiB ttnn.expand). With float32 storage the shapes agree and Pearson is "
    "1.0000. Fixed on the way: flip/index of rows wider than EMBEDDING_WIDTH (LightGlue's flip of "
    "[2, 2, 784, 256] descriptors) overflowed ttnn.embedding's L1.",
    "voxtral_realtime": "the text (24 tokens) with 192 mel frames: audio_length_per_tok 8 frames per text token "
    "(its audio and text embeddings are added position by position).",
    "instructblipvideo": "a clip of 4 frames (the 224 image repeated) and the text after 4 x 32 video-token "
    "placeholders (its query tokens per frame); repaired: video_token_index, None by default, the vocabulary's "
    "last id.",
    "nemotron3_5_transcribe_audio": "mel features alone (128 bins x 128 frames). Low accuracy is bfloat16's: the "
    "CPU in bfloat16 gives the same 0.826, float32 storage 1.000000.",
    "rf_detr": "an image of 504 x 504 (its windowed DINOv2 splits the 36 x 36 patch grid into 4 x 4 windows; 518 "
    "does not split). Low accuracy is bfloat16's: the CPU in bfloat16 0.257, float32 storage 1.000000 (the "
    "encoder's top-300 proposals are chosen by scores bfloat16 reorders).",
    "sam3_tracker": "low accuracy is bfloat16's: the CPU in bfloat16 gives the same 0.911, float32 storage "
    "1.000000.",
    "sam3": "the lowest Pearson, -1.0, is presence_logits (2, 1): two values 0.0014484 and 0.0014489 on the CPU, "
    "0.0014420 and 0.0014343 on the device, whose order bfloat16 flips (max error over all outputs 0.0066). The "
    "other outputs: pred_masks 0.99988, pred_boxes 0.99997, pred_logits 0.99995, semantic_seg 0.99991, "
    "decoder_reference_boxes 0.98057 (boxes near 0.5 rounded to bfloat16). Float32 storage 1.000000.",
    "sam3_lite_text": "low accuracy is bfloat16's: the CPU in bfloat16 gives the same 0.979, float32 storage "
    "1.000000.",
    "moonshine_streaming": "repaired at construction: its decoder config has no num_key_value_heads, which the "
    "modeling module reads (heads = key-value heads).",
    "pe_video": "repaired: its video tower, a timm vit_pe_core_large_patch14_336 with no model_args (300M "
    "parameters, 336 x 336 frames), is built with the shrunk sizes (embed_dim 64, depth 2, 4 heads) for 224 x 224 "
    "frames; a clip of 4 frames.",
    "pe_video_encoder": "as pe_video.",
    "t5gemma2_encoder": "repaired at construction: its text config has no dropout_rate, which the modeling module "
    "reads (0.0).",
    "fastspeech2_conformer": "the output length comes from `round()` of predicted durations: computed from "
    "bfloat16-stored activations, some round the other way (9 frames instead of 11 since 696782b or earlier; 10 "
    "at bb40c65, whose figures the rest of this note gives). With "
    "`configure(float32_storage=\"float32\", shadow_numerics=\"exact\")` the shapes are the CPU's and Pearson "
    "1.000000 (the fallback of `round`/`repeat_interleave` itself is faithful). The 2 durations that flip are "
    "0.044 and 0.035 from the rounding boundary on the CPU; the CPU's own float32 duration predictor applied to the "
    "device's encoder output (Pearson 0.99988) flips the same 2, so no float32 island after the encoder could "
    "help (docs/numerics.md).",
    "muse_spark_text": "the router computes `sigmoid(logits * 0.18)` in float32 on purpose: its values lie within "
    "0.5 +- 0.002, below bfloat16's resolution there (2^-9), so with float32 stored as bfloat16 (the default) the "
    "top-2 expert choice is noise (router scores Pearson 0.993, layer 0's experts 0.958). CPU bfloat16 weights "
    "alone give 0.99975; `float32_storage=\"float32\"` gives 1.000000.",
    "muse_spark": "its text model is muse_spark_text (the same router; not measured apart with float32 storage).",
    "bit": "bfloat16 storage across 48 weight-standardized convolutions of a random-weight ResNet-50 whose "
    "activations grow to ~180: each bottleneck loses a little (encoder 0.964); CPU bfloat16 is below the device "
    "at every module (encoder 0.955, output 0.938). docs/numerics.md.",
    "dac": "the residual vector quantizer picks each position's nearest codebook entry: near-ties go the other "
    "way in bfloat16 (the quantizers' input is at Pearson 0.99995, their picked vectors 0.88 to 1.0; CPU bfloat16 "
    "flips as many: 0.964), while the decoded audio stays at 0.999. docs/numerics.md.",
    "vit_mae": "the masking noise is an input (`noise`, the same seeded permutation on both runs): the random "
    "masking would otherwise keep different patches on the CPU and on the device (Pearson 0.02).",
    "rt_detr": "builds its sine position embedding in float64 on the input's device (MPS alone excepted): the zoo "
    "runs the device forward with `configure(float64=\"float32\")` (float64 stored and computed as float32; "
    "the default refuses float64 with a TypeError). Its low Pearson is a tie: with the seeded weights the "
    "encoder's class scores of all 1029 anchors are -0.693147 +- 6e-7 (11 distinct float32 values), so which "
    "300 anchors top-k keeps is float32 rounding noise on the CPU and a tie on the device; the encoder outputs "
    "agree (>= 0.99994), the query boxes picked from them do not (0.707).",
    "grounding-dino": "two-stage: the decoder's 900 queries are the top-900 of its 1045 encoder anchors by their "
    "best text-token class score, in score order. The scores spread over [-13.4, 30.3] with a median gap of 0.018 "
    "between neighbours in sorted order, while bfloat16's spacing there is up to 0.125 (the device's scores: median "
    "error 0.11, CPU bfloat16's 0.09; the CPU's own float32 scores rounded to bfloat16 leave 511 distinct values of "
    "1045): the kept set is the CPU's (99.7-99.8% of the anchors) but its order is noise (6-7% of the ranks agree; "
    "CPU bfloat16: 8-10%). The outputs in rank order -- init_/intermediate_reference_points and encoder_pred_boxes "
    "(0.549), the decoder's hidden states (0.82, 0.86: query i is learned embedding i with the rank-i anchor) -- "
    "are other rows; the device's reference points matched to the CPU's by anchor are at 0.999997, and every "
    "encoder output is at >= 0.99983. CPU bfloat16 gives 0.574; `configure(float32_storage=\"float32\", "
    "shadow_numerics=\"exact\")` 1.000000. (No CPU fallback: the phrase masks' cummax/cummin are lowered.)",
    "mm-grounding-dino": "as grounding-dino (top-900 of 1045 anchors in score order): its scores lie in [-6.26, "
    "-0.81], median neighbour gap 0.0023 against a device error of 0.014 (median); the same set (99.7%), 8-9% of "
    "the ranks agree (CPU bfloat16: 9%), reference points matched by anchor 0.999997; CPU bfloat16 0.540, "
    "float32 storage 1.000000.",
    "flex_olmo": "a mixture-of-experts router on near-uniform probabilities (random weights: 0.25 +- 0.01 over 4 "
    "experts, top-2 gaps down to 3e-5), so near-ties pick other experts: layer 0 routes 6 of 48 tokens "
    "differently from the CPU (CPU bfloat16: 0), and each changed token's expert output is another function. "
    "Module by module the device's error before the router is ~1.5x CPU bfloat16's at the default matmul "
    "fidelity (HiFi2: q_proj 1 - Pearson 9e-6 against 4e-6) and equal with `configure(math_fidelity=\"HiFi4\")`, "
    "but that gives 0.99306, and the router computed in float32 storage as well 0.99306: the flips come from "
    "bfloat16 activations, as CPU bfloat16's would for other seeds. `float32_storage=\"float32\"` gives 1.000000. "
    "The other MoE entries below 0.999 (axk1, beam, glm_moe_dsa, kolibri1, openai_privacy_filter, gpt_oss, "
    "minimax_m3_vl_text) measured with HiFi4: 0.967, 0.992, 0.997, 0.996, 0.997, 0.998, 0.998 (minimax_m3_vl: "
    "0.99926).",
    "fastspeech2_conformer_with_hifigan": "as fastspeech2_conformer. With `configure(math_fidelity=\"HiFi4\")` "
    "fastspeech2_conformer's shapes are the CPU's (Pearson 0.99922).",
    "efficientnet": "shrunk to depth multiplier 1.0 (B0's 16 blocks) at 224x224. Its pooler is "
    "`nn.AvgPool2d(hidden_dim=2560, ceil_mode=True)` over a 7x7 map: TT-NN's avg_pool2d with a window wider than "
    "its input never returned (a kernel of 32 on 7x7 killed the process: SIGSEGV in "
    "`sliding_window::generate_op_trace_metadata`); such windows are now a sum over H and W (lowerings/pooling.py).",
    "align": "its image tower is efficientnet's. Its image embeddings are NaN on the device: the random-weight "
    "tower's pooled features are ~5e-23, their squares float32 subnormals (~6e-44) that the device flushes to 0 (as "
    "Tensix does), so the L2 norm is 0 and 0/0 NaN; `image_embeds / image_embeds.norm()` has no epsilon.",
    "videoprism": "its lowest outputs are `logits_per_text`/`logits_per_video`: `exp(similarity)` divided by its "
    "column sums, 2x2 values within 0.4972 to 0.5028, i.e. one or two bfloat16 steps (2^-8 below 0.5) apart. CPU "
    "bfloat16 does better on them (1 - Pearson 6.2e-4 against 8.6e-2) by one rounding: the device's row sum "
    "exp(0.0594) + exp(0.0689) = 1.0625 + 1.0703 = 2.1328 is a bfloat16 tie that rounds to 2.125, so one value "
    "is 1.0625 / 2.125 = 0.5 where the CPU's are 0.49609 (float32: 0.49735). The similarities differ because the "
    "default HiFi2 matmuls (6 bits of the activation operand, numerics.py) double the embeddings' error (1 - "
    "Pearson: text_embeds 4.9e-5 against CPU bfloat16's 2.2e-5, video_embeds 1.4e-4 against 1.1e-4; layer 0's "
    "q_proj 1.4e-5 against 9.7e-6 from the same input). With `configure(math_fidelity=\"HiFi4\")` every module's "
    "error is CPU bfloat16's within 3% and the 2x2 outputs are its values (0.99939); float32 storage gives "
    "1.000000.",
    "vits": "the output length is `ceil(exp(log_duration))` frames per token. Measured again at 696782b and "
    "325027c the device makes 39 frames where the CPU makes 40 (a shape difference; CPU bfloat16's length "
    "differs too, float32 storage gives the CPU's shapes and 1.000000); the figures below are those of ef64eb0. The float32 CPU's 8.0186 frames "
    "(row 0, token 13: 9 frames) is not a bfloat16 value (8.0 and 8.0625 are), so every bfloat16 forward gives 8 "
    "(so does the device given the CPU's float32 log-durations). CPU bfloat16 therefore makes 39 frames, "
    "waveform (2, 9984) against (2, 10240): its \"1.0\" is the Pearson of the 2-value `sequence_lengths` alone, "
    "the only output of the CPU's shape (`shapes_cpu_bfloat16`). The device also gets token 7's 3.9016 frames as "
    "4.2 (log-duration 1.4375 against 1.3614; CPU bfloat16's 1.2969 is as far off the other way) and so 5 frames: "
    "40 in all, the CPU's shape, but every frame from token 7 on is shifted by one against the CPU's alignment "
    "(spectrogram 0.933, waveform 0.899). The duration predictor's output itself is closer to float32 on the "
    "device (1 - Pearson 3.8e-4, largest log-duration error 0.078) than in CPU bfloat16 (4.8e-4, 0.099), and "
    "the noise (`torch.randn_like` on ttnn:0) is the CPU generator's draws. Given the float32 durations (each "
    "half a frame from its boundary) on every run, the waveform is 0.99667 on the device, 0.99628 in CPU "
    "bfloat16 (spectrogram 0.99993 and 0.99990); float32 storage gives 1.000000.",
    "openai_privacy_filter": "its router is float32 on purpose (`F.linear(hidden_states.float(), ...)`, then a "
    "softmax over the top-2 of 4 logits, divided by 2: scores 0.25 +- 0.03). CPU bfloat16 computes it in float32; "
    "the device stores float32 as bfloat16: layer 0's router logits 1 - Pearson 1.7e-5 against 6.0e-6, its scores "
    "2.2e-4 against 6.2e-6 (the device's scores are exactly the bfloat16 rounding of the float32 softmax of its "
    "logits). In layer 1, 2 of 48 tokens pick another expert (top-2 logit gaps 2.6e-4 and 1.9e-3; CPU bfloat16: "
    "none), so that layer's experts are at 1.7e-2 against 1.6e-5. With `math_fidelity=\"HiFi4\"` the same 2 "
    "flip (output 0.99746); `float32_storage=\"float32\"` gives 1.000000.",
    "kimi_linear": "its KDA forget gate computes `log(1.0 + exp(g))` on `forget_gate.float() + dt_bias` in "
    "float32 on purpose: dt_bias is the inverse softplus of dt in [1e-3, 1e-1], so g lies in [-7.0, -2.2] and "
    "exp(g) is ~0.01 (median), below the spacing of bfloat16 above 1 (2^-7): with float32 stored as bfloat16 "
    "`1.0 + exp(g)` loses most of exp(g), the softplus up to 100% (1 - Pearson of layer 0's forget gate 3.5e-3 "
    "against CPU bfloat16's 3.0e-5, whose float32 is real). The gate alone on the device equals a CPU emulation "
    "that rounds every op's output to bfloat16 (3.548e-3 both; `log1p` would give 5.3e-5); float32 storage: "
    "1.7e-7. Layer 0's attention output is at 8.8e-3 (CPU bfloat16 4.1e-5); HiFi4 changes nothing there.",
    "siglip2": "the default HiFi2 matmuls (6 bits of the activation operand, numerics.py): layer 0's text "
    "attention output (out_proj) is at 1 - Pearson 6.6e-5 against CPU bfloat16's 2.3e-5 and text_embeds at 1.7e-4 "
    "against 4.7e-5; the 2x2 `logits_per_text` (logit_scale x cosine + bias: -0.17 to 0.07, small differences "
    "of the embeddings) at 1.2e-3 against 1.5e-4. With `configure(math_fidelity=\"HiFi4\")`: 0.99980 (CPU "
    "bfloat16 0.99985; text_embeds 4.4e-5); float32 storage gives 1.000000.",
    "sam2": "its lowest output is `object_score_logits`: 2 values (the CPU's 9.995e-6 and 8.131e-6) whose "
    "Pearson is +-1 by construction; the device's are within 1.7e-5 of them and CPU bfloat16 gets -1.0 too. The "
    "other outputs: iou_scores 0.999988, pred_masks 0.99973, image_embeddings 0.99999 / 0.99995 / 0.99978. Run "
    "at the config's 1024x1024 image (Hiera's query pooling: 2048 windows, pooled in batch chunks).",
    "pp_doclayout_v3": "float64 position embedding as rt_detr: run with `configure(float64=\"float32\")`.",
    "pp_doclayout_v4": "float64 position embedding as rt_detr: run with `configure(float64=\"float32\")`.",
    # torchvision detectors (seeded random weights, 10 classes): per stage on the device, on the CPU in bfloat16
    # (explain_accuracy: nms and roi_align given float32) and with float32 storage; "finds a/b of the CPU's
    # boxes": same label, every coordinate within 1 px, per image. No lowering is wrong in any of them.
    "torchvision:ssdlite320_mobilenet_v3_large": "ties, not a lowering: the class scores are softmax(~0) = 0.1 "
    "+- 0.003 with exact float32 ties (class 1 of image 0: 644 distinct values over 3234 anchors, its 300th best "
    "shared by 228 anchors), so which 300 anchors a class's top-k keeps, and the order nms visits equal scores "
    "in, is each sort's tie order. Backbone and head >= 0.99999 on the device (CPU bfloat16 the same); with float32 "
    "storage their largest error is 9e-8, yet 159 of the 2700 boxes nms gets are other (tied) anchors: 0.273, and "
    "the CPU in float64 gives 0.301 against its own float32. The device finds 65/74 of the CPU's 300/300 boxes, "
    "CPU bfloat16 73/85 (-0.222), float32 storage 196/200, CPU float64 166/156.",
    "torchvision:ssd300_vgg16": "ties, and batched_nms in bfloat16. The random VGG (no batch norm) has class "
    "logits up to +-85: 390 anchors of image 0 score exactly 1.0 and so do all 200 boxes kept, so which and in "
    "what order is tie order (the CPU in float64: -0.077 against its float32). And batched_nms's coordinate trick "
    "(each box moved by class x (max coordinate + 1), up to ~2700) runs on the device: torchvision takes it for a "
    "non-CPU tensor of up to 25,000 boxes (on the CPU up to 1,000; here 3,600: a loop over classes), and in "
    "bfloat16 (spacing 16 above 2048) it moves boxes by pixels: the device finds 52/26 of the CPU's 200/200 boxes, "
    "the same forward with batched_nms computed on the host in float32 117/123, CPU bfloat16 123/121 (0.312). "
    "Float32 storage (-0.781, 172/181) equals the CPU's float32 forward made to take the coordinate trick, to the "
    "last digit. Backbone 0.99992, head 0.99996 (CPU bfloat16 0.99991, 0.99997).",
    "torchvision:retinanet_resnet50_fpn": "bfloat16 alone: float32 storage gives 0.99999999998 (the CPU in float64 "
    "1 - 2e-12), CPU bfloat16 0.071. Backbone 0.9999, head 0.99981 on the device (CPU bfloat16 0.99991, 0.99983); "
    "the detections are sigmoid scores above 0.05, nms and the best 300 sorted by score, so a box more or less "
    "near a threshold shifts every later row: the device finds 199/228 of the CPU's 300/300 boxes, CPU bfloat16 "
    "235/223. Its 877 boxes take the coordinate trick on the CPU as well; batched_nms on the host in float32 "
    "changes nothing (199/229).",
    "torchvision:fasterrcnn_mobilenet_v3_large_320_fpn": "bfloat16 alone, at the RPN: its objectness logits are "
    "+-0.008 (scores 0.5 +- 0.002, one bfloat16 step there: 2^-9 below 0.5, 2^-8 above), so the order nms visits "
    "the 330 anchors in is noise: proposals at 0.48 (CPU bfloat16 0.48) after a backbone at 0.99998 and an RPN head at 0.99996; the "
    "class scores are 0.1 +- 0.002 too. The device finds 61/61 of the CPU's 100/100 boxes, CPU bfloat16 63/63 "
    "(0.506), float32 storage 100/100 (0.9985; the CPU in float64 0.9992); batched_nms on the host in float32: "
    "0.479.",
    "torchvision:fasterrcnn_mobilenet_v3_large_fpn": "at 96x96 the network of fasterrcnn_mobilenet_v3_large_320_fpn "
    "(they differ in the RPN's top-n, 150 or 1000 per level, and its levels have at most 135 anchors): the same "
    "outputs, the same figures.",
    "torchvision:fasterrcnn_resnet50_fpn": "the CPU in bfloat16 keeps fewer boxes too: 26 and 29 detections "
    "(device 22 and 26, CPU 50 and 48; float32 storage: the CPU's shapes, 0.99999997). Backbone 0.99989, RPN head "
    "0.99945 (CPU bfloat16 0.9999, 0.99947); the random box deltas clip many proposals to the image border, and "
    "49 of the RPN's 550 candidates of image 0 are thinner than 0.5 px on the CPU, 7 on the device (bfloat16 "
    "spacing: 0.5 between 64 and 128), which has 516 candidates after remove_small_boxes (CPU bfloat16 514); nms "
    "keeps 86 proposals (CPU 117, CPU bfloat16 83). batched_nms on the host in float32: 23 "
    "and 26. The CPU in float64 against its float32: 0.694 (49 of 50 boxes found).",
    "torchvision:fasterrcnn_resnet50_fpn_v2": "as fasterrcnn_resnet50_fpn: CPU bfloat16 11 and 15 detections, "
    "device 11 and 12, CPU 39 and 44; backbone 0.99988, RPN head 0.99948 (CPU bfloat16 0.9999, 0.99949); "
    "batched_nms on the host in float32: 11 and 12. Float32 storage is not measured (a convolution's DRAM "
    "slicing finds no configuration at float32 sizes).",
    "torchvision:maskrcnn_resnet50_fpn": "as fasterrcnn_resnet50_fpn: the RPN's nms keeps 30 and 26 proposals "
    "(CPU 37 and 31, CPU bfloat16 31 and 23), then 11 and 6 detections (CPU 13 and 9, CPU bfloat16 13 and 7). "
    "Float32 storage: the CPU's shapes, boxes and scores at 1.000000, image 1's masks at 0.984: pasting a mask "
    "into the image rounds its box to whole pixels, and the boxes differ by up to 0.07 px (the CPU in float64 "
    "against its float32: masks 0.45).",
    "torchvision:maskrcnn_resnet50_fpn_v2": "as fasterrcnn_resnet50_fpn_v2: 3 and 6 detections, CPU 5 and 15, "
    "CPU bfloat16 3 and 7; float32 storage fails as there.",
    "torchvision:keypointrcnn_resnet50_fpn": "as fasterrcnn_resnet50_fpn: the RPN's nms keeps 44 and 58 "
    "proposals (CPU 72 and 72, CPU bfloat16 47 and 53), then 0 and 0 detections (CPU 5 and 1, CPU bfloat16 0 "
    "and 1). Float32 storage: the CPU's shapes, 0.9999998.",
}


# What a compiled result means where docs/zoo.md's compiled table alone would mislead (each measured)
COMPILED_NOTES = {
    "nemotron3_5_transcribe_audio": "the compiled error is PyTorch's and the model's, not the backend's: with "
    "ttnn_eager not loaded (TORCH_DEVICE_BACKEND_AUTOLOAD=0), torch.compile(backend=\"eager\") and "
    "backend=\"aot_eager\" of the same shrunk model and inputs on the CPU raise the same TorchRuntimeError while "
    "Dynamo traces: scaled_dot_product_attention of query and key of 4 heads and a value of 8. The model's v_proj "
    "has num_attention_heads heads (4), its k_proj num_key_value_heads (2). Eagerly no mask reaches sdpa, "
    "so transformers' sdpa_attention_forward calls it with enable_gqa=True (k 2 heads, v 4); traced, a (2, 1, 16, "
    "16) bool mask does, so it repeats k and v by num_key_value_groups instead (k 4, v 8).",
    "siglip": "its lowest output is the 2x2 `logits_per_text` (cosines of unit embeddings: logit_scale 1, bias "
    "0; the CPU's four values 0.00004 to 0.038, spread 0.018), whose Pearson over 4 values turns on where errors "
    "of 0.003 fall: compiled 0.99397 with max error 0.0031, eager 0.99922 with 0.0036. The compiled embeddings "
    "are the more accurate (text_embeds 0.999852 against eager's 0.999827, image_embeds 0.999947 against "
    "0.999934), and the logits computed on the CPU in float32 from the device's own embeddings are as far off "
    "(compiled 0.99191, eager 0.99884): the error is the embeddings' bfloat16 storage, not the logits' matmul "
    "(its own error 0.0006). With other seeds, where the CPU's logits spread 0.05 to 0.10, compiled gives "
    "0.99973, 0.99977, 0.99994, 0.99972 and eager 0.99982, 0.99925, 0.99994, 0.99996 (seeds 1 to 4). (Those "
    "figures are from the decomposed attention. Since 2d09afe a head size of 16 runs on TT-NN's sdpa kernel, "
    "padded to 32, and seed 0 falls the other way: eager 0.99214, compiled 0.98634. At seeds 1 to 4 eager "
    "gives 0.99954, 0.99988, 0.99989, 0.99982 with the kernel and 0.99982, 0.99925, 0.99989, 0.99990 with the "
    "decomposition, so the same spread, one seed's 4 values either way.)",
    "owlv2": "0.99854 compiled against eager mode's 0.99912 is the `add_layer_norm` fusion alone: with every "
    "other pass and that one left out, the compiled Pearson is eager mode's to the last digit (0.9991190, "
    "2026-12-06 at 5915eb5, `tools.zoo.run.run_one` with `passes.PASSES` less `add_layer_norm`; without "
    "`linear_activation` instead: 0.99854 still). TT-NN's layer_norm adds the residual inside its kernel and "
    "normalizes the sum before rounding it (its golden function, in float32), where eager mode rounds `x + r` to "
    "bfloat16 first; owlv2's lowest outputs (its box and objectness logits) move by that much. Not a wrong "
    "answer; at 0.999 the threshold falls between the two.",
    "vits": "its output length is `ceil` of predicted durations (zoo note above), which the fused layer norm moves: "
    "compiled with the fusion passes off (`options={\"fuse\": False, \"replay\": False}`), or with every pass but "
    "`add_layer_norm`, the device gives eager mode's waveform length (11776 samples for row 0 in one run of the zoo's "
    "inputs), and so does backend \"aot_eager\" on ttnn:0; with `add_layer_norm` (TT-NN's layer_norm adding the "
    "residual inside its kernel, before its own rounding) 11008, where the CPU in float32 gives 11264 (2026-12-06: "
    "the zoo's vits from tools/zoo/building.build, the RNG state reset before each call). A token's duration rounds the other way: the fused sum is not a wrong answer, and "
    "neither length is the CPU's.",
    "switch_transformers": "the encoder's top-1 router over near-ties: token (0, 2) has the CPU's top-2 logits "
    "4.6947 and 4.6877 (a gap of 0.007) and token (1, 15) 10.450 and 10.371 (0.080, about one bfloat16 step "
    "there: 0.0625). The router asks for float32, which the default storage keeps as bfloat16; compiled, both "
    "tokens go to the other expert, eager neither (router logits Pearson compiled 0.999861, eager 0.999850; max "
    "error 0.59 and 0.64), and the decoder, which attends to the encoder's output, follows (2 more tokens "
    "rerouted, output max error 2.16). With `float32_storage=\"float32\"` eager and compiled both reroute "
    "token (1, 15) alike; the CPU in bfloat16 gives 0.9952.",
}
