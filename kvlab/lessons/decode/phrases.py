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

# The panels' words (controls, readouts, the latency panel's refusal), each looked up when a panel or its error is
# made; the *_LABEL constants of .panels are the Chinese labels, and panels.label() shows them in the course's
# language.
PANELS = Phrasebook("decode.panels", {
    "zh": {
        "label.step": "解码步",
        "label.layer": "层",
        "label.head": "注意力头",
        "label.new_tokens": "生成 token 数",
        "label.repeats": "重复次数（取中位数）",
        "head_option": "{head}（KV 组 {group}）",
        # the walkthrough's readout
        "token_pair": "{left} {right}",  # the step's input tokens, joined two at a time
        "look": "第 {head} 头最关注第 {position} 个 token「{token}」（权重 {weight:.2f}）",
        "look_sep": "；",
        "work_prefill": "预填充：缓存还是空的，两边都为全部 <b>{n}</b> 个 token 计算 K/V、算 {n}×{n} 的分数；"
                        "有缓存时这 {n} 行 K/V 同时写入缓存",
        "work_decode": "无缓存：为 <b>{kv_none}</b> 个 token 计算 K/V，每层每头 {t}×{t} = <b>{scores_none}</b> 个分数"
                       "<br>有缓存：只为 <b>{n}</b> 个 token 计算 K/V，每层每头 {n}×{t} = <b>{scores_kv}</b> 个分数；"
                       "其余 {rest} 个 token 的 K/V 从缓存读取",
        "step_readout": "<b>第 {step} 步</b>　输入 t = {t} 个 token：{tokens}　→　预测「{token}」（概率 {p:.1%}）<br>"
                        "{work}<br>第 {layer} 层第 {head} 头：有缓存算出的这一行与完整矩阵最后一行的最大差异 "
                        "<b>{diff:.1e}</b><br>KV 组 {group}（第 {first}–{last} 头共用同一份 K/V）：{looks}",
        # the latency panel
        "too_much_work": "与「{repeats_label}」合起来，无缓存时要重算约 {work:,} 个 token 位置（每一步都重算前面的全部 "
                         "token，热身 1 次加重复 {repeats} 次），是一次点击上限 {limit:,} 的 {times:.1f} 倍（在 2 核 "
                         "CPU 上要好几分钟）：请减少生成 token 数或重复次数",
        "latency_readout": "生成 {n} 个 token：无缓存累计 <b>{none:.2f} s</b>，有缓存累计 <b>{kv:.2f} s</b>，"
                           "无缓存用时是有缓存的 <b>{ratio:.1f}</b> 倍<br>单步耗时增长指数（后半段拟合）："
                           "无缓存 {none_step:.2f}，有缓存 {kv_step:.2f}（是否可读见下方说明）；"
                           "累计耗时增长指数：无缓存 {none_total:.2f}，有缓存 {kv_total:.2f}（{device}）",
    },
    "en": {
        "label.step": "Decode step",
        "label.layer": "Layer",
        "label.head": "Attention head",
        "label.new_tokens": "Tokens to generate",
        "label.repeats": "Repeats (median taken)",
        "head_option": "{head} (KV group {group})",
        "token_pair": "{left} | {right}",
        "look": "head {head} looks most at token {position}, \"{token}\" (weight {weight:.2f})",
        "look_sep": "; ",
        "work_prefill": "Prefill: the cache is still empty, so both ways compute K/V for all <b>{n}</b> tokens and "
                        "{n}×{n} scores; with a cache, these {n} rows of K/V are written into it at the same time",
        "work_decode": "No cache: K/V computed for <b>{kv_none}</b> tokens, {t}×{t} = <b>{scores_none}</b> scores per "
                       "layer and head<br>With a cache: K/V computed for only <b>{n}</b> token, {n}×{t} = "
                       "<b>{scores_kv}</b> scores per layer and head; the K/V of the other {rest} tokens are read "
                       "from the cache",
        "step_readout": "<b>Step {step}</b>   input of t = {t} tokens: {tokens}   →   predicts \"{token}\" "
                        "(probability {p:.1%})<br>{work}<br>Layer {layer}, head {head}: the row computed with a cache "
                        "differs from the last row of the full matrix by at most <b>{diff:.1e}</b><br>"
                        "KV group {group} (heads {first}–{last} share one K/V): {looks}",
        "too_much_work": "together with \"{repeats_label}\", running without a cache would recompute about {work:,} "
                         "token positions (every step recomputes all the tokens before it; 1 warm-up plus {repeats} "
                         "repeats), {times:.1f}× the limit of {limit:,} for one click (several minutes on a 2-core "
                         "CPU): generate fewer tokens or use fewer repeats",
        "latency_readout": "Generating {n} tokens: <b>{none:.2f} s</b> in all without a cache, <b>{kv:.2f} s</b> "
                           "with one; no cache took <b>{ratio:.1f}</b>× as long<br>Growth exponent of the step time "
                           "(fitted on the second half): {none_step:.2f} without a cache, {kv_step:.2f} with one "
                           "(whether it can be read is said below); growth exponent of the total time: "
                           "{none_total:.2f} without a cache, {kv_total:.2f} with one ({device})",
    },
})
