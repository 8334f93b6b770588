"""Every word the teacher's guide (GUIDE.md / GUIDE.en.md) and keys (KEYS.md / KEYS.en.md) show, in both languages
(``tests/test_phrases.py``: the same keys and fields in each).

- :data:`GUIDE`: the guide's and the keys' own sentences, headings and table heads (:mod:`.guide`, :mod:`.plans`,
  :mod:`.classroom`, :mod:`.keys`, :mod:`.run_times`' busyness);
- :data:`CHAPTER_TEXTS` (in :mod:`.chapter_texts`): what the chapter guides say (prerequisites, objectives,
  discussion prompts, optional sections' reasons, references' claims), the Chinese read from
  :data:`kvlab.teacher.chapters.CHAPTERS`, the English written beside it under the same keys.
"""
from __future__ import annotations

from ..phrases import Phrasebook

# Silent reading of English non-fiction: Brysbaert (2019), the meta-analysis the Chinese rate also leans on.
READING_SPEED_EN = 238  # words per minute

_ZH = {
    # -- the file head ----------------------------------------------------------------------------------------
    "generated": "<!-- 由 `python -m kvlab.teacher` 生成，请勿手改：改 kvlab/teacher/ 或课程本身，再重新生成。 -->",
    "title": "# 教师指南：KV Cache 基础（第 3 章，3.1–3.6）",
    "intro": "这份指南给考虑把本课程布置给学生的老师：每一章要先会什么、学完能做什么、要多长时间（实测，不是估计）、"
             "哪些小节必修哪些选学、各章之间的关系、每一章的说法出自哪些论文，以及怎样排课、课上讨论什么、机器的读数「说不准」时怎么办。练习和自测的答案在 [KEYS.md](KEYS.md)。",
    "audience": "**对象**：学过 Transformer 自注意力、会用 Python 和 PyTorch 的本科高年级学生、研究生和工程师。"
                "**形式**：每章一个 Jupyter notebook，正文中文，代码英文；所有数字都在学员自己的机器上运行得出。"
                "**运行时间**：{run_time}。**没有 Python 环境的课堂**：`python -m kvlab.book --out book` 生成离线的静态网站"
                "和每章一份 PDF 讲义（见 README）。",
    "not_yet": "尚无这一版的章节：{chapters}。",  # never shown: the Chinese edition has every chapter
    "map_head": "## 课程地图",
    "time_head": "## 每章要多长时间",
    "method_head": "### 这些分钟数怎样算出来",
    "refs_head": "## 全部参考文献",
    # -- the course map ---------------------------------------------------------------------------------------
    "map_main": "      （主线，按顺序学）",
    "map_extra": "  {builds}  ──▶  {number}（拓展，可选）",
    "map_table_head": "| 章节 | 用到前面哪一节的什么 |",
    "map_uses_sep": "；",
    "map_use": "{chapter}：{what}",
    "map_start": "（起点：只需要先修知识）",
    # -- the time table ---------------------------------------------------------------------------------------
    "time_table_head": "| 章节 | 汉字（正文 + 输出） | 阅读 | 其中必修部分 | 运行 | 面板 | 练习 | 自测与检查点 | **合计** |",
    "not_measured": "未测",
    "count_exercises": "{minutes}（{n} 个）",
    "count_quiz": "{minutes}（{n} 题）",
    "count_panels": "{minutes}（{n} 个）",
    "extension_mark": "（拓展）",
    "amount": "{prose:,} + {output:,}",
    "time_total": "主线 {main_span} 合计约 **{main} 分钟**（只读必修部分约 {core} 分钟）；拓展 {extra_span} 另需约 {extra} 分钟。单位都是分钟。",
    # -- how the minutes are computed ---------------------------------------------------------------------------
    "method_lead": "每一项都由 `kvlab.teacher.minutes` 从 notebook 和一次实测算出，不是估计：",
    "method_reading": "- **阅读** = （这一章 markdown 格里的汉字数 + 实测那次运行打印出的汉字数：读数、表格、由测量结果选出的句子）"
                      "÷ **{speed} 汉字/分钟**。这个速度的依据：IReST "
                      "（Trauzettel-Klosinski & Dietz, *Standardized Assessment of Reading Performance: The New International Reading "
                      "Speed Texts IReST*, Investigative Ophthalmology & Visual Science 53(9), 2012）的表 2 里，以中文为母语的成年人"
                      "**朗读**一般文本约 255 ± 29 字/分钟；Brysbaert（*How many words do we read per minute? A review and meta-analysis "
                      "of reading rate*, Journal of Memory and Language 109, 2019）的综述里默读约是朗读的 1.3 倍（英语 238 对 183 词/分钟），"
                      "折合约 330 字/分钟；带公式、代码名和图的技术文本读得更慢，取 300。只数汉字：英文、数字、公式和代码不计，"
                      "所以对公式多的段落（3.3 的 roofline）偏少。",
    "method_running": "- **运行** = 这一章的全部代码格从头到尾运行一次的时间（各格从开始执行到返回的时间之和，不含内核启动），"
                      "用 `python -m kvlab.teacher --measure` 测量：每章运行多次、各章轮流运行，取最快的一次"
                      "（别的程序只会让一次运行变慢，最快的一次最接近这台机器本身的速度）；机器空闲一些时可以用 "
                      "`python -m kvlab.teacher --measure --append` 再测几次，加进已有的记录。",
    "method_panels": "- **面板** = 每个交互面板（调用 `*_panel(` 的代码格）{minutes:g} 分钟：拖一拖控件、看图怎样变。",
    "method_exercises": "- **练习** = 要写函数的练习每个 {code:g} 分钟，算数值的练习每个 {calc:g} 分钟"
                        "（按练习代码格里有没有 `def` 区分）；这是给大多数学员的估计，卡住的学员会用更久。",
    "method_quiz": "- **自测与检查点** = 每道自测题或检查点题 {minutes:g} 分钟。",
    "method_output_en": "- 输出的汉字由实测那次运行数出。",  # shown in the English guide only
    "method_core": "- **其中必修部分** = 去掉下面标为「选学」的小节之后的阅读时间：选学小节的 markdown 和选学小节里代码格打印的输出"
                   "都不算（一格的输出归它所在的小节）。",
    "measured_on": "本次测量：{date}，机器 {machine}，每章运行 {runs} 次。测量前的负载（1/5/15 分钟平均）"
                   "{before}，测量后 {after}。{busyness}{note}",
    "runs_table_head": "| notebook | 每次运行（秒） | 每次运行后的负载 | 取最快（秒） | 输出的汉字 |",
    "not_measured_yet": "还没有测量运行时间（`kvlab/teacher/run_times.json` 不存在）：运行 `python -m kvlab.teacher --measure`。",
    # -- run_times' busyness ------------------------------------------------------------------------------------
    "busy_none": "没有记录负载。",
    "busy_range": "每章运行后记录的 1 分钟平均负载在 {low:.1f} 到 {high:.1f} 之间（这台机器 {cores} 核）",
    "busy_idle": "{said}：测量时机器基本空闲，这些时间接近这台机器本身的速度。",
    "busy_busy": "{said}：最忙时每个核上平均有 {per_core:.1f} 个可运行的进程（别的工程师的测试与这次测量同时在跑），"
                 "运行时间比在空闲的同样机器上长；已取每章最快的一次，空闲时会更短。",
    # -- the run-time sentence ----------------------------------------------------------------------------------
    "run_unmeasured": "CPU 即可；运行时间还没有测量：`python -m kvlab.teacher --measure`",
    "run_under_minute": "不到一分钟",
    "run_about_minutes": "约 {n} 分钟",
    "run_said": "CPU 即可，在 {cores} 核 CPU 上每章默认设置下的代码格运行{bound}（实测最慢的一章 "
                "{number} 最快一次 {fast:.1f} 秒{load}）",
    "run_load": "，运行后 1 分钟平均负载 {load:.1f}",
    "run_busy": "；机器忙时会慢得多（{number} 最慢一次 {slow:.1f} 秒，是它最快一次的 "
                "{times:.0f} 倍；见下文关于「说不准」的一节）",
    # -- one chapter --------------------------------------------------------------------------------------------
    "ch_head": "## {number} {title}",
    "ch_notebook": "notebook：`{path}`",
    "ch_optional": "> **拓展，可选。** {why}",
    "ch_time": "**时间**：阅读 {reading} 分钟（必修部分 {core}），运行 {running} 分钟，面板 {panels}，练习 "
               "{exercises}{quiz}：合计约 **{total} 分钟**。",
    "ch_time_quiz": "，自测与检查点 {minutes}",
    "ch_output_estimate": "（输出 {output:,} 字，按每个汉字 {ratio:.2f} 词估算。）",  # shown in the English guide only
    "ch_prereq_head": "**先修**",
    "ch_objectives_head": "**学完后你能……**（括号里是练习它的动手练习）",
    "objective_practised": "（{titles}）",
    "objective_sep": "；",
    "objective_end": "。",
    "objective_more": "；",
    "ch_discussion_head": "**课堂讨论**（每个问题约 {minutes:g} 分钟：先各自写下预测或解释，再两人对照，"
                          "最后全班和本机的读数比较）",
    "ch_sections_head": "**小节**（阅读分钟数按上面的速度算；练习见 [KEYS.md](KEYS.md)）",
    "ch_sections_table": "| 小节 | 汉字 | 阅读 | 必修/选学 |",
    "ch_opening_row": "| （开头：标题与引言） | {amount:,} | {minutes} | 必修 |",
    "sub_heading": "　{heading}",
    "kind_exercises": "练习",
    "kind_optional_own": "选学：{why}",
    "kind_optional_parent": "选学（属于「{parent}」）",
    "kind_core": "必修",
    "ch_refs_head": "**参考文献与它支持的说法**",
    "ch_further_head": "延伸阅读（课程指向它，但不依赖它的结论）：",
    "ref_line": "- {citation} —— {claim}",
    # -- lesson plans -------------------------------------------------------------------------------------------
    "plans_head": "## 课时安排：主线 {first}–{last}，{classes} 次课，每次 {length} 分钟",
    "plans_lead": "按翻转课堂安排：**课前**学员在自己的机器上运行本次课的各章，读完必修部分；**课上**先用 "
                  "{opening:g} 分钟收集课前阅读留下的问题，再一起拖交互面板（先预测再看）、讨论每章的「课堂讨论」"
                  "（每个问题 {discussion:g} 分钟）、做动手练习和自测；**课后**读选学小节，并做下一次课的课前部分。"
                  "每一项的分钟数都是上面「每章要多长时间」里同一章的数（同样的规则算出，不另外估计）；各章不拆开、按顺序排，"
                  "在所有排法里取最满的那次课最空的一种；课上剩下的时间留给卡住的学员把练习做完。计时的实验放在课前各自运行，"
                  "课上讨论已经打印出来的读数：全班同时运行计时实验时，共用的机器最忙（见下一节）。",
    "plans_extra": "拓展 {chapters}（可选）：主线之后再加 {n} 次课，同样安排。",
    "list_sep": "、",
    "plan_before": "在自己的机器上从头运行本章，读完必修部分和运行打印出的读数",
    "plan_panels": "交互面板 {n} 个：先让学员预测，再一起拖动控件看结果",
    "plan_discussion": "课堂讨论 {n} 个问题（见本章的「课堂讨论」）",
    "plan_quiz": "自测与检查点 {n} 题",
    "plan_optional": "选学小节{names}",
    "plan_optional_name": "「{heading}」",
    "plan_optional_sep": "、",
    "plan_opening": "开场：课前阅读留下的问题",
    "plan_moved": "{what}（课上放不下，留作课后）",
    "plan_item_sep": "；",
    "plan_row": "  | {chapter} {what} | {minutes} |",
    "plan_row_bare": "  | {what} | {minutes} |",
    "plan_item": "{chapter} {what}（{minutes} 分钟）",
    "plan_item_bare": "{what}（{minutes} 分钟）",
    "plan_class_head": "### 第 {number} 次课：{chapters}（课上约 {used} 分钟，余 {spare:g} 分钟）",
    "plan_chapter_sep": "、",
    "plan_before_line": "- **课前**（约 {minutes} 分钟）：{items}。",
    "plan_in_class": "- **课上**：",
    "plan_table_head": "  | 内容 | 分钟 |",
    "plan_total": "  | **合计** | **{minutes}** |",
    "plan_after": "- **课后**：{items}",
    "plan_after_items": "{items}。",
    "plan_after_none": "（本次课各章没有选学小节）。",
    # -- the class on JupyterHub ---------------------------------------------------------------------------------
    "hub_head": "## 给一个班开课：JupyterHub",
    "hub_lead": "几十到几百个学员时，不必让每个人自己装 Python：给全班开一个 JupyterHub，每人在浏览器里得到自己的 JupyterLab。",
    "hub_list": "- **一台服务器、约 100 人以内**：The Littlest JupyterHub（TLJH）。\n"
                "- **更多学员、多台机器**：Zero to JupyterHub（Kubernetes），可以给每个学员设 CPU 和内存的保证值与上限；"
                "常见的起点是每人 0.5–1 核、2 GiB。\n"
                "- **只做演示**：mybinder.org（每人 1–2 GiB，空闲的服务器会被回收，学员的修改不保存）。\n"
                "- **镜像**：仓库里的 `binder/` 是 repo2docker（BinderHub 和 Zero to JupyterHub 构建镜像的工具）读得懂的定义："
                "CPU 版 torch、课程的全部依赖、中文字体，运行时不下载任何东西。\n"
                "- **把课程放进每个学员的家目录**：nbgitpuller 链接。`python -m kvlab.teacher.link --hub https://你的hub地址` "
                "打印这个链接（先用 `git ls-remote` 核对分支存在），学员点开后课程被拉到自己的目录里，并直接打开 3.1；"
                "以后课程更新，再点一次就会合并进来，不会覆盖学员改过的文件。加上 `--lang en`，链接打开的是英文版的 3.1"
                "（`chapters/en/`；界面语言仍由镜像决定）。\n"
                "- **线程**：kvlab 按本进程真正能用的 CPU 设线程数：CPU 亲和性、cgroup 的 CPU 配额、JupyterHub 设的 `CPU_LIMIT`、"
                "学员自己设的 `KVLAB_THREADS`/`OMP_NUM_THREADS`，取最小的；每个计时读数都写明用了几个线程、依据是什么。"
                "不这样做时，一个 16 核节点上的每个学员都会开 16 个线程，计时量到的只是互相争抢。",
    "hub_unmeasured": "还没有测量每章内核的内存（`run_times.json` 里没有 `peak_rss`）：运行 `python -m kvlab.teacher --measure`。",
    "hub_needs_head": "### 每个学员要多少（实测）",
    "hub_needs_lead": "每章在一个新内核里按默认设置从头运行到尾，运行结束时由内核自己读出的峰值常驻内存（VmHWM，不会漏掉短暂的峰值）"
                      "和 CPU 时间。测量：{date}，机器 {machine}。",
    "hub_table_head": "| notebook | 内核峰值内存（GiB） | 代码格运行（秒，最快一次） | 平均占用 CPU（核） |",
    "hub_largest": "最大的是 `{chapter}`：**{peak:.2f} GiB**。2 GiB 的 pod 里还要给 notebook 服务器和 pod "
                   "本身留约 {allowance:g} GiB，所以每章的内核都应在 1.5 GiB 以内（测试会检查）。一个学员同时开着几章时，"
                   "每章各有一个内核：请学员用完一章后关掉它的内核（Kernel → Shut Down Kernel）。",
    "hub_yaml_head": "### Zero to JupyterHub 的 singleuser 设置",
    "hub_yaml_lead": "由上表算出：内存保证 = 最大的内核峰值 + {allowance:g} GiB，向上取到 0.25 GiB；内存上限 = 保证值再加一个"
                     "最大内核（容许同时开着两章），向上取到 0.5 GiB，至少 2 GiB；CPU 保证 = 各章运行时平均占用的最大值，向上取到 0.25 核；"
                     "CPU 上限 1 核：kvlab 按这个配额只开 1 个线程（见上面的「线程」），各章在 1 核上会慢一些，每个计时读数都写明用了几个线程。",
    # -- when a machine cannot tell -----------------------------------------------------------------------------
    "noisy_at": "（运行后负载 {load:.1f}）",
    "noisy_example": "本指南自己的测量就是一例：同一台 {cores} 核机器、同一章 {number}，"
                     "最快一次 {fast:.1f} 秒{at_fast}，最慢一次 {slow:.1f} 秒{at_slow}，相差 {times:.1f} 倍。",
    "noisy_measured_item": "{number} 的「{title}」",
    "noisy_measured": "动手练习里，{items}的答案取自学员自己的那次测量（检查格用同一次测量算出期望值），其余练习都与机器无关。",
    "noisy_head": "## 机器打印「说不准」或读数起伏很大时",
    "noisy_why": "**为什么会这样。** 计时读数都是在学员自己的机器上现场测出来的，而课堂上的机器很少空闲：",
    "noisy_causes": "- **共用的 CPU**：JupyterHub 的一个节点上，几十个学员的内核同时在运行；学员自己的电脑上，浏览器、"
                    "Jupyter 服务器和别的程序也在用 CPU。别的程序只会让一次运行变慢，而且时快时慢。{example}\n"
                    "- **线程配额**：kvlab 按本进程真正能用的核数开线程（见上面的「线程」）；配额只有 1 核时，内核还要和 notebook "
                    "服务器、面板的更新抢同一个核，任何一步都可能被打断。\n"
                    "- **Colab**：免费的运行时只有 2 个虚拟核，与别的用户共用一台物理机，同一个格子两次运行可能差好几倍；"
                    "分配到 GPU 时，小模型的耗时主要是启动开销（3.3 的选学小节「在 GPU 上会看到什么」）。",
    "noisy_course": "**课程怎样处理。** 解读读数的每一句话都是按打印出来的数字选出来的：数字支持哪个结论就说哪个；波动比要比较的"
                    "差别还大时，就说「说不准」，并说明怎样重测，而不是硬给一个结论。所以「说不准」是正确的输出，不是程序出错。"
                    "数出来的量（运算次数、字节数、token 数、缓存形状）与机器无关，在哪台机器上都一样。{measured}",
    "noisy_rerun": "**怎样重测。**\n\n"
                   "1. **关掉别的内核和程序**：JupyterLab 左侧栏的「运行中的终端和内核」里关掉其他章的内核（或 Kernel → Shut Down "
                   "Kernel），关掉别的占 CPU 的程序，再从这一小节的开头重新运行。\n"
                   "2. **多重复几次**：面板上有重复次数的控件时调大再运行；读数取中位数，重复越多，偶尔一次被打断的影响越小。\n"
                   "3. **设 `KVLAB_THREADS`**：在 notebook 里运行 `%env KVLAB_THREADS=1`，再重跑计时的格子（或在启动 Jupyter 之前 "
                   "`export KVLAB_THREADS=1`）。只用 1 个线程，就不会有线程互相等待；读数会写明「按 KVLAB_THREADS=1」。在独占的"
                   "多核机器上可以设大一些，kvlab 不会超过本进程能用的核数。\n"
                   "4. **错开时间**：不要让全班同时运行计时实验（上面的课时安排把它放在课前）；或者由老师在空闲的机器上运行一次，"
                   "投影出来讨论。\n"
                   "5. **还是说不准**：就接受它。静态版（`python -m kvlab.book`）里有在一台机器上完整运行过一遍的读数，可以对照。",
    "noisy_tell": "**对学员说什么。**\n\n"
                  "- 「说不准」的意思是：这一次测到的波动比要比较的差别还大，这台机器此刻给不出结论。这本身就是一个测量结果，"
                  "不是你做错了什么。\n"
                  "- 本课程的结论不靠某一次计时：先看数出来的量，计时只是在你的机器上印证；换一台空闲的机器或多重复几次，"
                  "通常就能印证。\n"
                  "- 可以借机讨论：读数为什么取中位数而不是平均值？为什么最快的一次最接近机器本身的速度（本指南的运行时间也这样取）？"
                  "邻座两人的读数差多少，差别从哪里来？",
    # -- KEYS.md ----------------------------------------------------------------------------------------------
    "keys_title": "# 答案（教师用）",
    "keys_lead": "自测题、检查点、小任务和动手练习的标准答案，全部由 kvlab 的代码生成：自测题来自各章的 `review_questions()`，"
                 "检查点和小任务来自 `kvlab/lessons/checkpoints.py`，练习的参考答案来自 `kvlab/exercises/solutions.py`，"
                 "评分方法来自 `kvlab/exercises/chNN.py`。",
    "keys_quiz_head": "## {number} 自测",
    "keys_checkpoint_head": "## {number} 检查点",
    "keys_tasks_head": "## {number} 小任务",
    "keys_exercises_head": "## {number} 动手练习",
    "hidden_lead": "请不要把这份文件发给学员。学员在课程里什么时候看得到答案：",
    "hidden_quiz": "- **自测题**（各章的「自测」）：同一题答错 {reveal} 次之后，题下才出现「显示答案」按钮（答对后收回）；"
                   "看了答案的那题不计分。",
    "hidden_checkpoint": "- **检查点**（先预测、再看解释）：每题只算第一次有效作答（学员的预测），判分后立刻给出解释，答错时连同答案；"
                         "作答之前不显示。",
    "hidden_exercises": "- **动手练习**：学员第一次检查了自己的答案（改过代码格，检查结果不是「还没有完成」）之后，检查格才附上折叠的"
                        "「显示参考答案」；原样运行代码格只得到「还没有完成」和一句说明。记录按练习分开，只在当前 kernel 里，重启 kernel "
                        "后重新开始。第二次答错起逐条给出的是提示，不是答案。",
    "hidden_teacher": "- **老师**：启动 JupyterLab 之前设环境变量 `{env}=1`，或在 notebook 里运行 `{call}`，"
                      "每个练习的检查格都会直接附上参考答案（`{function}(False)` 恢复成学员的规则）。",
    "hidden_book": "- **静态版**（`python -m kvlab.book`）：页面和讲义 PDF 里没有练习的参考答案；只有用 `--teacher` 构建的教师版"
                   "才有（页面上折叠、讲义里印在题目下面）。自测题和检查点的答案在静态版里折叠在每题下面（静态页不能判分），"
                   "点开就能看到。",
    "hidden_open": "- **不隐藏的**：这份 KEYS.md 和 `kvlab/exercises/solutions.py` 都在仓库里，拿到仓库的人都能读到。",
    "q_made_by": "题目与答案都由 `{where}()` 生成；数字题的标准答案是 kvlab 算出来的（下面写出算式）。",
    "q_variables": "数字题用到的变量（`{function}` 里的定义）",
    "q_head": "**{i}.（{section}）** {prompt}",
    "q_correct": " ✓ **正确答案**",
    "q_choice": "- {letter}. {text}{mark}",
    "q_explained": "讲解：{feedback}",
    "q_wrong_head": "选错时的反馈：",
    "q_wrong": "- {letter}：{feedback}",
    "q_tolerance": "（允许相对误差 {tol:g}）",
    "q_exact": "（必须精确）",
    "q_answer": "- 答案：**{answer} {unit}**{tolerance}",
    "q_computed": "- kvlab 的算法：`{expression}` = `{value}`",
    "q_explanation": "- 讲解：{explanation}",
    "q_hint": "- 答错时的提示：{hint}",
    "checkpoint_lead": "检查点的每题只算第一次作答（学员的预测）：提交后马上判分并给出解释，答错时同时给出答案。",
    "task": "**小任务**：「{quote}」\n\n- 答案：{key}",
    "ex_head": "### {title}（`{key}`）",
    "ex_task": "题目（学员看到的说明）",
    "ex_solution": "参考答案（`kvlab/exercises/solutions.py`）：",
    "ex_values": "参考答案算出的值：",
    "ex_function": "参考答案是一个函数：检查格用下面评分函数里的用例逐个核对它。",
    "ex_check": "检查格：`{check}`",
    "ex_hints": "提示（第二次答错起逐条出现）：",
    "ex_grader": "评分函数 `{function}`（期望值怎样算出）",
    "measured.ch03.batch_ridge": "答案取决于学员这一页实测的两个屋顶（转折点 = 算力 ÷ 带宽）：检查格用同一次测量算出期望的批次。",
    "measured.ch03.ttft_tpot": "答案取决于学员这一次生成的计时：检查格从同一份 trace 算出期望值，并核对学员读的是不是同一次运行。",
}

_EN = {
    "generated": "<!-- Generated by `python -m kvlab.teacher --lang en`; do not edit by hand: change kvlab/teacher/ or the "
                 "course itself, then generate again. -->",
    "title": "# Teacher's guide: KV cache basics (chapter 3, 3.1–3.6), English edition",
    "intro": "This guide is for teachers thinking of assigning the course: what each chapter expects learners to know "
             "already, what they can do afterwards, how long it takes (measured, not guessed), which sections are core "
             "and which optional, how the chapters depend on each other, which publications each chapter's claims rest "
             "on, how to lay out the classes, what to discuss in them, and what to do when a machine's readout says it "
             "cannot tell. The keys to the exercises and quizzes are in [KEYS.en.md](KEYS.en.md).",
    "audience": "**Audience**: upper-year undergraduates, graduate students and engineers who know Transformer "
                "self-attention and can use Python and PyTorch. **Format**: one Jupyter notebook per chapter, prose in "
                "English, code in English; every number is computed on the learner's own machine. **Run time**: "
                "{run_time}. **A class without Python**: `python -m kvlab.book --lang en --out book` builds an offline "
                "static site and a PDF handout per chapter (see the README).",
    "not_yet": "**Not yet in English**: {chapters}. This guide covers the chapters that `chapters/en/` holds now; "
               "the Chinese guide (`teacher/GUIDE.md`) covers all of them.",
    "map_head": "## Course map",
    "time_head": "## How long each chapter takes",
    "method_head": "### How these minutes are computed",
    "refs_head": "## All references",
    "map_main": "      (the main line, in order)",
    "map_extra": "  {builds}  ──▶  {number} (extension, optional)",
    "map_table_head": "| Chapter | What it uses from earlier chapters |",
    "map_uses_sep": "; ",
    "map_use": "{chapter}: {what}",
    "map_start": "(the start: only the prerequisites)",
    "time_table_head": "| Chapter | Words (prose + output) | Reading | of which core | Running | Panels | Exercises | "
                       "Quizzes and checkpoints | **Total** |",
    "not_measured": "not measured",
    "count_exercises": "{minutes} ({n})",
    "count_quiz": "{minutes} ({n} questions)",
    "count_panels": "{minutes} ({n})",
    "extension_mark": " (extension)",
    "amount": "{prose:,} + {output:,}",
    "time_total": "The main-line chapters here ({main_span}) take about **{main} minutes** in all (about {core} "
                  "reading only the core sections); the extension {extra_span} needs about {extra} more. All figures "
                  "are minutes.",
    "method_lead": "Each figure is computed by `kvlab.teacher.minutes` from the notebook and one measured run, not "
                   "guessed:",
    "method_reading": "- **Reading** = (the words in the chapter's markdown cells + the words its measured run printed: "
                      "readouts, tables, sentences chosen from the measurements) ÷ **{speed} words per minute**. The "
                      "rate: Brysbaert (*How many words do we read per minute? A review and meta-analysis of reading "
                      "rate*, Journal of Memory and Language 109, 2019) finds that adults read English non-fiction "
                      "silently at about 238 words per minute (fiction 260; aloud 183). A word is a run of letters in "
                      "the prose: numbers, formulas, code blocks and inline code are not counted, so a passage full of "
                      "formulas (3.3's roofline) is undercounted. The Chinese guide counts Chinese characters at 300 a "
                      "minute (IReST, Trauzettel-Klosinski & Dietz 2012, read aloud, scaled by the same review's ratio "
                      "of silent to aloud reading).",
    "method_running": "- **Running** = the time to run all of the chapter's code cells once from top to bottom (the "
                      "sum over the cells of the time from start of execution to reply, without starting the kernel), "
                      "measured with `python -m kvlab.teacher --measure` on the Chinese chapters, whose code cells are "
                      "the same as the English ones: each chapter runs several times, the chapters in turn, and the "
                      "fastest run counts (other programs can only slow a run down, so the fastest is closest to the "
                      "machine's own speed); when the machine is quieter, `python -m kvlab.teacher --measure --append` "
                      "adds more runs to the record.",
    "method_panels": "- **Panels** = {minutes:g} minutes per interactive panel (a code cell that calls `*_panel(`): "
                     "move the controls and watch the figure change.",
    "method_exercises": "- **Exercises** = {code:g} minutes for an exercise that writes a function and {calc:g} for one "
                        "that works out values (told apart by a `def` in the exercise's code cell); this is for most "
                        "learners, and one who gets stuck takes longer.",
    "method_quiz": "- **Quizzes and checkpoints** = {minutes:g} minute per self-check or checkpoint question.",
    "method_core": "- **of which core** = the reading without the sections marked optional below: neither their "
                   "markdown nor what their code cells print counts (a cell's output belongs to the section it is in).",
    "method_output_en": "- **The printed words** of the English chapters have not been measured yet (the recorded runs are "
                        "the Chinese chapters'): each chapter's are estimated from its Chinese run's printed characters, "
                        "at the ratio of that chapter's English prose words to its Chinese prose characters "
                        "(shown per chapter below).",
    "measured_on": "This measurement: {date}, machine {machine}, {runs} runs per chapter. Load before it "
                   "(1/5/15-minute averages) {before}, after it {after}. {busyness}{note}",
    "runs_table_head": "| notebook | each run (s) | load after each run | fastest (s) | printed Chinese characters |",
    "not_measured_yet": "The run times have not been measured yet (there is no `kvlab/teacher/run_times.json`): run "
                        "`python -m kvlab.teacher --measure`.",
    "busy_none": "No load was recorded.",
    "busy_range": "The 1-minute load average recorded after each chapter's runs was between {low:.1f} and {high:.1f} "
                  "(this machine has {cores} cores)",
    "busy_idle": "{said}: the machine was mostly idle while measuring, so these times are close to its own speed.",
    "busy_busy": "{said}: at the busiest there were {per_core:.1f} runnable processes per core on average (other "
                 "engineers' tests ran alongside this measurement), so the runs took longer than on the same machine "
                 "idle; the fastest run of each chapter is taken, and it would be shorter still on an idle machine.",
    "run_unmeasured": "a CPU is enough; the run time has not been measured yet: `python -m kvlab.teacher --measure`",
    "run_under_minute": " in under a minute",
    "run_about_minutes": " in about {n} minutes",
    "run_said": "a CPU is enough; on a {cores}-core CPU each chapter's code cells run at the default settings{bound} "
                "(the slowest chapter measured, {number}, took {fast:.1f} s at its fastest{load})",
    "run_load": ", with a 1-minute load average of {load:.1f} after it",
    "run_busy": "; a busy machine is much slower ({number}'s slowest run took {slow:.1f} s, {times:.0f} times its "
                "fastest; see the section on 'cannot tell' below)",
    "ch_head": "## {number} {title}",
    "ch_notebook": "notebook: `{path}`",
    "ch_optional": "> **Extension, optional.** {why}",
    "ch_time": "**Time**: reading {reading} minutes (core {core}), running {running} minutes, panels {panels}, "
               "exercises {exercises}{quiz}: about **{total} minutes** in all.",
    "ch_time_quiz": ", quizzes and checkpoints {minutes}",
    "ch_output_estimate": "(The {output:,} printed words are estimated from the Chinese run at {ratio:.2f} English "
                          "words per Chinese character, this chapter's ratio in its prose.)",
    "ch_prereq_head": "**Prerequisites**",
    "ch_objectives_head": "**After this chapter, learners can…** (in parentheses, the exercises that practise it)",
    "objective_practised": " ({titles})",
    "objective_sep": "; ",
    "objective_end": ".",
    "objective_more": ";",
    "ch_discussion_head": "**Class discussion** (about {minutes:g} minutes per prompt: each learner first writes down a "
                          "prediction or explanation, then pairs compare, then the class compares with the readouts of "
                          "their own machines)",
    "ch_sections_head": "**Sections** (reading minutes at the rate above; exercises in [KEYS.en.md](KEYS.en.md))",
    "ch_sections_table": "| Section | Words | Reading | Core/optional |",
    "ch_opening_row": "| (opening: title and introduction) | {amount:,} | {minutes} | core |",
    "sub_heading": "&emsp;{heading}",
    "kind_exercises": "exercises",
    "kind_optional_own": "optional: {why}",
    "kind_optional_parent": "optional (part of '{parent}')",
    "kind_core": "core",
    "ch_refs_head": "**References and the claims they support**",
    "ch_further_head": "Further reading (the course points to it but does not rely on its conclusions):",
    "ref_line": "- {citation} — {claim}",
    "plans_head": "## Lesson plan: the main line {first}–{last} in {classes} classes of {length} minutes",
    "plans_lead": "A flipped class: **before** each class, learners run its chapters on their own machines and read the "
                  "core part; **in** class, {opening:g} minutes for questions left from that reading, then the "
                  "interactive panels together (predict first, then look), each chapter's class discussion "
                  "({discussion:g} minutes per prompt), the exercises and the quiz; **after** it, the optional sections "
                  "and the next class's preparation. Every figure is the same chapter's figure in 'How long each "
                  "chapter takes' above (the same rules, no separate guess); chapters stay whole and in order, and of "
                  "all ways to split them the plan takes the one whose fullest class is least full; time left over in a "
                  "class is for learners who got stuck to finish the exercises. The timing experiments run before "
                  "class, each learner on their own, and the class discusses the printed readouts: a shared machine is "
                  "at its busiest when the whole class runs timing experiments at once (see the next section).",
    "plans_extra": "The extension {chapters} (optional): one more class per chapter ({n} in all) after the main line, "
                   "laid out the same way.",
    "list_sep": ", ",
    "plan_before": "run the chapter from the top on your own machine; read the core part and the printed readouts",
    "plan_panels": "interactive panels ({n}): learners predict first, then move the controls together",
    "plan_discussion": "class discussion ({n} prompts; see the chapter's 'Class discussion')",
    "plan_quiz": "quizzes and checkpoints ({n} questions)",
    "plan_optional": "optional reading: {names}",
    "plan_optional_name": "'{heading}'",
    "plan_optional_sep": ", ",
    "plan_opening": "opening: questions left from the reading",
    "plan_moved": "{what} (does not fit in class; left for after it)",
    "plan_item_sep": "; ",
    "plan_row": "  | {chapter}: {what} | {minutes} |",
    "plan_row_bare": "  | {what} | {minutes} |",
    "plan_item": "{chapter}: {what} ({minutes} minutes)",
    "plan_item_bare": "{what} ({minutes} minutes)",
    "plan_class_head": "### Class {number}: {chapters} (about {used} minutes in class, {spare:g} to spare)",
    "plan_chapter_sep": ", ",
    "plan_before_line": "- **Before** (about {minutes} minutes): {items}.",
    "plan_in_class": "- **In class**:",
    "plan_table_head": "  | Activity | Minutes |",
    "plan_total": "  | **Total** | **{minutes}** |",
    "plan_after": "- **After**: {items}",
    "plan_after_items": "{items}.",
    "plan_after_none": "(this class's chapters have no optional sections).",
    "hub_head": "## Teaching a class: JupyterHub",
    "hub_lead": "With tens or hundreds of learners, nobody needs to install Python: run one JupyterHub for the class "
                "and each learner gets their own JupyterLab in the browser.",
    "hub_list": "- **One server, up to about 100 learners**: The Littlest JupyterHub (TLJH).\n"
                "- **More learners, several machines**: Zero to JupyterHub (Kubernetes), which can give each learner a "
                "CPU and memory guarantee and limit; a common start is 0.5–1 core and 2 GiB each.\n"
                "- **Demonstrations only**: mybinder.org (1–2 GiB each; idle servers are reclaimed and learners' changes "
                "are not kept).\n"
                "- **The image**: the repository's `binder/` is a definition repo2docker (the tool BinderHub and Zero "
                "to JupyterHub build images with) understands: CPU torch, every dependency of the course, CJK fonts; "
                "nothing is downloaded at run time.\n"
                "- **The course in every learner's home folder**: an nbgitpuller link. `python -m kvlab.teacher.link "
                "--hub https://your-hub-address` prints it (after checking with `git ls-remote` that the branch "
                "exists); a learner who opens it gets the course pulled into their own folder with 3.1 open, and "
                "clicking it again after the course changes merges the changes in without overwriting the learner's "
                "edits. Add `--lang en` and the link opens the English edition's 3.1 (`chapters/en/`); JupyterLab's "
                "interface language stays the one the image sets.\n"
                "- **Threads**: kvlab sets its thread count from the CPUs the process can really use: CPU affinity, "
                "the cgroup CPU quota, the `CPU_LIMIT` JupyterHub sets and the learner's own "
                "`KVLAB_THREADS`/`OMP_NUM_THREADS`, whichever is smallest; every timed readout says how many threads "
                "it used and why. Without this, every learner on a 16-core node would start 16 threads and the "
                "timings would measure nothing but the contention.",
    "hub_unmeasured": "The kernels' memory has not been measured yet (`run_times.json` has no `peak_rss`): run "
                      "`python -m kvlab.teacher --measure`.",
    "hub_needs_head": "### What one learner needs (measured)",
    "hub_needs_lead": "Each chapter ran from top to bottom at its defaults in a fresh kernel; at the end the kernel read "
                      "its own peak resident memory (VmHWM, which misses no short peak) and CPU time. Measured "
                      "{date} on {machine}.",
    "hub_table_head": "| notebook | kernel peak memory (GiB) | code cells' run (s, fastest) | mean CPU use (cores) |",
    "hub_largest": "The largest is `{chapter}`: **{peak:.2f} GiB**. A 2 GiB pod must also hold the notebook server and "
                   "the pod's own processes, about {allowance:g} GiB, so every chapter's kernel should stay under "
                   "1.5 GiB (a test checks it). A learner with several chapters open has a kernel for each: ask "
                   "learners to shut a chapter's kernel down when they are done with it (Kernel → Shut Down Kernel).",
    "hub_yaml_head": "### Zero to JupyterHub's singleuser settings",
    "hub_yaml_lead": "Computed from the table above: memory guarantee = the largest kernel peak + {allowance:g} GiB, "
                     "rounded up to 0.25 GiB; memory limit = the guarantee plus one more largest kernel (two chapters "
                     "open at once), rounded up to 0.5 GiB, at least 2 GiB; CPU guarantee = the largest mean CPU use "
                     "of a chapter's run, rounded up to 0.25 core; CPU limit 1 core: kvlab then starts a single thread "
                     "(see 'Threads' above), the chapters run a little slower on one core, and every timed readout "
                     "says how many threads it used.",
    "noisy_at": " (load {load:.1f} after it)",
    "noisy_example": " This guide's own measurement is an example: on the same {cores}-core machine, the same chapter "
                     "{number} took {fast:.1f} s at its fastest{at_fast} and {slow:.1f} s at its slowest{at_slow}, "
                     "{times:.1f} times as long.",
    "noisy_measured_item": "{number}'s '{title}'",
    "noisy_measured": " Of the exercises, {items} take their answers from the learner's own measurement (the check cell "
                      "computes the expected value from the same measurement); every other exercise is independent of "
                      "the machine.",
    "noisy_head": "## When a machine prints 'cannot tell' or its readouts jump about",
    "noisy_why": "**Why it happens.** Every timed readout is measured live on the learner's own machine, and machines "
                 "in a class are seldom idle:",
    "noisy_causes": "- **A shared CPU**: on a JupyterHub node, dozens of learners' kernels run at once; on a learner's "
                    "own computer, the browser, the Jupyter server and other programs use the CPU too. Other programs "
                    "can only slow a run down, and by different amounts each time.{example}\n"
                    "- **The thread quota**: kvlab starts as many threads as the process has cores (see 'Threads' "
                    "above); with a quota of 1 core the kernel shares that core with the notebook server and the "
                    "panels' updates, and any step can be interrupted.\n"
                    "- **Colab**: the free runtime has only 2 virtual cores on a physical machine shared with other "
                    "users, and the same cell can take several times as long from one run to the next; on a GPU, a "
                    "small model's time is mostly launch overhead (3.3's optional section on what a GPU shows).",
    "noisy_course": "**How the course handles it.** Every sentence that interprets a readout is chosen from the printed "
                    "numbers: it says the conclusion the numbers support, and when the spread is larger than the "
                    "difference being compared, it says it cannot tell and how to measure again, instead of forcing a "
                    "conclusion. So 'cannot tell' is a correct output, not a bug. The counted quantities (operations, "
                    "bytes, tokens, cache shapes) do not depend on the machine and are the same everywhere.{measured}",
    "noisy_rerun": "**How to measure again.**\n\n"
                   "1. **Close other kernels and programs**: in JupyterLab's left sidebar, under 'Running Terminals and "
                   "Kernels', shut down the other chapters' kernels (or Kernel → Shut Down Kernel), close other "
                   "programs that use the CPU, and run the section again from its start.\n"
                   "2. **Repeat more**: where a panel has a repeats control, raise it and run again; readouts take the "
                   "median, so the more repeats, the less one interrupted run matters.\n"
                   "3. **Set `KVLAB_THREADS`**: run `%env KVLAB_THREADS=1` in the notebook and rerun the timed cells "
                   "(or `export KVLAB_THREADS=1` before starting Jupyter). With one thread, no thread waits for "
                   "another; the readouts say they used KVLAB_THREADS=1. On a multi-core machine of one's own it can "
                   "be larger; kvlab never goes beyond the cores the process may use.\n"
                   "4. **Take turns**: do not have the whole class run the timing experiments at once (the lesson plan "
                   "above puts them before class), or have the teacher run them once on an idle machine and project "
                   "the result for discussion.\n"
                   "5. **Still cannot tell**: accept it. The static edition (`python -m kvlab.book`) holds the "
                   "readouts of one complete run on one machine to compare with.",
    "noisy_tell": "**What to tell learners.**\n\n"
                  "- 'Cannot tell' means this measurement's spread is larger than the difference being compared, so "
                  "this machine cannot give a conclusion right now. That is a measurement result in itself, not "
                  "something you did wrong.\n"
                  "- The course's conclusions do not rest on any one timing: the counted quantities come first, and "
                  "the timing only confirms them on your machine; an idle machine or more repeats usually do.\n"
                  "- A chance for discussion: why do the readouts take the median rather than the mean? Why is the "
                  "fastest run closest to the machine's own speed (this guide takes run times the same way)? How far "
                  "apart are two neighbours' readouts, and where does the difference come from?",
    "keys_title": "# Answer keys (for teachers)",
    "keys_lead": "The answers to the self-check quizzes, checkpoints, in-text tasks and hands-on exercises, all generated "
                 "from kvlab's code: the quizzes from each chapter's `review_questions()`, the checkpoints and tasks "
                 "from `kvlab/lessons/checkpoints.py`, the exercises' reference solutions from "
                 "`kvlab/exercises/solutions.py` and how they are graded from `kvlab/exercises/chNN.py`. The words are "
                 "those the English edition shows.",
    "keys_quiz_head": "## {number} Self-check",
    "keys_checkpoint_head": "## {number} Checkpoint",
    "keys_tasks_head": "## {number} In-text tasks (Try this)",
    "keys_exercises_head": "## {number} Hands-on exercises",
    "hidden_lead": "Please do not hand this file to learners. When a learner can see the answers in the course:",
    "hidden_quiz": "- **Self-check questions** (each chapter's self-check): a 'Show answer' button appears under a "
                   "question only after {reveal} wrong answers to it (and goes away once it is answered right); a "
                   "question whose answer was shown does not score.",
    "hidden_checkpoint": "- **Checkpoints** (predict, then read why): only the first valid answer to each question "
                         "counts (the learner's prediction); once it is graded the explanation appears at once, with "
                         "the answer if it was wrong; nothing is shown before answering.",
    "hidden_exercises": "- **Hands-on exercises**: a folded 'Show reference solution' is added to the check cell only "
                        "after the learner has checked an answer of their own for the first time (edited the code "
                        "cell, so the check no longer says it is not done yet); running the cells unchanged only says "
                        "'not done yet' with a sentence of explanation. The record is per exercise and lives only in "
                        "the current kernel; restarting the kernel starts it over. From the second wrong answer on, "
                        "the learner gets hints one at a time, not the answer.",
    "hidden_teacher": "- **Teachers**: set the environment variable `{env}=1` before starting JupyterLab, or run "
                      "`{call}` in the notebook, and every exercise's check cell shows the reference solution at once "
                      "(`{function}(False)` restores the learners' rules).",
    "hidden_book": "- **The static edition** (`python -m kvlab.book`): its pages and PDF handouts hold no reference "
                   "solutions to the exercises; only the teacher's edition built with `--teacher` does (folded on the "
                   "page, printed under the task in the handout). The quiz and checkpoint answers are folded under each "
                   "question in the static edition (a static page cannot grade), one click away.",
    "hidden_open": "- **Not hidden**: this file and `kvlab/exercises/solutions.py` are in the repository; anyone with "
                   "the repository can read them.",
    "q_made_by": "The questions and answers are generated by `{where}()`; the key of a numeric question is computed by "
                 "kvlab (the expression is shown below).",
    "q_variables": "The variables the numeric questions use (defined in `{function}`)",
    "q_head": "**{i}. ({section})** {prompt}",
    "q_correct": " ✓ **correct**",
    "q_choice": "- {letter}. {text}{mark}",
    "q_explained": "Why: {feedback}",
    "q_wrong_head": "Feedback on a wrong choice:",
    "q_wrong": "- {letter}: {feedback}",
    "q_tolerance": " (relative error up to {tol:g} accepted)",
    "q_exact": " (must be exact)",
    "q_answer": "- Answer: **{answer} {unit}**{tolerance}",
    "q_computed": "- How kvlab computes it: `{expression}` = `{value}`",
    "q_explanation": "- Why: {explanation}",
    "q_hint": "- Hint after a wrong answer: {hint}",
    "checkpoint_lead": "Only the first answer to each checkpoint question counts (the learner's prediction): it is "
                       "graded as soon as it is submitted and the explanation follows, with the answer when it was wrong.",
    "task": "**Try this** (the chapter's in-text task): \"{quote}\"\n\n- Answer: {key}",
    "ex_head": "### {title} (`{key}`)",
    "ex_task": "The task (as the learner sees it)",
    "ex_solution": "Reference solution (`kvlab/exercises/solutions.py`):",
    "ex_values": "The values the reference solution computes:",
    "ex_function": "The reference solution is a function: the check cell tests it against the cases in the grader "
                   "below, one by one.",
    "ex_check": "Check cell: `{check}`",
    "ex_hints": "Hints (one more after each wrong answer, from the second):",
    "ex_grader": "Grader `{function}` (how the expected values are computed)",
    "measured.ch03.batch_ridge": "The answer depends on the two roofs the learner's page measured (ridge point = "
                                 "compute ÷ bandwidth): the check cell computes the expected batch from the same "
                                 "measurement.",
    "measured.ch03.ttft_tpot": "The answer depends on the timings of the learner's own generation: the check cell "
                               "computes the expected values from the same trace and checks that the learner read that "
                               "same run.",
}


GUIDE = Phrasebook("teacher.guide", {"zh": _ZH, "en": _EN})
