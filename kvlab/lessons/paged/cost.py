"""The cost of paging: a decode step on the paged cache against the contiguous ``KVCache``, at a few lengths and
batch sizes, with the gather (reading K/V block by block into one tensor) timed on its own."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..._validate import positive_int
from ...cache import KVCache
from ...measure import alternate, device_label, measurement_threads, timed, torch_threads
from ...stats import median
from ...model import ToyTransformer
from ...paged_cache import PagedKVCache
from ...paging import blocks_for
from .runs import BLOCK_SIZE, corpus_ids

COST_BATCHES = (1, 8)
COST_LENGTHS = (32, 128, 224)
MAX_COST_BATCH = 16  # bounds: a cell holds at most 16 x 256 tokens, twice (about 4 MiB each for the demo model)
BAND = 0.15


@dataclass(frozen=True)
class StepCost:
    """One batch size and length: per round, the median decode step of each cache and of the gather alone; the
    comparison uses each cache's fastest round."""

    batch: int
    length: int  # tokens each sequence holds before the timed steps
    contiguous_ms: tuple[float, ...]
    paged_ms: tuple[float, ...]
    gather_ms: tuple[float, ...]  # reading every layer's K and V through the block table, nothing else
    gather_bytes: int  # what that gather copies per step

    # Each cache's step at its fastest round: a burst of load on a busy machine slows some rounds, rarely all.
    @property
    def best_contiguous_ms(self) -> float:
        return min(self.contiguous_ms)

    @property
    def best_paged_ms(self) -> float:
        return min(self.paged_ms)

    @property
    def ratios(self) -> list[float]:
        """Per round: paged over contiguous (to check that the rounds point the same way)."""
        return [p / c for p, c in zip(self.paged_ms, self.contiguous_ms)]

    @property
    def ratio(self) -> float:
        return self.best_paged_ms / self.best_contiguous_ms

    @property
    def extra_ms(self) -> float:
        return self.best_paged_ms - self.best_contiguous_ms


@dataclass(frozen=True)
class PagingCost:
    cells: list[StepCost]
    block_size: int
    device: str
    threads: int | None
    where: str  # measure.device_label: what every readout says about the device

    def cell(self, batch: int, length: int) -> StepCost:
        return next(c for c in self.cells if (c.batch, c.length) == (batch, length))


@torch.no_grad()
def _cell(model: ToyTransformer, ids: torch.Tensor, steps: int, rounds: int, block_size: int) -> StepCost:
    B, L = ids.shape
    c, dev = model.config, model.device
    kv = KVCache(c, B, L + steps, dtype=model.dtype, device=dev)
    paged = PagedKVCache(c, B, L + steps, dtype=model.dtype, device=dev, block_size=block_size)
    model(ids, kv)
    model(ids, paged)
    nxt = ids[:, -1:]  # [B, 1]

    def decode(cache, rewind):
        times = [timed(lambda: model(nxt, cache), dev)[1] for _ in range(steps)]
        rewind()
        return median(times) * 1e3

    def gather():
        paged.reserve(1)
        seconds = timed(lambda: [paged.read(layer, L + 1) for layer in range(c.n_layer)], dev)[1]
        paged.truncate(L)
        return seconds * 1e3

    def rewind_kv():
        kv.length = L

    runs = alternate({"kv": lambda: decode(kv, rewind_kv), "paged": lambda: decode(paged, lambda: paged.truncate(L)),
                      "gather": gather}, rounds)
    width = blocks_for(L + 1, block_size) * block_size
    gather_bytes = 2 * c.n_layer * B * width * c.n_kv_head * c.head_dim * paged.element_bytes
    return StepCost(B, L, tuple(runs["kv"]), tuple(runs["paged"]), tuple(runs["gather"]), gather_bytes)


def paging_cost(model: ToyTransformer, tokenizer, batches=COST_BATCHES, lengths=COST_LENGTHS, rounds: int = 3,
                steps: int = 4, block_size: int = BLOCK_SIZE) -> PagingCost:
    """Decode steps at each (batch, length) on both caches after a real prefill of corpus text, alternating."""
    batches = [positive_int("batches", b, maximum=MAX_COST_BATCH) for b in batches]
    lengths = [positive_int("lengths", n, maximum=model.config.max_seq_len - steps) for n in lengths]
    rounds, steps = positive_int("rounds", rounds, maximum=7), positive_int("steps", steps, maximum=16)
    text = corpus_ids(tokenizer)
    threads = measurement_threads() if model.device.type == "cpu" else None
    cells = []
    with torch_threads(threads or torch.get_num_threads()):
        for B in batches:
            for L in lengths:
                rows = [text[b * 97: b * 97 + L] for b in range(B)]
                ids = torch.tensor(rows, dtype=torch.long, device=model.device)  # [B, L]
                cells.append(_cell(model, ids, steps, rounds, block_size))
    return PagingCost(cells, block_size, str(model.device), threads, device_label(model.device, threads))


# -- the sentence ---------------------------------------------------------------------------------------------
def cell_verdict(cell: StepCost) -> str:
    """From the fastest rounds' ratio: "slower" or "faster" beyond ±15 % when most rounds point the same way,
    "same" within ±15 %, else "unclear" (the rounds disagree)."""
    ratio, rounds = cell.ratio, cell.ratios
    if ratio >= 1 + BAND and sum(r > 1 for r in rounds) * 2 > len(rounds):
        return "slower"
    if ratio <= 1 / (1 + BAND) and sum(r < 1 for r in rounds) * 2 > len(rounds):
        return "faster"
    if abs(ratio - 1) < BAND:
        return "same"
    return "unclear"


def _more(ms: float) -> str:
    """A step's extra time as the learner reads it: "多 1.20 ms", or "少 0.30 ms" when the paged step was quicker."""
    return f"多 {ms:.2f} ms" if ms >= 0 else f"少 {-ms:.2f} ms"


def cost_sentence(cost: PagingCost, gpu: bool) -> str:
    """What the grid of step times shows, chosen from the numbers: growing with the gather, a fixed cost, no
    difference, not slower, too noisy to tell (most cells' rounds disagree, or some cells are clearly slower
    while others are clearly faster); on a GPU, the launch-bound shape (steps flat in batch and length)."""
    cells = sorted(cost.cells, key=lambda c: c.gather_bytes)
    small, big = cells[0], cells[-1]
    verdicts = [cell_verdict(c) for c in cells]
    slower = [c for c, v in zip(cells, verdicts) if v == "slower"]
    quicker = [c for c in cells if c.ratio <= 1 / (1 + BAND)]  # faster beyond the band on the fastest rounds
    ratios = f"{min(c.ratio for c in cells):.2f}–{max(c.ratio for c in cells):.2f}"
    flat = max(c.best_contiguous_ms for c in cells) <= (1 + BAND) * min(c.best_contiguous_ms for c in cells)
    mib = big.gather_bytes / 2**20
    gather = (f"分页的一步要先按块表把每一层的 K、V 收集（gather）成连续的张量：B = {big.batch}、每条 {big.length} 个 "
              f"token 时每步多拷贝 {mib:.2f} MiB，单独测这一步收集最快要 {min(big.gather_ms):.2f} ms")
    if verdicts.count("unclear") * 2 > len(verdicts):
        return f"多数格子几轮的结论不一致：这台机器太忙，这次说不准分页慢多少。（{gather}。）"
    if slower and quicker:
        return (f"各格子的结论互相矛盾：有的格子分页明显更慢，有的反而明显更快（分页比连续缓存，比值 {ratios}）。"
                f"分页不会让一步变快，这是机器太忙造成的：这次说不准分页慢多少。（{gather}。）")
    if all(v == "same" for v in verdicts):
        return f"每一格两种缓存都相差不到 {BAND:.0%}：在这台机器上，这么小的模型看不出分页的代价。{gather}。"
    if gpu and flat and slower:
        return (f"在这块 GPU 上，连续缓存的一步几乎不随 B 和长度变（{min(c.best_contiguous_ms for c in cells):.2f}–"
                f"{max(c.best_contiguous_ms for c in cells):.2f} ms）：小模型的一步主要花在逐个启动内核上。"
                f"分页多出的是每层两次收集的内核启动和块表的准备，所以多出的是一个大致固定的量（慢了的格子多 "
                f"{min(c.extra_ms for c in slower):.2f}–{max(c.extra_ms for c in slower):.2f} ms）。{gather}。")
    grows = big.extra_ms > (1 + BAND) * max(small.extra_ms, 0) and big.extra_ms > 0
    if verdicts[-1] == "slower" and grows:
        share = min(big.gather_ms) / big.extra_ms
        where = ("多出的时间大部分就在这里" if share >= 0.5 else
                 f"只占多出的时间的 {share:.0%}；其余来自收集之外、这里没有分开测的部分：每一步在 Python 里准备块表索引、"
                 "注意力读收集出来的 K/V（块里按 token 存，收集后只是转置成按头排列的视图，同一个头的数据在内存里是隔开的，"
                 "不像连续缓存那样挨在一起）")
        return (f"分页的一步更慢，而且要收集的字节越多慢得越多（各轮最快的一次相比）：B = {small.batch}、"
                f"{small.length} 个 token 时{_more(small.extra_ms)}，B = {big.batch}、{big.length} 个 token 时"
                f"{_more(big.extra_ms)}（{big.ratio:.2f} 倍）。{gather}，{where}。")
    if slower:
        extras = "、".join(f"{c.extra_ms:.2f}" for c in slower)
        head = f"分页的一步在 {len(slower)} 个格子里慢了 {BAND:.0%} 以上（多 {extras} ms），其余格子相差不到 {BAND:.0%}；"
        spread = f"收集最少的格子{_more(small.extra_ms)}，最多的{_more(big.extra_ms)}"
        if grows:  # more extra time where more is gathered, but the largest cell is within the band
            return (f"{head}{spread}，可收集最多的格子本身相差在 {BAND:.0%} 之内：这次说不准多出的时间是否随收集的字节"
                    f"增长。{gather}。")
        return (f"{head}多出的时间不随要收集的字节增长（{spread}）：更像是每一步准备块表索引这类固定的开销。{gather}。")
    return (f"分页的一步在大多数格子里不比连续缓存慢（各轮最快的一次相比，比值 {ratios}）。{gather}。")


def why_sentence(gpu: bool) -> str:
    """Why a real paged cache does not pay for the gather, and what would differ on the other kind of device."""
    base = ("这里的分页是纯 PyTorch 写的：注意力需要连续的 K、V，所以每一步先把块拷贝到一起。vLLM 的 PagedAttention "
            "内核在注意力内部按块表直接读各个块，不做这次拷贝。按块读并非完全免费：vLLM 的论文量到它的注意力内核比读连续内存的"
            "内核慢约 20–26%，但注意力只占一步的一部分，换来的批次更大，整体吞吐反而高得多。")
    if gpu:
        return base
    return base + ("在 GPU 上，演示模型这么小，一步的时间主要花在启动内核上：两种缓存的一步都几乎不随 B 和长度变，"
                   "分页多出的是几次内核启动的固定时间。")


def cost_sentences(cost: PagingCost) -> list[str]:
    gpu = cost.device.startswith("cuda")
    return [cost_sentence(cost, gpu), why_sentence(gpu)]
