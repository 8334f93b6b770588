"""Every word the static edition's chrome shows (table of contents, headings, notes, run information, the handouts'
labels), in Chinese and English: ``python -m kvlab.book --lang en`` builds with :data:`BOOK` in English.

Some templates hold markup (a link or ``<code>`` inside a sentence); the values filled in are escaped by the caller.
The Chinese texts are the ones the site has always shown, so the Chinese edition is built byte for byte as before."""
from __future__ import annotations

from ..phrases import Phrasebook

BOOK = Phrasebook("kvlab.book", {
    "zh": {
        "html_lang": "zh",
        "machine": "{cpu}，可用 {cores} 核（{source}），{system} {arch}",
        "device": "{type}（{name}）",
        "run_info": "这一版的每个数字、每张图都来自一次真实的运行：{date}，机器 {machine}，设备 {device}，Python {python}，"
                    "torch {torch}。计时类的结果是那次运行测到的；在你自己的机器上运行 notebook 会得到你的数字。",
        "chapter_seconds": "　本章运行 {seconds:.0f} 秒。",
        "live_line": "在线运行才能拖动这个面板的全部控件：在 JupyterLab 中运行 <code>{command}</code>，"
                     '或<a href="{url}">在 Colab 中打开</a>这一章。',
        "fixed_control": "{label}：{text}",
        "note_sliders": "静态版：带滑块的控件可以直接拖动，每次只改变一个（其余回到默认值），图和数字都是构建时用同一个渲染函数算好的。",
        "note_default": "静态版：这里显示面板的默认状态（构建时运行的结果）。",
        "solution_withheld": "参考答案在 notebook 里第一次检查了你自己的答案之后出现，静态版里没有。",
        "show_solution": "显示参考答案",
        "run_to_check": "✎ 在 notebook 里把答案写进上面的代码格，再运行这一格来检查（命令：<code>{command}</code>）。",
        "open_in_colab": "在 Colab 中打开",
        "contents": "目录",
        "teacher_note": "<b>教师版</b>：每个练习的检查格下都附有参考答案（折叠），讲义里也有。"
                        "请不要发给学员：学员的 notebook 只在检查过一次自己的答案之后才给出参考答案。",
        "toc_handout": '　<a href="{href}">讲义 PDF</a>',
        "toc_seconds": "　<small>（运行 {seconds:.0f} 秒）</small>",
        "index_title": "KV Cache 基础 · 静态版",
        "index_heading": "第 3 章 KV Cache 基础 · 静态版",
        "index_intro": "这是 kvlab 课程运行之后的样子：每一章的文字、表格、打印出的结果和图（可以悬停、缩放）都在这里，不需要安装任何东西，"
                       "也不需要联网。\n部分面板的滑块在静态版里仍然可以拖动（构建时预先算好）；要拖动全部控件、在自己的机器上测量，"
                       "请在 JupyterLab 中运行\n<code>{command}</code>，或从每章开头的链接在 Colab 中打开。",
        "index_files": "讲义（PDF，可打印）在 <code>handouts/</code>，讲义中的图（PNG 与 SVG，可放进幻灯片）在 <code>figures/</code>。",
        "handout_solution": "参考答案",
        "no_pdfs": "讲义 PDF 没有生成 / handout PDFs not written: {why}",
        "list_separator": "、",
    },
    "en": {
        "html_lang": "en",
        "machine": "{cpu}, usable cores: {cores} ({source}), {system} {arch}",
        "device": "{type} ({name})",
        "run_info": "Every number and every figure in this edition comes from one real run: {date}, machine {machine}, "
                    "device {device}, Python {python}, torch {torch}. Timings are what that run measured; run the "
                    "notebooks on your own machine and you get your own numbers.",
        "chapter_seconds": " This chapter took {seconds:.0f} s to run.",
        "live_line": "To move every control of this panel, run it live: <code>{command}</code> opens it in "
                     'JupyterLab, or <a href="{url}">open this chapter in Colab</a>.',
        "fixed_control": "{label}: {text}",
        "note_sliders": "Static edition: the sliders work here, one at a time (the others go back to their defaults). "
                        "Every figure and number was computed at build time by the panel's own render function.",
        "note_default": "Static edition: the panel in its default state, as the build ran it.",
        "solution_withheld": "The reference solution appears in the notebook once you have checked an answer of your "
                             "own; the static edition has none.",
        "show_solution": "Show the reference solution",
        "run_to_check": "✎ In the notebook, write your answer in the code cell above, then run this cell to check it "
                        "(command: <code>{command}</code>). ",
        "open_in_colab": "Open in Colab",
        "contents": "Contents",
        "teacher_note": "<b>Teacher's edition</b>: every exercise's check cell carries its reference solution "
                        "(folded), and so do the handouts. Do not give it to learners: a learner's notebook shows a "
                        "reference solution only after they have checked an answer of their own.",
        "toc_handout": ' <a href="{href}">handout (PDF)</a>',
        "toc_seconds": " <small>(ran in {seconds:.0f} s)</small>",
        "index_title": "KV cache basics · static edition",
        "index_heading": "Chapter 3: KV cache basics · static edition",
        "index_intro": "This is the kvlab course after a run: every chapter's prose, tables, printed results and "
                       "figures (hover and zoom them) are here, with nothing to install and no network needed.\n"
                       "Some panels' sliders still work in the static edition (their states were computed at build "
                       "time); to move every control and measure on your own machine, run\n<code>{command}</code> "
                       "for JupyterLab, or open a chapter in Colab from the link at its top.",
        "index_files": "The handouts (printable PDFs) are in <code>handouts/</code>; their figures (PNG and SVG, for "
                       "slides) are in <code>figures/</code>.",
        "handout_solution": "Reference solution",
        "no_pdfs": "handout PDFs not written: {why}",
        "list_separator": ", ",
    },
})
