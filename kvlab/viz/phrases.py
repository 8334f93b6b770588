"""What the widget layer itself shows a person, in both languages: the panels' chrome and messages
(:mod:`kvlab.viz.widgets`), the quiz's and the checkpoint's (:mod:`kvlab.viz.quiz`), and the names and unit brackets
every figure uses (:mod:`kvlab.viz.style`).

Each text is looked up when it is shown (``WIDGETS.say(key, ...)``), in the language :func:`kvlab.set_language` names
then, never at import: a notebook imports kvlab before its first cell sets the language. The labels of a lesson's own
controls, readouts and figures are the lesson's (its phrasebook), not these."""
from __future__ import annotations

from ..cache_modes import MODES
from ..phrases import Phrasebook

WIDGETS = Phrasebook("viz.widgets", {
    "zh": {
        # argument names of API errors -> the control as the learner sees it (explain_error)
        "name.n_layer": "层数 L",
        "name.batch_size": "批次 B",
        "name.n_kv_head": "KV 头数 H",
        "name.n_head": "注意力头数",
        "name.seq_len": "序列长度 S",
        "name.head_dim": "头维度 D",
        "name.dtype": "数据类型",
        "name.max_new_tokens": "生成 token 数",
        "name.lengths": "序列长度列表",
        # messages in a panel
        "rerun_note": "上面那个面板的单元格已经重新运行，这里的数字不再跟着屏幕上的新面板变化（已变灰）："
                      "请重新运行本单元格。",
        "stale_note": "下方的数字和图仍是上一次有效输入的结果（已变灰），改成有效值后会立即更新。",
        "asset_error": "⚠️ 课程的数据文件缺失或损坏（不是你的输入有问题），恢复之后重新运行本章：{text}",
        "invalid_named": "⚠️ 输入无效「{label}」：{text}",
        "invalid": "⚠️ 输入无效：{text}",
        "bug": "内部错误（这是 kvlab 的 bug，请报告）：{detail}",
        # controls
        "more": "更多设置",
        "run": "运行测量",
        "play": "播放",
    },
    "en": {
        "name.n_layer": "layers L",
        "name.batch_size": "batch B",
        "name.n_kv_head": "KV heads H",
        "name.n_head": "attention heads",
        "name.seq_len": "sequence length S",
        "name.head_dim": "head dim D",
        "name.dtype": "data type",
        "name.max_new_tokens": "new tokens",
        "name.lengths": "sequence lengths",
        "rerun_note": "The cell of the panel above has been run again, so these numbers no longer follow the new panel "
                      "on screen (greyed out): run this cell again.",
        "stale_note": "The numbers and figures below are still those of the last valid input (greyed out); they update "
                      "as soon as the value is valid again.",
        "asset_error": "⚠️ A course data file is missing or damaged (nothing is wrong with your input). Restore it, "
                       "then run this chapter again: {text}",
        "invalid_named": "⚠️ Invalid input for {label}: {text}",
        "invalid": "⚠️ Invalid input: {text}",
        "bug": "Internal error (a bug in kvlab, please report it): {detail}",
        "more": "More settings",
        "run": "Run the measurement",
        "play": "Play",
    },
})

QUIZ = Phrasebook("viz.quiz", {
    "zh": {
        "title": "自测",
        "checkpoint_title": "检查点：先预测，再看解释",
        "question": "第 {n} 题（{section}）",
        "placeholder": "输入一个数",
        "answer_box": "答案（{unit}）",
        "check": "检查",
        "reveal": "显示答案",
        "blank": "：＿＿＿＿",
        "score": "<b>得分：{right} / {n}</b>（已作答 {answered} 题{seen}）{done}",
        "score_seen": "，看了 {shown} 题的答案",
        "score_all_right": "全部答对！",
        "checkpoint_intro": "每题只算第一次作答：先想好再提交。提交后马上判分，并给出解释。",
        "checkpoint_score": "<b>预测对了 {right} / {n} 题</b>（已预测 {answered} 题）",
    },
    "en": {
        "title": "Self-check",
        "checkpoint_title": "Checkpoint: predict first, then read why",
        "question": "Question {n} ({section})",
        "placeholder": "Type a number",
        "answer_box": "Answer ({unit})",
        "check": "Check",
        "reveal": "Show the answer",
        "blank": ": ______",
        "score": "<b>Score: {right} / {n}</b> ({answered} answered{seen}){done}",
        "score_seen": ", answers shown: {shown}",
        "score_all_right": " All correct!",
        "checkpoint_intro": "Only your first answer to each question counts, so think before you submit. "
                            "It is graded at once and explained.",
        "checkpoint_score": "<b>Predicted right: {right} / {n}</b> ({answered} predicted)",
    },
})

# The same name for the same thing in every legend, readout and paragraph (GLOSSARY.md): each cache mode's label
# (its Chinese one is kvlab.cache_modes' own) and each transformers run's.
MODE_NAMES = Phrasebook("viz.mode_names", {
    "zh": {
        **{m.name: m.label for m in MODES.values()},
        "transformers:cached": "transformers 有缓存",
        "transformers:no-cache": "transformers 无缓存",
        "transformers:dynamic": "transformers DynamicCache（逐步拼接）",
        "transformers:static": "transformers StaticCache（预分配）",
    },
    "en": {
        "kv": "with a cache (kv)",
        "none": "no cache (none)",
        "k_only": "K cached only (k_only)",
        "dynamic": "concatenation (dynamic)",
        "int8": "INT8 cache (int8)",
        "fp16": "FP16 cache (fp16)",
        "paged": "paged cache (paged)",
        "transformers:cached": "transformers, with a cache",
        "transformers:no-cache": "transformers, no cache",
        "transformers:dynamic": "transformers DynamicCache (concatenation)",
        "transformers:static": "transformers StaticCache (preallocated)",
    },
})

STYLE = Phrasebook("viz.style", {
    "zh": {"axis_title": "{name}（{unit}）"},
    "en": {"axis_title": "{name} ({unit})"},
})


SOURCE = Phrasebook("viz.source", {
    "zh": {"where": "{path} 第 {first}–{last} 行，", "caption": "<b>{caption}</b>　"},
    "en": {"where": "{path}, lines {first}–{last}: ", "caption": "<b>{caption}</b> "},
})
