"""What chapter 3.4's code cells print, in both languages: readouts and the descriptions of ``confirm``'s checks.

The cells hold only code (``lesson.say(key, **fields)``); the text for each key lives here, with the same keys and
format fields in Chinese and English (``tests/test_phrases.py``). The numbers a check's description states (32.0 MB,
1/64, 20 GiB ...) are the numbers its condition checks, so they are written into both templates."""
from __future__ import annotations

from ...phrases import Phrasebook

CELLS = Phrasebook("memory_estimate.cells", {
    "zh": {
        # setup
        "device": "运行设备：{device}",
        # the original code, checked by kvlab
        "kvlab_bytes": "kvlab：每层 {per_layer:,} B = {per_layer_size}；{layers} 层共 {total:,} B = {total_size}",
        "preset_is_chapter_model": "MODEL_PRESETS 里的 LLaMA-7B 正是原文的 L = 32、H = 32、D = 128、隐藏维度 4096",
        "per_layer_three_agree": "每层的字节数：原文的代码、kvlab 的模型预设、3.2 节的公式三者完全相同",
        "total_three_agree": "总字节数：三者也完全相同",
        "code_prints_not_comment": "原文的代码打印的是 32.0 MB 和 1.00 GB，不是注释里的 16.0 MB 和 0.50 GB",
        # the chapter's four figures
        "three_figures_half": "每层、总计、8192 个 token 这三个数字，原文写的都恰好是正确值的一半",
        "three_figures_wrong": "所以这三个数字都不成立",
        "over_16gb_hypothetical_only": "「超过16GB」对原文假设的 70B 成立，对真实的 Llama-3-70B 不成立",
        "hypothetical_is_8x": "假设的 70B 是 20 GiB，正好是 Llama-3-70B 的 8 倍",
        "long_s_past_context": "8192 个 token 时是 4 GiB，这个长度超过了 LLaMA-7B 发布时的上下文（⚠）",
        "no_warning_70b": "两个 70B 的行都没有 ⚠",
        # why exactly half
        "as_written_prints": "原样的代码打印 32.0 MB 和 1.00 GB",
        "five_changes_print_comment": "S 改成 1024、只存 K、每元素 1 字节、H 减半、D 减半：每一种都恰好打印出注释里的两个数",
        "half_l_total_only": "L 减半只让总数对得上，每层仍是 32.0 MB",
        "exactly_five_changes": "表里恰好有五种改动得到注释里的两个数",
        "comment_times_4": "注释里的 0.50 GB 乘 4 正好是原文的「约2GB」，而 8192 正好是 2048 的 4 倍",
        # GB or GiB
        "gib_vs_gb": "这 1 GiB 换成 GB 是 1.07 GB：两种单位只差约 7%，远不是 2 倍",
        # the 70B: 64 KV heads or 8
        "two_readings": "按 S = 2048 读是 5 GiB，不到 16 GB；按 S = 8192 读是 20 GiB，超过 16 GB",
        "five_times_7b": "同样长度下 70B 的缓存是 LLaMA-7B 的 5 倍；原文的「约2GB」乘 5 只有 10 GB，改正后的 4 GiB 乘 5 才超过 16 GB",
        "same_shape_models": "和原文假设的 70B 缓存形状相同的真实模型是 LLaMA-65B 和 Qwen1.5-72B",
        "same_shape_heads": "它们都是 80 层、64 个查询头、64 个 KV 头、头维度 128",
        "gqa_70b_heads": "Llama-2-70B 和 Llama-3-70B 都是 64 个查询头、只有 8 个 KV 头（GQA）",
        "shrinks_by_kv_heads": "每一对里，缓存恰好按 KV 头数之比缩小",
        "only_llama2_past_context": "S = 8192 只超过了 Llama-2-7B 的上下文",
        # the calculator
        "calculator_limits": "序列长度最大 {max_seq_len:,} 个 token；Mistral-7B 和 Gemma-2-9B 的窗口都是 {window:,} 个 token；"
                             "DeepSeek-V3 每层每个 token 存 {lora_rank} 维压缩向量 + {rope_dim} 维 RoPE 键 = {latent_dim} 个数",
        "over_20_real_models": "收录的真实模型超过 20 个",
        "falcon_one_64th": "Falcon-7B 每个 token 的缓存是 LLaMA-7B 的 1/64：1 个 KV 头（而不是 32 个），头维度 64（而不是 128）",
        "405b_per_token": "Llama-3.1-405B 每个 token 504 KiB，比 LLaMA-7B 的 512 KiB 还少",
        "overlapping_lines_visible": "上图里 405B 是虚线、LLaMA-7B 是粗线，两条重合的线都看得见",
        "mistral_plain_formula_double": "8192 个 token 时，普通公式给 Mistral-7B 算出的是实际的 2 倍",
        "cache_over_weights_128k": "128K 个 token 时，Llama-3.1-8B 一条序列的缓存比它的 FP16 权重还大",
        "deepseek_half_128k": "128K 个 token 时，DeepSeek-V3 的缓存约为 Llama-3.1-8B 的一半（0.45 到 0.6 倍之间）",
        # GPU memory
        "at_most_marketed_gib": "表里每张卡的总量都不超过把标称数字当作 GiB 读的大小",
        "a100_80_gib": "A100 80 GB 的总量正好是 80 GiB",
        "t4_ecc": "表里 T4 的总量是 16 GiB 的 15/16：开着 ECC，1/16 留给校验位",
        "usable_default": "显存使用比例默认 0.9，和 vLLM 的 gpu_memory_utilization 一样",
        # will it fit on a T4
        "t4_torch_total": "PyTorch 在 Colab T4 上报告的总容量约 {torch_total_gib} GiB，Llama-3-8B 的 FP16 权重是 {weights}",
        "llama7b_no_sequence": "LLaMA-7B 的 FP16 权重放得下，但剩下的连一条 2048 个 token 的序列都放不下",
        "sequence_is_1_gib": "这条序列的缓存正是上文算出的 1 GiB",
        "llama3_fp16_too_big": "Llama-3-8B 的 FP16 权重放不下，比 PyTorch 报告的总容量还大",
        "int8_twenty_odd": "换成 int8 权重后，能放下二十多条 2048 个 token 的序列",
        "int8_past_context": "int8 的最长上下文超过 Llama-3-8B 的上下文，读数注明这只是按公式算出的容量",
        "gqa_not_int8": "Llama-3-8B 的 8 个 KV 头让每条序列的缓存只有 LLaMA-7B 的 1/4：大多数的条数来自 GQA，不是 int8",
        "panel_default_case": "上面面板的默认设定就是第一种情况",
        # the formula against real memory
        "one_eighth": "只取 1/8 的 token，字节数也正好是 1 GiB 的 1/8",
        "multiples_of_512": "K、V 各自都是 512 字节的整数倍，所以 CUDA 分配器取整后一个字节也不多",
        "measured_only_on_gpu": "只有在 GPU（或 MPS）上才是分配器的实测",
    },
    "en": {
        # setup
        "device": "Device: {device}",
        # the original code, checked by kvlab
        "kvlab_bytes": "kvlab: {per_layer:,} B = {per_layer_size} per layer; {total:,} B = {total_size} for all "
                       "{layers} layers",
        "preset_is_chapter_model": "LLaMA-7B in MODEL_PRESETS has exactly the original chapter's L = 32, H = 32, "
                                   "D = 128 and hidden size 4096",
        "per_layer_three_agree": "Bytes per layer: the original code, kvlab's model preset and the formula from 3.2 "
                                 "give exactly the same number",
        "total_three_agree": "Total bytes: all three agree exactly as well",
        "code_prints_not_comment": "The original code prints 32.0 MB and 1.00 GB, not the 16.0 MB and 0.50 GB its "
                                   "comment shows",
        # the chapter's four figures
        "three_figures_half": "Per layer, in total and at 8192 tokens: each of the three figures the original chapter "
                              "gives is exactly half the correct value",
        "three_figures_wrong": "So none of the three figures holds",
        "over_16gb_hypothetical_only": "\"Over 16GB\" holds for the original chapter's hypothetical 70B, but not for "
                                       "the real Llama-3-70B",
        "hypothetical_is_8x": "The hypothetical 70B needs 20 GiB, exactly 8 times as much as Llama-3-70B",
        "long_s_past_context": "At 8192 tokens it is 4 GiB, and that length is past LLaMA-7B's context at release (⚠)",
        "no_warning_70b": "Neither 70B row carries a ⚠",
        # why exactly half
        "as_written_prints": "The code as written prints 32.0 MB and 1.00 GB",
        "five_changes_print_comment": "S set to 1024, K only, 1 byte per element, H halved, D halved: each of these "
                                      "prints exactly the comment's two numbers",
        "half_l_total_only": "Halving L matches only the total; per layer it is still 32.0 MB",
        "exactly_five_changes": "Exactly five changes in the table give the comment's two numbers",
        "comment_times_4": "The comment's 0.50 GB times 4 is exactly the original chapter's \"about 2GB\", and 8192 "
                           "is exactly 4 times 2048",
        # GB or GiB
        "gib_vs_gb": "This 1 GiB is 1.07 GB: the two units differ by only about 7%, nowhere near a factor of 2",
        # the 70B: 64 KV heads or 8
        "two_readings": "Read as S = 2048 it is 5 GiB, under 16 GB; read as S = 8192 it is 20 GiB, over 16 GB",
        "five_times_7b": "At the same length the 70B's cache is 5 times LLaMA-7B's; the original chapter's \"about "
                         "2GB\" times 5 is only 10 GB, and only the corrected 4 GiB times 5 exceeds 16 GB",
        "same_shape_models": "The real models whose cache has the same shape as the original chapter's hypothetical "
                             "70B are LLaMA-65B and Qwen1.5-72B",
        "same_shape_heads": "Both have 80 layers, 64 query heads, 64 KV heads and a head dimension of 128",
        "gqa_70b_heads": "Llama-2-70B and Llama-3-70B both have 64 query heads but only 8 KV heads (GQA)",
        "shrinks_by_kv_heads": "In each pair the cache shrinks by exactly the ratio of KV heads",
        "only_llama2_past_context": "S = 8192 is past the context of Llama-2-7B only",
        # the calculator
        "calculator_limits": "Sequence length goes up to {max_seq_len:,} tokens; Mistral-7B and Gemma-2-9B both "
                             "have a {window:,}-token window; per layer and per token, DeepSeek-V3 stores a "
                             "{lora_rank}-dim compressed vector + a {rope_dim}-dim RoPE key = {latent_dim} numbers",
        "over_20_real_models": "The presets include more than 20 real models",
        "falcon_one_64th": "Falcon-7B's cache per token is 1/64 of LLaMA-7B's: 1 KV head (not 32) and a head "
                           "dimension of 64 (not 128)",
        "405b_per_token": "Llama-3.1-405B needs 504 KiB per token, less than LLaMA-7B's 512 KiB",
        "overlapping_lines_visible": "In the plot above 405B is dashed and LLaMA-7B is thick, so both overlapping "
                                     "lines stay visible",
        "mistral_plain_formula_double": "At 8192 tokens the plain formula gives Mistral-7B twice its actual cache",
        "cache_over_weights_128k": "At 128K tokens, the cache of a single Llama-3.1-8B sequence is larger than the "
                                   "model's FP16 weights",
        "deepseek_half_128k": "At 128K tokens, DeepSeek-V3's cache is about half of Llama-3.1-8B's (between 0.45 "
                              "and 0.6 times)",
        # GPU memory
        "at_most_marketed_gib": "No card in the table has more memory than its marketed figure read as GiB",
        "a100_80_gib": "The A100 80 GB has exactly 80 GiB",
        "t4_ecc": "The T4 in the table has 15/16 of 16 GiB: ECC is on, and 1/16 goes to check bits",
        "usable_default": "The usable fraction of GPU memory defaults to 0.9, the same as vLLM's "
                          "gpu_memory_utilization",
        # will it fit on a T4
        "t4_torch_total": "PyTorch reports about {torch_total_gib} GiB in total on a Colab T4; Llama-3-8B's FP16 "
                          "weights take {weights}",
        "llama7b_no_sequence": "LLaMA-7B's FP16 weights fit, but the memory left cannot hold even one 2048-token "
                               "sequence",
        "sequence_is_1_gib": "That sequence's cache is exactly the 1 GiB computed above",
        "llama3_fp16_too_big": "Llama-3-8B's FP16 weights do not fit: they are larger than the total PyTorch reports",
        "int8_twenty_odd": "With int8 weights, twenty-odd sequences of 2048 tokens fit",
        "int8_past_context": "With int8 the longest context is past Llama-3-8B's own context, and the readout says "
                             "this is only the formula's capacity",
        "gqa_not_int8": "Llama-3-8B's 8 KV heads cut each sequence's cache to 1/4 of LLaMA-7B's: most of those "
                        "sequences come from GQA, not from int8",
        "panel_default_case": "The panel above starts at the first of these cases",
        # the formula against real memory
        "one_eighth": "With 1/8 of the tokens, the bytes are exactly 1/8 of 1 GiB as well",
        "multiples_of_512": "K and V are each a whole multiple of 512 bytes, so the CUDA allocator's rounding adds "
                            "not a single byte",
        "measured_only_on_gpu": "Only on a GPU (or MPS) is this the allocator's own measurement",
    },
})

say = CELLS.say
