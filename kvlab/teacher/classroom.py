"""The guide's section on running a class on JupyterHub: which hub for which class size, what one student's kernel
measured (peak resident memory and CPU of every chapter at its defaults, from ``run_times.json``), and a Zero to
JupyterHub ``singleuser`` block whose guarantees and limits are computed from those measurements."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .run_times import Measurement

GIB = 2**30
SERVER_ALLOWANCE = 0.5 * GIB  # the notebook server and the pod's own processes, beside one kernel
POD_LIMIT = 2 * GIB  # the usual per-student start on a hub (Zero to JupyterHub, mybinder.org)


def round_up(x: float, step: float) -> float:
    """``x`` rounded up to a multiple of ``step`` (with a little slack for float noise)."""
    return math.ceil(x / step - 1e-9) * step


@dataclass(frozen=True)
class StudentNeeds:
    """One student's resources, from the measured chapters: the largest kernel peak and mean CPU, and what follows."""

    peak_bytes: int  # the largest kernel peak (VmHWM) of any chapter
    peak_chapter: str
    cpu_cores: float  # the largest mean CPU use of a chapter's run (CPU seconds / seconds of the cells)
    memory_guarantee: float  # GiB: the largest kernel plus the server's allowance
    memory_limit: float  # GiB: room for a second chapter's kernel left open
    cpu_guarantee: float
    cpu_limit: int


def student_needs(measurement: Measurement) -> StudentNeeds | None:
    """What one student needs, computed from the recorded runs; None when no run recorded memory."""
    peaks = {ch.notebook: max(ch.peak_rss) for ch in measurement.chapters if ch.peak_rss}
    if not peaks:
        return None
    chapter = max(peaks, key=peaks.get)
    cpu = max(x for ch in measurement.chapters for x in ch.cpu_cores)
    guarantee = round_up((peaks[chapter] + SERVER_ALLOWANCE) / GIB, 0.25)
    limit = max(POD_LIMIT / GIB, round_up(guarantee + peaks[chapter] / GIB, 0.5))
    return StudentNeeds(peaks[chapter], chapter, cpu, guarantee, limit, round_up(min(cpu, 1.0), 0.25), 1)


def singleuser_yaml(needs: StudentNeeds) -> str:
    """Zero to JupyterHub's ``singleuser`` block for these needs."""
    return "\n".join([
        "singleuser:",
        "  memory:",
        f"    guarantee: {needs.memory_guarantee:g}G",
        f"    limit: {needs.memory_limit:g}G",
        "  cpu:",
        f"    guarantee: {needs.cpu_guarantee:g}",
        f"    limit: {needs.cpu_limit}",
    ])


def resources_table(measurement: Measurement) -> str:
    lines = ["| notebook | 内核峰值内存（GiB） | 代码格运行（秒，最快一次） | 平均占用 CPU（核） |", "|---|---:|---:|---:|"]
    for ch in measurement.chapters:
        peak = f"{max(ch.peak_rss) / GIB:.2f}" if ch.peak_rss else "未测"
        cpu = ch.cpu_cores
        lines.append(f"| `{ch.notebook}` | {peak} | {ch.fastest:.1f} | {max(cpu):.2f} |" if cpu else
                     f"| `{ch.notebook}` | {peak} | {ch.fastest:.1f} | 未测 |")
    return "\n".join(lines)


def class_section(measurement: Measurement | None) -> str:
    """The guide's 「给一个班开课」 section (Chinese)."""
    parts = [
        "## 给一个班开课：JupyterHub",
        "几十到几百个学员时，不必让每个人自己装 Python：给全班开一个 JupyterHub，每人在浏览器里得到自己的 JupyterLab。",
        "- **一台服务器、约 100 人以内**：The Littlest JupyterHub（TLJH）。\n"
        "- **更多学员、多台机器**：Zero to JupyterHub（Kubernetes），可以给每个学员设 CPU 和内存的保证值与上限；"
        "常见的起点是每人 0.5–1 核、2 GiB。\n"
        "- **只做演示**：mybinder.org（每人 1–2 GiB，空闲的服务器会被回收，学员的修改不保存）。\n"
        "- **镜像**：仓库里的 `binder/` 是 repo2docker（BinderHub 和 Zero to JupyterHub 构建镜像的工具）读得懂的定义："
        "CPU 版 torch、课程的全部依赖、中文字体，运行时不下载任何东西。\n"
        "- **把课程放进每个学员的家目录**：nbgitpuller 链接。`python -m kvlab.teacher.link --hub https://你的hub地址` "
        "打印这个链接（先用 `git ls-remote` 核对分支存在），学员点开后课程被拉到自己的目录里，并直接打开 3.1；"
        "以后课程更新，再点一次就会合并进来，不会覆盖学员改过的文件。\n"
        "- **线程**：kvlab 按本进程真正能用的 CPU 设线程数：CPU 亲和性、cgroup 的 CPU 配额、JupyterHub 设的 `CPU_LIMIT`、"
        "学员自己设的 `KVLAB_THREADS`/`OMP_NUM_THREADS`，取最小的；每个计时读数都写明用了几个线程、依据是什么。"
        "不这样做时，一个 16 核节点上的每个学员都会开 16 个线程，计时量到的只是互相争抢。",
    ]
    needs = student_needs(measurement) if measurement else None
    if needs is None:
        parts += ["还没有测量每章内核的内存（`run_times.json` 里没有 `peak_rss`）：运行 `python -m kvlab.teacher --measure`。"]
        return "\n\n".join(parts)
    parts += [
        "### 每个学员要多少（实测）",
        f"每章在一个新内核里按默认设置从头运行到尾，运行结束时由内核自己读出的峰值常驻内存（VmHWM，不会漏掉短暂的峰值）"
        f"和 CPU 时间。测量：{measurement.date}，机器 {measurement.machine}。",
        resources_table(measurement),
        f"最大的是 `{needs.peak_chapter}`：**{needs.peak_bytes / GIB:.2f} GiB**。2 GiB 的 pod 里还要给 notebook 服务器和 pod "
        f"本身留约 {SERVER_ALLOWANCE / GIB:g} GiB，所以每章的内核都应在 1.5 GiB 以内（测试会检查）。一个学员同时开着几章时，"
        "每章各有一个内核：请学员用完一章后关掉它的内核（Kernel → Shut Down Kernel）。",
        "### Zero to JupyterHub 的 singleuser 设置",
        f"由上表算出：内存保证 = 最大的内核峰值 + {SERVER_ALLOWANCE / GIB:g} GiB，向上取到 0.25 GiB；内存上限 = 保证值再加一个"
        "最大内核（容许同时开着两章），向上取到 0.5 GiB，至少 2 GiB；CPU 保证 = 各章运行时平均占用的最大值，向上取到 0.25 核；"
        "CPU 上限 1 核：kvlab 按这个配额只开 1 个线程（见上面的「线程」），各章在 1 核上会慢一些，每个计时读数都写明用了几个线程。",
        "```yaml\n" + singleuser_yaml(needs) + "\n```",
    ]
    return "\n\n".join(parts)
