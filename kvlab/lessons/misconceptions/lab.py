"""Chapter 3.5's find-the-bug lab: deliberately broken caches (kvlab.teaching_caches) against the correct one,
token by token and logit by logit, with each bug revealed on request."""
from __future__ import annotations

import html
from dataclasses import dataclass
from functools import lru_cache, partial

import torch

from ... import inputs
from ..._validate import positive_int
from ...cache import KVCache
from ...generation import generate
from ...model import ToyTransformer
from ...teaching_caches import BROKEN_CACHES
from ...viz import misconceptions_plots as plots
from ...viz.source import snippet_html, source_snippet
from ...viz.widgets import Panel, PanelOptions, View, checkbox, dropdown, int_slider, text_box
from .common import NEW_TOKENS_LABEL, leave_a_core


LAB_PROMPT = "计算"  # the lab's default: each broken cache first changes a token at a different step
PREVIOUS_PROMPT = "大语言模型"  # the request served before the lab's prompt, with the same cache
LAB_NEW_TOKENS = 24
LOGIT_TOLERANCE = 1e-4  # |logit difference| below this is float rounding (a correct cache stays under 1e-5)
REFERENCE = "kv"  # the correct cache, as a control


@dataclass(frozen=True)
class BugCard:
    """What the lab shows for one cache: a neutral label, and, revealed on request, the explanation, the fix and
    the methods the cache overrides (shown from their source)."""

    label: str
    explanation: str
    fix: str
    methods: tuple[str, ...]


BUG_CARDS: dict[str, BugCard] = {
    REFERENCE: BugCard(
        "对照：正确的 KVCache",
        "这是 kvlab 的 KVCache，没有 bug：每一步的 logits 与无缓存的参考只差浮点舍入（小于 1e-5），生成的 token 完全相同。",
        "无需修复。", ("_store", "_read")),
    "rope_offset": BugCard(
        "缓存 A",
        "新 token 的 K 存进缓存时，旋转位置编码（RoPE）用的是位置 0、1、2……而不是它在序列中的真实位置 "
        "length、length + 1……：写 K 时漏掉了位置偏移。预填充从位置 0 开始，所以第 1 步完全正确；"
        "从第 2 步（第一次解码）起，每个新 K 都自称在位置 0，注意力分数里的相对位置全错了。"
        "模型很有把握时，错误的 logits 仍可能选出同一个 token，所以 token 往往要晚几步才变。",
        "旋转 K 时用 positions = length + arange(T)（kvlab 的 rope_and_mask(start=cache.length, ...)）。", ("_store",)),
    "no_reset": BugCard(
        "缓存 B",
        "reset() 忘了把 length 置 0。服务完上一个请求（「大语言模型」）后，同一块缓存接着服务这个提示词："
        "新的提示词被接在上一个请求的 token 后面，既能看到上一个请求的内容，位置编码也从错误的位置开始。"
        "所以第 1 步的 logits 就不同了；而全新的缓存从 length = 0 开始，完全正确（去掉「先服务上一个请求」试试）。",
        "reset() 里写上 self.length = 0（存储本身可以留着复用：读取只看前 length 个位置）。", ("reset",)),
    "k_as_v": BugCard(
        "缓存 C",
        "写缓存时把 K 写进了 V 的位置（复制粘贴时少改了一个字母）。注意力用权重对「K」求加权平均，"
        "输出完全不对，第 1 步（预填充）就已经出错，而且错得很离谱。",
        "self.v[layer, :, :, length:end] = v（而不是 = k）。", ("_store",)),
    "off_by_one": BugCard(
        "缓存 D",
        "新 token 写在 length − 1 而不是 length：把「最后一个已存 token 的下标」当成了「下一个空位」。"
        "预填充写在 0 … P−1（P 是提示词的 token 数），第 1 步正确。第一次解码把新 token 写在 P−1，"
        "覆盖了提示词最后一个 token 的 K/V；此后每个新 token 都比应在的位置早一格，而注意力读到的最后一格（length）"
        "始终还没写过：全新的缓存里是 0，复用的缓存里是上一个请求留下的旧数据。"
        "结果：提示词最后一个 token 丢了，每一步还多看到一个假 token。",
        "写入区间是 [length, length + T)：start = self.length。", ("_store",)),
    "one_slot": BugCard(
        "缓存 E",
        "所有层都读写第 0 层的那一格（忘了用 layer 下标）。同一次前向计算里，每一层都先写入新 token 再读取，"
        "所以预填充（第 1 步）恰好正确；从第一次解码起，每一层看到的旧 token 的 K/V 都是最后一层写下的，"
        "而不是本层的。",
        "按 self.k[layer] / self.v[layer] 读写：每一层有自己的一份缓存。", ("_store", "_read")),
}
CACHE_LABEL, PROMPT_LABEL, REVEAL_LABEL, REUSE_LABEL = "缓存", "提示词", "显示解释", "先服务上一个请求"
LAB_CACHES = (REFERENCE, *BROKEN_CACHES)


@dataclass(frozen=True)
class BugRun:
    """One cache against the uncached reference. The reference is teacher-forced: at every step it reads the
    same text this cache has written so far, so each step compares the next token of one and the same input."""

    cache: str  # "kv", a key of BROKEN_CACHES, or the name of the KVCache subclass that was run
    prompt: str
    reference: list[str]  # per step: the uncached model's next token after this cache's text so far
    output: list[str]  # ... this cache's token
    logit_diff: list[float]  # per step: max |logit difference| against the reference
    reused: bool = True  # the cache served PREVIOUS_PROMPT first (reset() in between)
    free_running: tuple = ()  # the uncached model's own text for the prompt (what a correct cache writes)

    @property
    def first_token_step(self) -> int | None:
        """1-based step of the first new token that differs (None: all the same)."""
        return next((i + 1 for i, (a, b) in enumerate(zip(self.reference, self.output)) if a != b), None)

    @property
    def first_logit_step(self) -> int | None:
        """1-based step of the first distribution that differs beyond float rounding."""
        return next((i + 1 for i, d in enumerate(self.logit_diff) if d > LOGIT_TOLERANCE), None)

    @property
    def differing_steps(self) -> int:
        return sum(a != b for a, b in zip(self.reference, self.output))


def cache_class(cache) -> type[KVCache]:
    """The ``KVCache`` class a lab cache id (or a ``KVCache`` subclass, a learner's fix) stands for."""
    if isinstance(cache, type) and issubclass(cache, KVCache):
        return cache
    if cache == REFERENCE:
        return KVCache
    if cache in BROKEN_CACHES:
        return BROKEN_CACHES[cache]
    raise ValueError(f"cache must be one of {', '.join(LAB_CACHES)} or a KVCache subclass; got {cache!r}")


def make_lab_cache(cache, model: ToyTransformer, max_seq_len: int) -> KVCache:
    """A fresh cache for the lab: the correct ``KVCache`` ("kv"), one of ``BROKEN_CACHES`` by its id, or any
    ``KVCache`` subclass (a learner's fixed version of a broken one)."""
    return cache_class(cache)(model.config, 1, max_seq_len, dtype=model.dtype, device=model.device)


@leave_a_core
@torch.no_grad()
def run_lab_cache(model: ToyTransformer, tokenizer, cache, prompt: str = LAB_PROMPT,
                  new_tokens: int = LAB_NEW_TOKENS, previous: str = PREVIOUS_PROMPT, reused: bool = True) -> BugRun:
    """Serve ``prompt`` with one cache (when ``reused``: after serving ``previous`` with it and ``reset()``, as a
    server would) and compare every step with the uncached model reading the same text. ``cache``: an id (see
    :func:`make_lab_cache`) or a ``KVCache`` subclass."""
    new_tokens = positive_int("new_tokens", new_tokens)
    first, second = tokenizer.encode(previous), tokenizer.encode(prompt)
    kv = make_lab_cache(cache, model, len(first) + len(second) + 2 * (new_tokens - 1))
    if reused:
        generate(model, [first], new_tokens, cache=kv)
        kv.reset()
    out = generate(model, [second], new_tokens, cache=kv, return_logits=True)
    read = out.tokens[:, :-1]  # [1, P + n - 1]: the prompt and every new token but the last (never fed back)
    ref_logits = model(read)[:, len(second) - 1:]  # [1, n, vocab]: one full pass, no cache, causal mask
    diff = (out.logits - ref_logits).abs().nan_to_num(float("inf")).amax(dim=-1)[0]  # [n]
    as_text = lambda ids: [tokenizer.decode([int(i)]) for i in ids]  # noqa: E731
    name = cache.__name__ if isinstance(cache, type) else cache
    own = generate(model, [second], new_tokens, cache="kv").new_tokens[0]  # = uncached tokens (tests prove it)
    return BugRun(name, prompt, as_text(ref_logits[0].argmax(dim=-1)), as_text(out.new_tokens[0]), diff.tolist(),
                  bool(reused), tuple(as_text(own)))


def lab_line(run: BugRun) -> str:
    """One line per cache for a printed overview: where its tokens and its logits first part from the reference."""
    label = BUG_CARDS[run.cache].label if run.cache in BUG_CARDS else run.cache
    if run.first_token_step is None and run.first_logit_step is None:
        return f"{label}：{len(run.output)} 步全部与参考相同（logits 的差异都在浮点误差以内）"
    tokens = ("token 全部相同" if run.first_token_step is None
              else f"token 从第 {run.first_token_step} 步起不同")
    return f"{label}：{tokens}，logits 从第 {run.first_logit_step} 步起偏离"


MAX_LAB_PROMPT, MAX_LAB_TOKENS = 64, 48


def render_lab(model: ToyTransformer, tokenizer, cache, prompt, new_tokens, reused, reveal,
               run=run_lab_cache) -> View:
    """The lab panel: the reference and this cache's tokens with the differences marked, the logit
    differences per step, and (when ``reveal``) what the bug is and the code it is in."""
    cache = inputs.choice(CACHE_LABEL, cache, list(LAB_CACHES))
    prompt, _ = inputs.prompt_tokens(PROMPT_LABEL, prompt, tokenizer, MAX_LAB_PROMPT)
    n = inputs.whole_number(NEW_TOKENS_LABEL, new_tokens, 1, MAX_LAB_TOKENS)
    reused, reveal = inputs.yes_no(REUSE_LABEL, reused), inputs.yes_no(REVEAL_LABEL, reveal)
    result = run(model, tokenizer, cache, prompt, n, reused=reused)
    figure = plots.divergence_figure(result, BUG_CARDS[cache].label, LOGIT_TOLERANCE)
    return View([figure], lab_html(result, reveal), result)


def _shown(token: str) -> str:
    """A token as one visible cell: a newline as ↵, a space as ␣."""
    return html.escape(token.replace("\n", "↵").replace(" ", "␣"))


def tokens_table_html(run: BugRun, label: str) -> str:
    """The prompt and the new tokens, one column per step, the reference above this cache; the first step that
    differs in a strong colour, later differing steps in a light one."""
    first = run.first_token_step
    cell = "padding:1px 3px;text-align:center;min-width:1.2em"

    def row(name: str, tokens: list[str], strong: str) -> str:
        tds = []
        for i, (tok, ref) in enumerate(zip(tokens, run.reference)):
            bg = strong if first == i + 1 else ("#fbe3d6" if first and i + 1 > first and tok != ref else "")
            style = f"{cell};background:{bg};color:white" if bg == strong else f"{cell};background:{bg}"
            tds.append(f'<td style="{style}">{_shown(tok)}</td>')
        return (f'<tr><td style="padding-right:8px;white-space:nowrap">{html.escape(name)}</td>'
                f'<td style="color:#888;padding-right:6px;white-space:nowrap">{html.escape(run.prompt)}</td>'
                + "".join(tds) + "</tr>")

    steps = "".join(f'<td style="{cell};color:#999;font-size:75%">{i}</td>' for i in range(1, len(run.output) + 1))
    return ('<table style="border-collapse:collapse;margin:4px 0">'
            f'<tr><td style="color:#999;font-size:75%">第几步</td><td style="color:#999;font-size:75%">提示词</td>'
            f"{steps}</tr>{row('无缓存（参考）', run.reference, '#0072B2')}{row(label, run.output, '#D55E00')}</table>")


def methods_html(cache: str) -> str:
    """The source of the methods the cache overrides, as they are in the installed package."""
    cls = cache_class(cache)
    return "".join(snippet_html(source_snippet(getattr(cls, m))) for m in BUG_CARDS[cache].methods)


def teacher_forcing_html(run: BugRun) -> str:
    """Why the reference row need not read well, and the text a correct cache writes for the same prompt."""
    own = "".join(_shown(t) for t in run.free_running)
    return ('<span style="color:#555">「无缓存（参考）」这一行是逐步对答案（teacher forcing）：每一步让不用缓存的模型读'
            "<b>这个缓存已经写出的上文</b>，看它选哪个 token，所以两行每一步比的是同一个输入；缓存写歪之后，参考是在续写"
            f"一段歪了的文字，这一行本身就不通顺。不用缓存、让模型自己一路写下去是：「{own}」</span>")


def lab_html(run: BugRun, reveal: bool) -> str:
    card = BUG_CARDS[run.cache]
    step, logit_step = run.first_token_step, run.first_logit_step
    served = (f"先服务上一个请求「{PREVIOUS_PROMPT}」，reset() 后再服务它" if run.reused else "用一块全新的缓存服务它")
    lines = [f"提示词「{html.escape(run.prompt)}」：{served}；每一步都和不用缓存的模型读同样的上文（这个缓存已经写出的"
             "文字）时选的下一个 token 对比：", tokens_table_html(run, card.label), teacher_forcing_html(run)]
    if step is None:
        lines.append(f"<b>{html.escape(card.label)}：{len(run.output)} 步全部相同</b>；"
                     f"logits 最大差异 {max(run.logit_diff):.1e}")
        if run.cache != REFERENCE:
            lines.append("这次的设置恰好没有让 bug 暴露出来——bug 仍然在：换一个提示词、多生成几个 token，"
                         "或者改一改「先服务上一个请求」试试。")
    else:
        lines.append(f"<b>{html.escape(card.label)}：第 {step} 步开始不同</b>：参考「{_shown(run.reference[step - 1])}」，"
                     f"这个缓存「{_shown(run.output[step - 1])}」；logits 从第 {logit_step} 步起就超出了浮点误差；"
                     f"{len(run.output)} 步里有 {run.differing_steps} 步选的 token 与参考不同")
    if reveal:
        lines.append(f"<b>解释：</b>{html.escape(card.explanation)}<br><b>修复：</b>{html.escape(card.fix)}<br>"
                     f"<b>代码</b>（这个缓存改写的方法）：{methods_html(run.cache)}")
    else:
        lines.append("<i>先自己猜一猜 bug 在哪里，再勾选「显示解释」。</i>")
    return "<br>".join(lines)


def lab_panel(model: ToyTransformer, tokenizer, cache: str = "rope_offset", prompt: str = LAB_PROMPT,
              new_tokens: int = LAB_NEW_TOKENS, reused: bool = True) -> Panel:
    """Cache menu, prompt box, length slider, a fresh-or-reused box and a reveal box (cleared whenever another
    cache is chosen)."""
    menu = dropdown(CACHE_LABEL, [(BUG_CARDS[c].label, c) for c in LAB_CACHES], cache, width="280px")
    reveal = checkbox(REVEAL_LABEL, False, width="120px")
    menu.observe(lambda _change: setattr(reveal, "value", False), names="value")
    text = text_box(PROMPT_LABEL, prompt, width="260px")
    reuse = checkbox(REUSE_LABEL, reused, width="170px")
    run = lru_cache(maxsize=64)(run_lab_cache)  # the same settings twice (reveal toggled) run once
    controls = {"cache": menu, "prompt": text,
                "new_tokens": int_slider(NEW_TOKENS_LABEL, new_tokens, 1, MAX_LAB_TOKENS, width="340px"),
                "reused": reuse, "reveal": reveal}
    return Panel(controls, partial(render_lab, model, tokenizer, run=run), in_browser="new_tokens",
                 options=PanelOptions(layout="horizontal", css_class="kvlab-lab"))


def run_all_lab_caches(model: ToyTransformer, tokenizer, prompt: str = LAB_PROMPT,
                       new_tokens: int = LAB_NEW_TOKENS, reused: bool = True) -> dict[str, BugRun]:
    return {c: run_lab_cache(model, tokenizer, c, prompt, new_tokens, reused=reused) for c in LAB_CACHES}
