"""What the exercises' shared machinery says, in both languages: the checker's feedback, the solution gate and the
teacher switch (:mod:`kvlab.exercises.checker`), and the intro of the notebooks' 动手练习 (Exercises) section
(:mod:`kvlab.exercises.notebook`).

Each text is looked up when it is shown, in the language :func:`kvlab.set_language` names then (the notebook's section
is written in the language its generator is asked for). An exercise's own title, task, hints and the verdicts of its
grader are its chapter module's (``chNN.py``)."""
from __future__ import annotations

from ..phrases import Phrasebook

CHECKER = Phrasebook("exercises.checker", {
    "zh": {
        "not_done": "还没有完成",
        "todo": "{not_done}：{message}",
        "todo_bare": "{not_done}。",
        "case": "（{case}）",
        "exited": "你的代码调用了 exit() 或 sys.exit(){where}（SystemExit {code}）：函数要用 return 返回结果，不能退出",
        "raised": "你的代码出错了{where}：{line}",
        "calls_reference": "你的函数调用了参考实现 {name}：检查程序正是拿它来对照的，这样比较没有意义。请用自己的代码写出来。",
        "solution_locked": "参考答案会在你第一次检查自己写的答案之后出现：先改上面的代码格，再运行这一格。",
        "teacher_on": "每个练习的检查结果都附上参考答案",
        "teacher_off": "参考答案在第一次检查了自己的答案之后出现",
        "teacher_switch": "kvlab：从现在起，这个 kernel 里{state}（重新运行检查格生效）。",
        "text_heading": "{title}：{message}",
        "html_heading": "<b>{icon} {title}</b>　{message}",
        "hint": "提示：{hint}",
        "show_solution": "显示参考答案",
        "checker_bug": "检查程序本身出错了（这是 kvlab 的 bug，请报告）：{line}",
        "not_callable": "需要一个函数，收到的是 {type}：请把上一格里定义的函数 {name} 传进来",
        # sizes
        "bytes_too_long": "答案太长了（{n:,} 个字符）：请写一个数加单位，例如 \"1.5 GiB\"",
        "bytes_unreadable": "读不懂{text}：请写一个数加单位，例如 \"1.5 GiB\"，或者直接写字节数（整数）",
        "unknown_unit": "不认识单位{unit}：请用 B、KiB、MiB、GiB（或 KB、MB、GB）",
        "bytes": "{n} 字节",
        "the_answer": "答案",
        "your_bytes": "你的{what}：{quantity} = {exact}",
        "bytes_right": "正确！{exact} = {short}。",
        "bytes_no_unit_number": "你写的是 {value} 字节：不带单位的数按字节算。要用 GiB 之类的单位，请写成字符串，"
                                "例如 \"{value} GiB\"。",
        "bytes_no_unit_text": "你写的{answer}没有单位，按字节算就是 {value} 字节。请加上单位，例如 \"{value} MiB\"。",
        "bytes_decimal_unit": "数值对了，单位错了：1 {unit} = {decimal:,} 字节（10 的幂），而这个数是按 "
                              "1 {binary} = {binary_bytes:,} 字节（1024 的幂）算出来的。请把单位写成 {binary}。",
        "bytes_rounded": "大约对，但题目要精确值：{unit} 是 10 的幂（1 GB = 10⁹ 字节），换算时四舍五入了。"
                         "请写出字节数，或者用 GiB、MiB（1024 的幂）写出精确值。",
        "bytes_close": "很接近，但不精确：缓存的字节数是整数，请写出精确值（字节数，或者能整除的 GiB、MiB）。",
        "bytes_wrong": "不对。{got}。",
        # counts
        "count_fraction": "{what}应当是整数，你写的是 {value:g}：放不下半个，记得向下取整。",
        "count_right": "正确！{n:,}。",
        "your_count": "你的{what}：{n:,}",
        "count_wrong": "不对：你的{what}是 {n:,}。",
        # choices
        "option": "选项",
        "choice_not_text": "{what}要写成字符串，例如 \"{key}\"，收到的是 {got}",
        "choice_unknown": "没有{answer}这个{what}：请从 {listed} 中选一个",
        "list_sep": "、",
    },
    "en": {
        "not_done": "Not done yet",
        "todo": "{not_done}: {message}",
        "todo_bare": "{not_done}.",
        "case": " ({case})",
        "exited": "Your code called exit() or sys.exit(){where} (SystemExit {code}): a function hands back its result "
                  "with return, it must not exit",
        "raised": "Your code raised an error{where}: {line}",
        "calls_reference": "Your function calls the reference implementation {name}: the checker compares your answer "
                           "with that very function, so the comparison would mean nothing. Write it in your own code.",
        "solution_locked": "The reference solution appears once you have checked an answer of your own: edit the code "
                           "cell above, then run this cell.",
        "teacher_on": "every exercise's feedback includes its reference solution",
        "teacher_off": "a reference solution appears once an answer of your own has been checked",
        "teacher_switch": "kvlab: from now on in this kernel, {state} (run a check cell again to see it).",
        "text_heading": "{title}: {message}",
        "html_heading": "<b>{icon} {title}</b> {message}",
        "hint": "Hint: {hint}",
        "show_solution": "Show the reference solution",
        "checker_bug": "The checker itself failed (a bug in kvlab, please report it): {line}",
        "not_callable": "Expected a function, got {type}: pass in the function {name} you defined in the cell above",
        "bytes_too_long": "The answer is too long ({n:,} characters): write a number and a unit, e.g. \"1.5 GiB\"",
        "bytes_unreadable": "Cannot read {text}: write a number and a unit, e.g. \"1.5 GiB\", or the number of bytes "
                            "(a whole number)",
        "unknown_unit": "Unknown unit {unit}: use B, KiB, MiB, GiB (or KB, MB, GB)",
        "bytes": "{n} bytes",
        "the_answer": "answer",
        "your_bytes": "Your {what}: {quantity} = {exact}",
        "bytes_right": "Right! {exact} = {short}.",
        "bytes_no_unit_number": "You wrote {value} bytes: a number without a unit counts as bytes. To use a unit such "
                                "as GiB, write a string, e.g. \"{value} GiB\".",
        "bytes_no_unit_text": "Your {answer} has no unit, so it counts as {value} bytes. Add a unit, "
                              "e.g. \"{value} MiB\".",
        "bytes_decimal_unit": "Right number, wrong unit: 1 {unit} = {decimal:,} bytes (a power of 10), but this number "
                              "was worked out with 1 {binary} = {binary_bytes:,} bytes (a power of 1024). Write the "
                              "unit as {binary}.",
        "bytes_rounded": "About right, but the task asks for the exact value: {unit} is a power of 10 "
                         "(1 GB = 10⁹ bytes), and converting to it rounded the number. Write the number of bytes, or "
                         "the exact value in GiB or MiB (powers of 1024).",
        "bytes_close": "Very close, but not exact: a cache holds a whole number of bytes. Write the exact value (in "
                       "bytes, or in GiB or MiB that divide it exactly).",
        "bytes_wrong": "Not quite. {got}.",
        "count_fraction": "The {what} must be a whole number, and you wrote {value:g}: half of one does not fit, so "
                          "round down.",
        "count_right": "Right! {n:,}.",
        "your_count": "Your {what}: {n:,}",
        "count_wrong": "Not quite: your {what} is {n:,}.",
        "option": "option",
        "choice_not_text": "Write the {what} as a string, e.g. \"{key}\"; got {got}",
        "choice_unknown": "There is no {what} {answer}: pick one of {listed}",
        "list_sep": ", ",
    },
})

NOTEBOOK = Phrasebook("exercises.notebook", {
    "zh": {
        "intro": "## 动手练习\n\n每个练习分三格：说明；一格代码，把你的答案写在里面；一格检查。写好之后依次运行这两格，检查格会马上告诉你"
                 "结果：哪个用例没通过、期望什么、得到了什么；同一个练习第二次没通过时，还会给出提示。代码格保持原样时，检查格只会显示"
                 "「{not_done}」；第一次检查了你自己写的答案之后（对错都算），检查结果里才会多出「{show_solution}」，实在想不出来再点开。"
                 "\n\n先运行下面这一格，载入这一节的练习：",
    },
    "en": {
        "intro": "## Exercises\n\nEach exercise comes in three cells: the task; a code cell where you write your answer; "
                 "and a check cell. Once you have written your answer, run the two code cells in order, and the check "
                 "tells you at once how it went: which case failed, what was expected and what came out. If the same "
                 "exercise fails a second time, you also get a hint. While the code cell is left as it was, the check "
                 "only says \"{not_done}\". Once you have checked an answer of your own (right or wrong), the feedback "
                 "also offers \"{show_solution}\": open it only if you are really stuck.\n\nFirst run the cell below to "
                 "load this section's exercises:",
    },
})
