"""What chapter 3.3's code cells print, in both languages (issue 34: code cells hold code only).

:data:`CELLS` holds the cells' readouts and the descriptions of their ``confirm`` checks; :data:`PROMPTS` the text the
cells feed the demo model. The English prompts were chosen on the English demo model (``load_demo_model(lang="en")``):
the timeline's prompt continues with the corpus's own sentence about the two phases, and the short prompt is 4 tokens,
like 「人工智能」, with FP16's largest logit error well under half the smallest top-1 gap over 200 greedy tokens and INT8's
above it, which the precision cell's checks need.

The lesson's own words are here too, each looked up when it is shown (never at import, so ``kvlab.set_language`` in
the notebook's first cell decides them): :data:`PANELS` (the panels' controls and readouts, the readout lines of the
``*_lines`` and ``explain_*`` functions that return text, the four steps' captions); the figures' words are
:data:`kvlab.viz.prefill_decode_plots.PLOTS`'s."""
from __future__ import annotations

from ...phrases import Phrasebook

CELLS = Phrasebook("prefill_decode.cells", {
    "zh": {
        # the setup cell
        "device": "运行设备：{device}",
        # one real generation as a timeline
        "timeline_prompt": "提示词「{prompt}」共 {tokens} 个 token；生成：「{text}」",
        "timeline_prefill": "第 1 次前向：phase = {phase!r}，送进 {tokens} 个 token，{ms:.2f} ms",
        "timeline_decode": "其后 {passes} 次前向：phase = {phase!r}，每次送进 {tokens} 个 token",
        "timeline_cache": "cache.length：{first} → {second} → … → {last}；每个 token 的 K/V（所有层）{per_token}，"
                          "预分配 {allocated}",
        "ttft": "TTFT = {ms:.2f} ms（{runs} 遍中最快的预填充）",
        "check_prefill_first": "第 1 次前向是预填充，送进整段提示词",
        "check_decode_after": "之后每次前向都是解码，只送进 1 个 token",
        "check_length_grows": "cache.length 从提示词长度开始，每次前向之后加 1",
        "check_bytes_used": "已用字节 = cache.length × 每个 token 的 K/V 字节",
        "check_allocated_once": "缓存只分配了一次，大小始终不变",
        "check_ttft_fastest": "TTFT 是 {runs} 遍里最快的预填充，也就是图上画的那一遍",
        # the four steps on a real cache
        "steps_lengths": "每次前向之后的 cache.length：{lengths}",
        "steps_written": "每次前向写入的 token 行（任意层、任意头）：{rows}",
        "steps_rows_per_head": "每次前向里每层、每个 KV 头新增的行数：{counts}",
        "steps_untouched": "之前存下的行逐位不变：{old}；length 之后的行仍是全 0：{rest}",
        "steps_logits": "用缓存解码的 logits 与不用缓存重算的最大差：{diff:.1e}",
        "check_prefill_length": "预填充 P 个 token 之后，length = P",
        "check_prefill_rows": "预填充写入第 0 到 P − 1 行，每层、每个 KV 头都是 P 行",
        "check_decode_length": "每步解码之后 length 加 1",
        "check_decode_row": "每步解码只写 1 行，紧接在已存的行后面",
        "check_every_head": "每一层、每个 KV 头都恰好多出这 1 行",
        "check_old_rows": "之前存下的行每次前向之后都逐位不变",
        "check_rest_zero": "从 length 起的行仍是分配时的 0",
        "check_logits_match": "用缓存算出的 logits 与整段重算只差浮点舍入（< 10⁻³）",
        # the roofline model and its costs
        "big_model": "{layers} 层，d_model = {d_model}，{heads} 个头 × {head_dim} 维，d_ff = {d_ff}，词表 {vocab}："
                     "{params:,} 个参数",
        "check_decode_intensity": "一步解码的算术强度不到 1 FLOP/字节",
        "check_prefill_intensity": "预填充 256 个 token 的算术强度超过 100 FLOP/字节",
        "flops_prefill": "预填充 32 个 token：公式 {formula:,} FLOP，torch 计数 {counted:,} FLOP",
        "flops_decode": "其后一步解码：      公式 {formula:,} FLOP，torch 计数 {counted:,} FLOP",
        "check_flops_counted": "公式与 torch 数出的运算次数完全相同（预填充和解码）",
        # prefill against decode
        "sweep_row": "P = {P:>3}：预填充 {prefill_ms:7.2f} ms（{prefill_rate:8,.0f} token/s），"
                     "一步解码 {decode_ms:6.2f} ms（{decode_rate:5,.0f} token/s），逐个送入要 {speedup:5.1f} 倍的时间",
        "sweep_how": "（{device}；每个长度生成 {repeats} 次，每次计时预填充和其后的 {steps} 步解码，两者都取最快的一次）",
        "check_prefill_half_p": "P ≥ 8 时预填充的算术强度与 P / 2 相差不到 15%",
        # batched decode
        "batch_row": "B = {B:>2}：一步 {ms:6.2f} ms，{rate:6,.0f} token/s，I = {intensity:5.2f} FLOP/字节，"
                     "{gflops:5.1f} GFLOP/s",
        "batch_how": "（{device}；每条序列的缓存里已有 {context} 个 token；每个 B 测 {repeats} 次、每次 {steps} 步，"
                     "各个 B 交替进行，取最快的一次）",
        "batch_weights": "一步要读的权重：B = 1 时 {one}，B = {B} 时 {many}（只多了 {extra} 行嵌入）",
        "check_weights_once": "整批每步只读一遍权重：B 条序列只比 1 条多读 B − 1 行嵌入",
        "check_batch_like_prefill": "B = 32 的解码与 P = 32 的预填充算术强度相差不到 10%（都是 32 行）",
        "check_short_cache_half_b": "缓存很短（8 个 token）时，I 与 B / 2 相差不到 10%",
        "check_kv_share_grows": "上下文越长，K/V 在一步读写的字节里占得越多",
        "check_intensity_falls": "上下文越长，算术强度越低",
        "check_small_matmuls_timed": "分别量了 1、2、4、8 行，每种都有耗时",
        # engineering: preallocation, unequal lengths, FP16/INT8
        "allocations": "预分配：整次生成共 {preallocated} 次分配（K、V 各一次）；"
                       "逐步拼接：{concatenated} 次（每次前向、每层、K 和 V 各一次）",
        "check_preallocated_twice": "预分配：整次生成只分配 2 次（K、V 各一次）",
        "check_concat_every_pass": "逐步拼接：每次前向、每层、K 和 V 各分配一次",
        "check_same_text": "两种缓存生成的文字完全相同",
        "check_preallocated_size": "预分配的大小正好是「提示词 + 生成数 − 1」个 token",
        "padded_lengths": "长度 {lengths}，padding {pads}：{same} / {n} 条与单独运行相同",
        "padded_slots": "槽位：分配 {allocated}，实际 {used}，分页 {paged}；{extra:.1%} 的计算花在 padding 上",
        "check_same_as_alone": "每条序列生成的 token 与它单独运行时相同",
        "check_left_padded": "左侧补齐到最长的那条",
        "check_padded_slots": "分配的槽位 = 条数 ×（最长提示词 + 生成数 − 1），从真实的缓存读出",
        "check_slots_order": "实际用到的 < 分页占用的 < 补齐分配的，且 padding 确实多花了计算",
        "precision_row": "{label}：{nbytes:,} 字节 = {size}（每元素 {element:g} 字节），最大 logit 误差 {error:.2e}，"
                         "top-1 一致 {agree:.1%}，自由生成 {matching} / {new} 个 token 与 FP32 缓存相同",
        "precision_spread": "FP32 logits 的跨度（中位数）{spread:.1f}；最大与第二大 logit 之差，最小 {margin:.3f}",
        "check_fp32_bytes": "FP32 缓存的字节 = 2 × 层数 × KV 头数 × 槽位 × D × 4（实测 = 公式）",
        "check_fp16_half": "FP16 缓存恰好是 FP32 的一半",
        "check_int8_bytes": "INT8 再减半，外加每个向量一个 4 字节的缩放系数",
        "check_error_order": "误差：0 < FP16 的 5 倍 < INT8 < logits 跨度的 1%",
        "check_fp16_greedy": "FP16 的误差小到不可能改变贪心选择，{new} 个 token 全部相同",
        "check_int8_not_greedy_safe": "INT8 的最大误差超过了最小差距的一半",
        # the page's end
        "timings_from": "本页的计时来自：{device}；roofline：{roofline}",
    },
    "en": {
        "device": "Running on: {device}",
        "timeline_prompt": "The prompt \"{prompt}\" is {tokens} tokens long; generated: \"{text}\"",
        "timeline_prefill": "Forward pass 1: phase = {phase!r}, {tokens} tokens in, {ms:.2f} ms",
        "timeline_decode": "The {passes} passes after it: phase = {phase!r}, {tokens} token in each",
        "timeline_cache": "cache.length: {first} → {second} → … → {last}; K/V per token (all layers) {per_token}, "
                          "preallocated {allocated}",
        "ttft": "TTFT = {ms:.2f} ms (the fastest prefill of {runs} runs)",
        "check_prefill_first": "Pass 1 is the prefill, and it takes in the whole prompt",
        "check_decode_after": "Every pass after it is a decode step that takes in a single token",
        "check_length_grows": "cache.length starts at the prompt's length and grows by 1 after each pass",
        "check_bytes_used": "Bytes used = cache.length × K/V bytes per token",
        "check_allocated_once": "The cache was allocated once and never changed size",
        "check_ttft_fastest": "TTFT is the fastest of the {runs} prefills, the run the figure draws",
        "steps_lengths": "cache.length after each pass: {lengths}",
        "steps_written": "Token rows each pass wrote (any layer, any head): {rows}",
        "steps_rows_per_head": "Rows each pass added in every layer and KV head: {counts}",
        "steps_untouched": "Rows stored earlier unchanged bit for bit: {old}; rows from length on still all 0: {rest}",
        "steps_logits": "Largest difference between the cached decode's logits and a recompute without a cache: "
                        "{diff:.1e}",
        "check_prefill_length": "After prefilling P tokens, length = P",
        "check_prefill_rows": "Prefill writes rows 0 to P − 1: P rows in every layer and KV head",
        "check_decode_length": "Each decode step adds 1 to length",
        "check_decode_row": "Each decode step writes exactly 1 row, right after the rows already stored",
        "check_every_head": "Every layer and every KV head gains exactly that 1 row",
        "check_old_rows": "Rows stored earlier stay unchanged, bit for bit, after every pass",
        "check_rest_zero": "Rows from length on are still the zeros they were allocated as",
        "check_logits_match": "The cached logits differ from a full recompute only by floating-point rounding (< 10⁻³)",
        "big_model": "{layers} layers, d_model = {d_model}, {heads} heads × {head_dim} dims, d_ff = {d_ff}, "
                     "vocabulary {vocab}: {params:,} parameters",
        "check_decode_intensity": "One decode step's arithmetic intensity is under 1 FLOP/byte",
        "check_prefill_intensity": "Prefilling 256 tokens has an arithmetic intensity above 100 FLOP/byte",
        "flops_prefill": "Prefill of 32 tokens:  formula {formula:,} FLOP, torch counts {counted:,} FLOP",
        "flops_decode": "One decode step after: formula {formula:,} FLOP, torch counts {counted:,} FLOP",
        "check_flops_counted": "The formula and torch's count agree exactly (prefill and decode)",
        "sweep_row": "P = {P:>3}: prefill {prefill_ms:7.2f} ms ({prefill_rate:8,.0f} token/s), "
                     "one decode step {decode_ms:6.2f} ms ({decode_rate:5,.0f} token/s), "
                     "token by token takes {speedup:5.1f}× as long",
        "sweep_how": "({device}; {repeats} generations per length, each timing its prefill and the decode steps after "
                     "it (decode steps timed: {steps}); the fastest of each counts)",
        "check_prefill_half_p": "For P ≥ 8, prefill's arithmetic intensity is within 15% of P / 2",
        "batch_row": "B = {B:>2}: one step {ms:6.2f} ms, {rate:6,.0f} token/s, I = {intensity:5.2f} FLOP/byte, "
                     "{gflops:5.1f} GFLOP/s",
        "batch_how": "({device}; each sequence's cache already holds {context} tokens; each B timed {repeats} times, "
                     "{steps} steps each, the B's taking turns; the fastest run counts)",
        "batch_weights": "Weights read per step: {one} at B = 1, {many} at B = {B} (just {extra} more embedding rows)",
        "check_weights_once": "A batch reads the weights once per step: B sequences read only B − 1 more embedding "
                              "rows than 1",
        "check_batch_like_prefill": "Decode at B = 32 and prefill at P = 32 are within 10% in arithmetic intensity "
                                    "(32 rows each)",
        "check_short_cache_half_b": "With a very short cache (8 tokens), I is within 10% of B / 2",
        "check_kv_share_grows": "The longer the context, the larger K/V's share of the bytes a step reads and writes",
        "check_intensity_falls": "The longer the context, the lower the arithmetic intensity",
        "check_small_matmuls_timed": "1, 2, 4 and 8 rows were each timed, and each took some time",
        "allocations": "Preallocation: {preallocated} allocations for the whole generation (one for K, one for V); "
                       "concatenation: {concatenated} (one for K and one for V per pass and layer)",
        "check_preallocated_twice": "Preallocation: the whole generation allocates just twice (once for K, once for V)",
        "check_concat_every_pass": "Concatenation: K and V are each allocated once per pass and layer",
        "check_same_text": "Both caches generate exactly the same text",
        "check_preallocated_size": "The preallocated size is exactly prompt + generated − 1 tokens",
        "padded_lengths": "Lengths {lengths}, padding {pads}: {same} / {n} sequences match their run alone",
        "padded_slots": "Slots: {allocated} allocated, {used} used, {paged} paged; {extra:.1%} of the compute goes "
                        "to padding",
        "check_same_as_alone": "Every sequence generates the same tokens as it does when run alone",
        "check_left_padded": "Left-padded to the longest one",
        "check_padded_slots": "Allocated slots = sequences × (longest prompt + generated − 1), read from the real cache",
        "check_slots_order": "Used < paged < padded allocation, and padding really did cost extra compute",
        "precision_row": "{label}: {nbytes:,} bytes = {size} ({element:g} bytes per element), largest logit error "
                         "{error:.2e}, top-1 agreement {agree:.1%}, {matching} / {new} tokens of a free run the same "
                         "as with the FP32 cache",
        "precision_spread": "FP32 logits' range (largest − smallest, median over positions) {spread:.1f}; smallest "
                            "gap between the largest and second-largest logit {margin:.3f}",
        "check_fp32_bytes": "FP32 cache bytes = 2 × layers × KV heads × slots × D × 4 (measured = formula)",
        "check_fp16_half": "The FP16 cache is exactly half the size of the FP32 one",
        "check_int8_bytes": "INT8 halves it again, plus one 4-byte scale per vector",
        "check_error_order": "Error: 0 < 5 × FP16's < INT8's < 1% of the logits' range",
        "check_fp16_greedy": "FP16's error is too small to change any greedy choice: all {new} tokens match",
        "check_int8_not_greedy_safe": "INT8's largest error exceeds half the smallest gap",
        "timings_from": "This page's timings come from: {device}; roofline: {roofline}",
    },
})

PROMPTS = Phrasebook("prefill_decode.prompts", {
    "zh": {
        "timeline": "人工智能模型处理一个请求，通常分为两个阶段：",  # the timeline's prompt, also its panel's first
        "short": "人工智能",  # the four steps' prompt and the precision cell's
    },
    "en": {
        "timeline": "An artificial intelligence model usually handles a request in two phases",
        "short": "A large language model",
    },
})

PANELS = Phrasebook("prefill_decode.panels", {
    "zh": {
        # the controls
        "label.prompt": "提示词",
        "label.tokens": "生成的 token 数",
        "label.step": "第几次前向",
        "label.lengths": "测量的提示词长度（逗号分隔）",
        "label.prompt_len": "提示词长度 P",
        "label.batch": "批次 B",
        "label.context": "上下文长度（每条序列缓存里已有的 token）",
        "label.padded_lengths": "提示词长度（逗号分隔）",
        "label.block": "分页块大小",
        "label.step_argument": "步骤",
        # the timeline
        "latency_tpot": "TPOT = {tpot:.2f} ms（每遍各算一次（总时间 − TTFT）÷ {steps} 个解码步，取 {runs} 遍的中位数；"
                        "图上那一遍是 {shown:.2f} ms）",
        "latency_itl": "ITL：中位数 {p50:.2f} ms，p90 {p90:.2f} ms，p99 {p99:.2f} ms（{runs} 遍共 {samples} 个解码步；{device}）",
        "phase.prefill": "预填充（prefill）",
        "phase.decode": "解码（decode）",
        "fed.prefill": "整段提示词 {tokens} 个 token",
        "fed.decode": "上一步生成的 1 个 token",
        "generated": "已生成 {step} 个 token",
        "generated_one": "已生成 {step} 个 token",
        "timeline_html": "<b>第 {step} / {passes} 次前向：{phase}</b>，输入{fed}，耗时 {ms:.2f} ms；"
                         "之后 <code>cache.length</code> = <b>{length}</b>，缓存已用 <b>{used}</b>"
                         "（{length} × {per_token}），生成 {passes} 个 token 要预分配 {allocated}<br>"
                         "{generated}：「{text}」<br>"
                         "首 token 延迟 TTFT = {ttft:.2f} ms（{runs} 次生成中最快的预填充，图中画的就是这一次）；"
                         "每 token 延迟 TPOT = {tpot:.2f} ms（这一次生成：（总时间 − TTFT）÷ {steps}）；"
                         "token 间延迟 ITL：中位数 {p50:.2f} ms，p90 {p90:.2f} ms（{runs} 次生成共 "
                         "{samples} 个解码步）；设备 {device}",
        "timeline_measuring": "正在为这句提示词计时：生成 {tokens} 个 token，做 {repeats} 遍……",
        "step_budget": "演示模型一步解码：{mflop:.2f} MFLOP（1 MFLOP = 10⁶ 次浮点运算），按本机的矩阵乘速率只要 "
                       "{compute:.1f} µs；读写 {mb:.2f} MB，按本机的内存带宽只要 {read:.1f} µs。",
        # the four steps' captions
        "step.prefill": "prefill()：预填充，整段提示词一次前向（也可分块）",
        "step.forward": "ToyTransformer.forward_unchecked：每一层处理这 T 个 token，最后把 length 加 T",
        "step.decode_loop": "decode_n_tokens()：解码循环，每步选出下一个 token",
        "step.decode_one": "decode_one_token()：只把上一步生成的 1 个 token 送进模型",
        "step.attention_forward": "Attention.forward：只为新 token 算 Q、K、V，K/V 写进缓存后取回全部已存的 K/V",
        "step.attention": "attention()：softmax(QKᵀ/√D)·V 的显式写法（默认调用与之等价的 PyTorch 函数 "
                          "scaled_dot_product_attention，简称 SDPA）",
        "step.write": "KVCache.write：写进 [length, length + T) 这几行",
        "step.store": "KVCache._store：原地写入预分配的张量",
        "step.advance": "BaseCache.advance：整次前向结束后 length += T",
        # the roofline model and the roofs
        "where.gpu": "GPU 的 L2 缓存",
        "where.cpu": "本机 CPU 的最后一级缓存",
        "weights.unknown": "FP32 权重 {weights}；读不到{where}的大小，它比大多数 CPU 的最后一级缓存（几 MiB 到几十 MiB）"
                           "大：解码每一步都要从内存把权重读一遍。",
        "weights.larger": "FP32 权重 {weights}，是{where}（{cache}）的 {ratio:.1f} 倍：解码每一步都要从内存把权重读一遍。",
        "weights.fits": "FP32 权重 {weights}，只是{where}（{cache}）的 {ratio:.1f} 倍："
                        "下一步时可能还有一部分权重留在缓存里，让解码快过内存带宽；是不是这样，看下面的测量。",
        "roofs.threads": "两个屋顶都是用 {threads}测的（本进程可用 {cores}，来自 {source}），和本页的其他计时一样：",
        "count.threads": "{n} 个线程",
        "count.threads_one": "{n} 个线程",
        "count.cores": "{n} 核",
        "count.cores_one": "{n} 核",
        "roofs.part": "这是本页计时所用的那部分机器，不是整台机器的峰值。",
        "roofs.process": "本进程可用的核都用上了。",
        "roofs.machine": "整台机器都用上了。",
        "roofs.device": "两个屋顶都是在 {device} 上测的，用的是 FP32。",
        "roofs.ridge": "转折点 = 矩阵乘速率 ÷ 带宽 = {ridge:.1f} FLOP/字节（FP32）。",
        "roof.bandwidth": "内存读带宽（斜屋顶）：{best:.1f} GB/s（{what}，{runs} 次中最快的一次；中位数 {median:.1f} GB/s）",
        "roof.matmul": "矩阵乘速率（平屋顶）：{best:.1f} GFLOP/s（{what}，{runs} 次中最快的一次；中位数 {median:.1f} GFLOP/s）",
        "worked.bytes": "① 要读的字节：权重矩阵每个都整个读一遍，{weights}（= {weights_mb:.1f} MB，"
                        "1 MiB = 2²⁰ 字节，1 MB = 10⁶ 字节；FP32，每个数 4 字节）。整个模型的 FP32 权重是 {whole}，"
                        "多出的部分是嵌入表：它有 {table}，一步只读用到的那 1 行。缓存里 {context} 个 token 连同新 token，"
                        "共 {tokens} 个 token 的 K/V 读一遍，新 token 的 K/V 写一次，{cache_mb:.2f} MB。合计 M = {mb:.1f} MB"
                        "（下面和 GB/s 的带宽相除，所以用 MB）。",
        "worked.flops": "② 要做的运算：每读到一个权重，就和这 1 个 token 做一次乘加（2 次运算），{matmul:.1f} MFLOP；"
                        "注意力对 {tokens} 个 key 打分再对 V 加权求和，{attention:.2f} MFLOP。合计 F = "
                        "{mflop:.1f} MFLOP（1 MFLOP = 10⁶ 次浮点运算）。",
        "worked.intensity": "③ 算术强度 I = F ÷ M = {intensity:.2f} FLOP/字节：每从内存搬来 1 个字节，只做 {intensity:.2f} 次运算"
                            "——权重读了一大堆，每个只用一次。",
        "worked.prefill": "④ 对比：预填充 {prompt_len} 个 token 读的权重几乎一样多（{weights_mb:.1f} MB），运算却是它的约 "
                          "{times:.0f} 倍，I = {intensity:.1f} FLOP/字节：每个权重读一次，供 {prompt_len} 个 token 一起用。",
        # prefill against decode
        "prefill_measuring": "正在测量提示词长度 {lengths} 的预填充和解码……",
        "prefill_html": "<b>P = {P}</b>：预填充一次前向 <b>{prefill_ms:.2f} ms</b>，"
                        "即 <b>{prefill_rate:,.0f} token/s</b>；一步解码 {decode_ms:.2f} ms，"
                        "即 <b>{decode_rate:,.0f} token/s</b><br>"
                        "若把提示词一个一个地送进去：{P} × {decode_ms:.2f} ms = "
                        "{sequential_ms:.1f} ms，是一次预填充的 <b>{speedup:.1f} 倍</b>（设备 {device}）",
        "point.prefill": "预填充 P={P}",
        "point.decode": "解码 B=1，P={P}",
        "point.batch": "解码 B={B}（上下文 {context}）",
        # batched decode
        "batch_too_large": "为 {C:,} 时，B = {B} 的缓存要 {size}，超过一次测量可用的 {limit}（课程按每人 2 GiB 内存设计）："
                           "请选较短的上下文",
        "batch_measuring": "正在测量：每条序列的缓存里已有 {context} 个 token 时，{sizes} 种批次大小 B "
                           "各测 {repeats} 次、每次解码 {steps} 步（要几秒钟）……",
        "ridge.right": "越过转折点以后（B = {a} 到 B = {b}，B 变为 {times:g} 倍）：单步耗时 ×{step:.2f}，吞吐 ×{tput:.2f}。",
        "ridge.cross": "越过转折点的那一步（B = {a} 到 B = {b}）：单步耗时 ×{step:.2f}，吞吐 ×{tput:.2f}。",
        "ridge.left": "到 B = {B} 都还在转折点（{ridge:.1f}）左边。",
        "kv_share": "B = {B}，每条序列的缓存里从 {C} 个 token 起解码 {steps} 步（和上表一样计数）：K/V 占读写字节的 "
                    "{share}，算术强度 {intensity:.2f} FLOP/字节（B / 2 = {half:g}）",
        "who.one": "为这 1 条序列生成 1 个 token",
        "who.many": "同时为 {B} 条序列各生成 1 个 token",
        "batch_html": "<b>B = {B}，每条序列的缓存里已有 {context} 个 token</b>：一步解码 "
                      "<b>{ms:.2f} ms</b>，{who}，即 <b>{rate:,.0f} token/s</b><br>"
                      "与 B = {B1} 相比：吞吐 ×{tput:.1f}，单步耗时 "
                      "×{step:.1f}；K/V 占一步读写字节的 <b>{share}</b>，"
                      "算术强度 <b>{intensity:.2f} FLOP/字节</b>（转折点 {ridge:.1f}），"
                      "实际达到 {gflops:.1f} GFLOP/s（设备 {device}）",
        # the engineering notes
        "cpu_allocator": "当前设备不是 CUDA GPU，跳过：CPU 上 PyTorch 通过 C 库的 malloc 申请内存，没有 CUDA 缓存分配器那样"
                         "可查询的「保留（reserved）／已分配（allocated）」计数器，所以这里量不出碎片（malloc 内部仍可能有碎片）。",
        "allocator_line": "{mode}：最后 allocated {allocated}，reserved {reserved}，保留未用最多 {unused}（{device}）",
        "reservation": "上面的时间线事先知道要生成 {passes} 个 token，所以预分配的缓存正好是 {prompt} + "
                       "{passes} − 1 = {used} 个 token，结束时恰好存满。若像不知道输出多长时那样，按演示模型的最大长度 "
                       "{longest} 为这条序列预留，这次生成只用了 {used} / {longest} = {share:.0%}，"
                       "其余 {rest:.0%} 预留着却一直空着。",
        "paged.fewer": "只需 {paged} 个",
        "paged.same": "同样需要 {paged} 个",
        "paged.more": "反而需要 {paged} 个（分页按整块分配，每条序列最后一块没填满的 {tail} 个槽位也算在内；{why}）",
        "paged.why_equal": "长度相同时补齐本来没有浪费",
        "paged.why_more": "比补齐浪费的 {padding} 个还多",
        "padded_html": "B = {B} 条提示词，长度 {lengths}，左侧补齐到 {longest}；"
                       "各自生成 {new} 个 token：<b>{same} / {B} 条与单独运行逐 token 相同</b><br>"
                       "缓存槽位：分配 {slots} 个（{size}），真正存 token 的 {used} 个，"
                       "<b>浪费 {waste:.1%}</b>；按每块 {block} 个 token 分页{paged}<br>"
                       "计算量：整批 {flops:,.1f} MFLOP，不补齐时 {alone:,.1f} MFLOP，"
                       "<b>{extra:.1%}</b> 花在了 padding 上",
        "precision.kv": "FP32 缓存",
        "precision.fp16": "FP16 缓存",
        "precision.int8": "INT8 缓存",
        "precision_line": "INT8 缓存每个元素占 1 + 4/D 字节：演示模型 D = {D}，是 {bytes:g} 字节；D = 128（LLaMA 等大模型的头维度）时"
                          "是 {large:.2f} 字节，约为 FP16 的一半。",
    },
    "en": {
        "label.prompt": "Prompt",
        "label.tokens": "Tokens to generate",
        "label.step": "Forward pass",
        "label.lengths": "Prompt lengths to measure (comma-separated)",
        "label.prompt_len": "Prompt length P",
        "label.batch": "Batch B",
        "label.context": "Context length (tokens already in each sequence's cache)",
        "label.padded_lengths": "Prompt lengths (comma-separated)",
        "label.block": "Paging block size",
        "label.step_argument": "step",
        "latency_tpot": "TPOT = {tpot:.2f} ms ((total time − TTFT) ÷ {steps} decode steps, worked out for each run, the "
                        "median of {runs} runs; the run drawn: {shown:.2f} ms)",
        "latency_itl": "ITL: median {p50:.2f} ms, p90 {p90:.2f} ms, p99 {p99:.2f} ms ({samples} decode steps over {runs} "
                       "runs; {device})",
        "phase.prefill": "prefill",
        "phase.decode": "decode",
        "fed.prefill": "the whole prompt, {tokens} tokens",
        "fed.decode": "the 1 token generated by the step before",
        "generated": "{step} tokens generated",
        "generated_one": "{step} token generated",
        "timeline_html": "<b>Forward pass {step} / {passes}: {phase}</b>, input {fed}, {ms:.2f} ms; "
                         "then <code>cache.length</code> = <b>{length}</b>, cache used <b>{used}</b> "
                         "({length} × {per_token}); generating {passes} tokens preallocates {allocated}<br>"
                         "{generated}: \u201c{text}\u201d<br>"
                         "Time to first token TTFT = {ttft:.2f} ms (the fastest prefill of {runs} generations, the one "
                         "drawn); time per output token TPOT = {tpot:.2f} ms (this generation: (total time − TTFT) ÷ "
                         "{steps}); inter-token latency ITL: median {p50:.2f} ms, p90 {p90:.2f} ms ({samples} decode "
                         "steps over {runs} generations); device {device}",
        "timeline_measuring": "Timing this prompt: generating {tokens} tokens, {repeats} times…",
        "step_budget": "One decode step of the demo model: {mflop:.2f} MFLOP (1 MFLOP = 10⁶ floating-point operations), "
                       "only {compute:.1f} µs at this machine's matmul rate; it reads and writes {mb:.2f} MB, only "
                       "{read:.1f} µs at this machine's memory bandwidth.",
        "step.prefill": "prefill(): prefill, the whole prompt in one forward pass (or in chunks)",
        "step.forward": "ToyTransformer.forward_unchecked: every layer processes these T tokens, then length grows by T",
        "step.decode_loop": "decode_n_tokens(): the decode loop, each step picks the next token",
        "step.decode_one": "decode_one_token(): feeds the model only the 1 token the step before generated",
        "step.attention_forward": "Attention.forward: computes Q, K, V for the new token only, writes K/V into the cache, "
                                  "then reads back all the K/V stored",
        "step.attention": "attention(): softmax(QKᵀ/√D)·V written out (by default kvlab calls the equivalent PyTorch "
                          "function scaled_dot_product_attention, SDPA for short)",
        "step.write": "KVCache.write: writes rows [length, length + T)",
        "step.store": "KVCache._store: writes in place into the preallocated tensors",
        "step.advance": "BaseCache.advance: length += T once the whole forward pass is done",
        "where.gpu": "the GPU's L2 cache",
        "where.cpu": "this CPU's last-level cache",
        "weights.unknown": "FP32 weights: {weights}. The size of {where} cannot be read; the weights are larger than most "
                           "CPUs' last-level caches (a few MiB to a few tens of MiB), so every decode step reads them "
                           "from memory.",
        "weights.larger": "FP32 weights: {weights}, {ratio:.1f} times {where} ({cache}): every decode step reads them "
                          "from memory.",
        "weights.fits": "FP32 weights: {weights}, only {ratio:.1f} times {where} ({cache}): part of them might still be "
                        "cached at the next step, letting decode beat the memory bandwidth; the measurement below "
                        "shows whether it does.",
        "count.threads": "{n} threads",
        "count.threads_one": "{n} thread",
        "count.cores": "{n} cores",
        "count.cores_one": "{n} core",
        "roofs.threads": "Both roofs were measured with {threads} (this process may use {cores}, from "
                         "{source}), like every other timing on this page: ",
        "roofs.part": "this is the part of the machine this page times with, not the whole machine's peak.",
        "roofs.process": "every core this process may use was used.",
        "roofs.machine": "the whole machine was used.",
        "roofs.device": "Both roofs were measured on {device}, in FP32.",
        "roofs.ridge": "Ridge point = matmul rate ÷ bandwidth = {ridge:.1f} FLOP/byte (FP32).",
        "roof.bandwidth": "Memory read bandwidth (the sloped roof): {best:.1f} GB/s ({what}, the fastest of {runs} runs; "
                          "median {median:.1f} GB/s)",
        "roof.matmul": "Matmul rate (the flat roof): {best:.1f} GFLOP/s ({what}, the fastest of {runs} runs; median "
                       "{median:.1f} GFLOP/s)",
        "worked.bytes": "① Bytes to read: every weight matrix read once in full, {weights} (= {weights_mb:.1f} MB; "
                        "1 MiB = 2²⁰ bytes, 1 MB = 10⁶ bytes; FP32, 4 bytes a number). The whole model's FP32 weights "
                        "are {whole}; the rest is the embedding table, {table}, of which a step reads only the 1 row it "
                        "uses. The K/V of the {context} tokens in the cache plus the new one, {tokens} tokens, read "
                        "once, and the new token's K/V written once: {cache_mb:.2f} MB. In all M = {mb:.1f} MB (divided "
                        "by a bandwidth in GB/s below, hence MB).",
        "worked.flops": "② Operations: each weight read is multiplied with this 1 token and added (2 operations), "
                        "{matmul:.1f} MFLOP; attention scores {tokens} keys and sums the V's by weight, {attention:.2f} "
                        "MFLOP. In all F = {mflop:.1f} MFLOP (1 MFLOP = 10⁶ floating-point operations).",
        "worked.intensity": "③ Arithmetic intensity I = F ÷ M = {intensity:.2f} FLOP/byte: for each 1 byte brought from "
                            "memory, only {intensity:.2f} operations. A pile of weights read, each used once.",
        "worked.prefill": "④ Compare: prefilling {prompt_len} tokens reads almost as many weights ({weights_mb:.1f} MB) "
                          "but does about {times:.0f} times the operations, I = {intensity:.1f} FLOP/byte: each weight "
                          "read once serves all {prompt_len} tokens.",
        "prefill_measuring": "Measuring prefill and decode at prompt lengths {lengths}…",
        "prefill_html": "<b>P = {P}</b>: one prefill pass <b>{prefill_ms:.2f} ms</b>, "
                        "that is <b>{prefill_rate:,.0f} token/s</b>; one decode step {decode_ms:.2f} ms, "
                        "that is <b>{decode_rate:,.0f} token/s</b><br>"
                        "Feeding the prompt one token at a time: {P} × {decode_ms:.2f} ms = "
                        "{sequential_ms:,.1f} ms, <b>{speedup:.1f} times</b> one prefill (device {device})",
        "point.prefill": "prefill P={P}",
        "point.decode": "decode B=1, P={P}",
        "point.batch": "decode B={B} (context {context})",
        "batch_too_large": "at {C:,}, the cache of B = {B} needs {size}, more than the {limit} one measurement may use "
                           "(the course is designed for 2 GiB of memory per person): choose a shorter context",
        "batch_measuring": "Measuring: with {context} tokens already in each sequence's cache, {sizes} batch sizes B, "
                           "each timed {repeats} times over {steps} decode steps (a few seconds)…",
        "ridge.right": "Beyond the ridge (B = {a} to B = {b}, B ×{times:g}): step time ×{step:.2f}, throughput ×{tput:.2f}.",
        "ridge.cross": "The step across the ridge (B = {a} to B = {b}): step time ×{step:.2f}, throughput ×{tput:.2f}.",
        "ridge.left": "Up to B = {B}, still left of the ridge ({ridge:.1f}).",
        "kv_share": "B = {B}, decoding {steps} steps from {C} tokens in each sequence's cache (counted as in the table "
                    "above): K/V is {share} of the bytes read and written, arithmetic intensity {intensity:.2f} "
                    "FLOP/byte (B / 2 = {half:g})",
        "who.one": "generating 1 token for this 1 sequence",
        "who.many": "generating 1 token for each of {B} sequences at once",
        "batch_html": "<b>B = {B}, {context} tokens already in each sequence's cache</b>: one decode step "
                      "<b>{ms:.2f} ms</b>, {who}, that is <b>{rate:,.0f} token/s</b><br>"
                      "Against B = {B1}: throughput ×{tput:.1f}, step time "
                      "×{step:.1f}; K/V is <b>{share}</b> of a step's bytes read and written, "
                      "arithmetic intensity <b>{intensity:.2f} FLOP/byte</b> (ridge {ridge:.1f}), "
                      "{gflops:.1f} GFLOP/s reached (device {device})",
        "cpu_allocator": "Skipped, as this device is not a CUDA GPU: on a CPU, PyTorch gets memory from the C library's "
                         "malloc, which has no counters of reserved and allocated memory to query like CUDA's caching "
                         "allocator, so no fragmentation can be measured here (malloc may still fragment inside).",
        "allocator_line": "{mode}: last allocated {allocated}, reserved {reserved}, at most {unused} reserved but unused "
                          "({device})",
        "reservation": "The timeline above knew in advance it would generate {passes} tokens, so its preallocated cache "
                       "is exactly {prompt} + {passes} − 1 = {used} tokens, full at the end. Reserved for the demo "
                       "model's maximum length {longest}, as when the output's length is unknown, this generation would "
                       "use only {used} / {longest} = {share:.0%}, and the other {rest:.0%} would sit reserved and "
                       "empty throughout.",
        "paged.fewer": " needs only {paged}",
        "paged.same": " needs the same {paged}",
        "paged.more": " needs {paged}, more (paging allocates whole blocks, so the {tail} empty slots in each sequence's "
                      "last block count too; {why})",
        "paged.why_equal": "with equal lengths padding wasted nothing to begin with",
        "paged.why_more": "more than the {padding} padding wastes",
        "padded_html": "B = {B} prompts, lengths {lengths}, left-padded to {longest}; "
                       "each generates {new} tokens: <b>{same} / {B} the same token for token as when run alone</b><br>"
                       "Cache slots: {slots} allocated ({size}), {used} actually holding a token, "
                       "<b>{waste:.1%} wasted</b>; paged in blocks of {block} tokens it{paged}<br>"
                       "Compute: {flops:,.1f} MFLOP for the batch, {alone:,.1f} MFLOP without padding, "
                       "<b>{extra:.1%}</b> spent on padding",
        "precision.kv": "FP32 cache",
        "precision.fp16": "FP16 cache",
        "precision.int8": "INT8 cache",
        "precision_line": "An INT8 cache takes 1 + 4/D bytes per element: for the demo model, D = {D}, that is "
                          "{bytes:g} bytes; at D = 128 (the head dimension of large models such as LLaMA) it is "
                          "{large:.2f} bytes, about half of FP16.",
    },
})

_LABEL_KEYS = {text: key for key, text in PANELS.texts["zh"].items() if key.startswith("label.")}


def label(constant: str) -> str:
    """A control's label (one of the chapter's ``*_LABEL`` constants, the Chinese edition's words) in the course's
    language, asked when the control or its error is made."""
    return PANELS.say(_LABEL_KEYS[constant])


say = CELLS.say
