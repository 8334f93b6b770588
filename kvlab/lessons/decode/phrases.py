"""What chapter 3.1's code cells print, and the prompts they give the demo model, in both languages.

The notebook's code cells hold no prose: each printed line and label comes from :data:`CELLS`
(``lesson.say(key, **fields)``), so the English edition runs the same cells with ``kvlab.set_language("en")``.
:data:`PROMPTS` holds the cells' prompts and the text they expect, in each demo model's language. The English ones
were checked on the English demo model (``load_demo_model(lang="en")``, greedy): 「人工」 → 「智」 → 「能」 becomes
"Artificial" → " intelligence" (99.9%) → " re" (38%, the start of " research"). The walkthrough needs more than one
token at its first step, so that heads 0 and 1 of layer 0 can already look at different tokens there (the task beside
the panel says they do), and at least one step whose top choice is below 50%: "Artificial" is a single token, and no
prompt beginning with it that we tried met both, so the English panel plays "A small model" (three tokens: " trained
on this text learns exactly", the first step split between " train" 21%, " learn" 16% and " is" 10%)."""
from __future__ import annotations

from ...cache_modes import MODES
from ...phrases import Phrasebook
from .walkthrough import DEFAULT_PROMPT

CELLS = Phrasebook("decode.cells", {
    "zh": {
        # setup
        "device": "运行设备：{device}",
        "demo_model": "演示模型：{layers} 层，{heads} 个查询头分成 {kv_heads} 组、每组共用一份 K/V，"
                      "每个 token 的隐藏向量长 d_model = {d_model}，词表 {vocab} 个字符，参数 {params:,} 个",
        # autoregression, one step at a time
        "step": "第 {step} 步：输入「{text}」（t = {t} 个 token）→ 预测「{token}」，概率 {p:.1%}",
        "with_cache": "有缓存： {text}",
        "without_cache": "无缓存： {text}",
        # the walkthrough
        "uncertain_steps": "第一名概率低于 50% 的步：{steps}",
        # two formulas, one answer
        "formula_gap": "公式二（读缓存）与公式一最后一行的最大差异：{diff:.2e}",
        "decode_rows_gap": "上面播放的 {steps} 步中，解码时真实算出的注意力行与完整矩阵最后一行的最大差异：{diff:.2e}"
                           "（所有层、所有头）",
        # counted work
        "projected": "生成 {n} 个 token：每层无缓存共投影 {none} 个 token 的 K/V，有缓存只投影 {kv} 个"
                     "（前者是后者的 {ratio:.1f} 倍）",
        "scores": "注意力分数（每层每头）：无缓存共 {none:,} 个，有缓存共 {kv:,} 个",
        # timings
        "timing_model": "计时模型：{layers} 层，d_model = {d_model}，{heads} 个头，词表 {vocab}，"
                        "参数 {params:,} 个；t² 项追上线性项的长度 t* ≈ {crossover:,}",
        "growth_label": MODES["kv"].label,  # the cache mode's legend name (GLOSSARY.md)
    },
    "en": {
        "device": "Running on: {device}",
        "demo_model": "Demo model: {layers} layers, {heads} query heads in {kv_heads} groups (each group shares one "
                      "K/V), a hidden vector of d_model = {d_model} per token, a vocabulary of {vocab} tokens, "
                      "{params:,} parameters",
        "step": 'Step {step}: input "{text}" (t = {t}) → predicts "{token}" with probability {p:.1%}',
        "with_cache": "With a cache: {text}",
        "without_cache": "No cache:     {text}",
        "uncertain_steps": "Steps whose top choice has a probability below 50%: {steps}",
        "formula_gap": "Largest difference between formula 2 (reading the cache) and the last row of formula 1: "
                       "{diff:.2e}",
        "decode_rows_gap": "Over the {steps} steps played above, the attention rows computed while decoding differ "
                           "from the last row of the full matrix by at most {diff:.2e} (all layers, all heads)",
        "projected": "Generating {n} tokens: each layer projects K/V for {none} tokens in all without a cache, and for "
                     "only {kv} with one ({ratio:.1f}× fewer)",
        "scores": "Attention scores (per layer, per head): {none:,} without a cache, {kv:,} with one",
        "timing_model": "Timing model: {layers} layers, d_model = {d_model}, {heads} heads, a vocabulary of {vocab}, "
                        "{params:,} parameters; the t² term catches up with the linear one at t* ≈ {crossover:,}",
        "growth_label": "with a cache (kv)",
    },
})

PROMPTS = Phrasebook("decode.prompts", {
    "zh": {
        "main": "人工",  # the loop written out by hand, generate with and without a cache, the counted work
        "after_two_steps": "人工智能",  # what two greedy steps write after "main"
        "walkthrough": DEFAULT_PROMPT,  # the step-by-step panel (the 3.1 checkpoint replays it)
        "formulas": "人工智能",  # the two formulas checked on layer 0's real Q/K/V
    },
    "en": {
        "main": "Artificial",
        "after_two_steps": "Artificial intelligence re",
        "walkthrough": "A small model",
        "formulas": "Artificial intelligence is",
    },
})

say = CELLS.say
