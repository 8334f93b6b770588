"""GLOSSARY.md, enforced: the notebooks' prose and every Chinese string the lessons and plots show avoid the
forms the glossary forbids (token without spaces, mixed brackets, half-width punctuation in Chinese
sentences, the retired names of things)."""
import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
SHOWN_TEXT_MODULES = sorted([*(ROOT / "kvlab" / "lessons").rglob("*.py"), *(ROOT / "kvlab" / "viz").glob("*.py"),
                             ROOT / "kvlab" / "inputs.py", *(ROOT / "kvlab" / "exercises").glob("*.py"),
                             *(ROOT / "kvlab" / "teacher").glob("*.py")])  # the teacher's guide and keys

CJK = "\u4e00-\u9fff"
ORIGINAL_CODE_MARKER = "# 原文代码"  # a code cell that runs the original chapter's code unchanged
FORBIDDEN = [
    (re.compile(f"[{CJK}]token|token[{CJK}]"), "「token」 needs a space on each side next to Chinese: 「1 个 token」"),
    (re.compile("动态扩容|扩容"), "the concatenating cache is 「逐步拼接」"),
    (re.compile("KV ?缓存|KV头|kv 头|kv头"), "write 「KV Cache」 and 「KV 头」"),
    (re.compile(f"[{CJK}] ?\\("), "a half-width bracket right after Chinese: use 「（…）」"),
    (re.compile("）\\s*\\("), "mixed brackets 「（…） (…)」"),
    (re.compile(f"[{CJK}][:,;]|[:,;][{CJK}]"), "half-width colon, comma or semicolon in a Chinese sentence"),
    (re.compile("[“”]"), "quotation marks are 「…」 (and 『…』 inside them)"),
    (re.compile("脊点|受带宽限制|受算力限制|带宽受限|计算受限"), "write 转折点, 访存受限, 算力受限 (one form each)"),
    (re.compile("核函数"), "a GPU kernel is 「GPU 内核」 (and the notebook's kernel 「Jupyter 内核」)"),
]


def prose_of_markdown(text: str) -> str:
    """Markdown without what the rules do not cover: code, maths, links' targets, HTML comments."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " ", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    return re.sub(r"\]\([^)]*\)", "]", text)


def chinese_strings(path: Path) -> list[tuple[int, str]]:
    """String literals (and the literal parts of f-strings) holding Chinese, except docstrings."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                and re.search(f"[{CJK}]", node.value):
            out.append((node.lineno, node.value))
    return out


QUOTED_ORIGINAL = re.compile("原文[^「」。\\n]{0,12}「[^」]*」")  # the original text quoted verbatim keeps its own form


def violations(text: str) -> list[str]:
    text = QUOTED_ORIGINAL.sub("原文「…」", text)
    return [f"{why}: …{text[max(0, m.start() - 12):m.end() + 12]!r}…"
            for pattern, why in FORBIDDEN for m in pattern.finditer(text)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_prose_follows_the_glossary(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            found += [f"cell {i}: {v}" for v in violations(prose_of_markdown("".join(cell["source"])))]
        else:  # the Chinese a code cell prints (the original text's own code runs as written)
            src = "".join(cell["source"])
            if src.startswith(ORIGINAL_CODE_MARKER):
                continue
            try:
                strings = [n.value for n in ast.walk(ast.parse(src))
                           if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            except SyntaxError:
                continue
            found += [f"cell {i}: {v}" for s in strings if re.search(f"[{CJK}]", s) for v in violations(s)]
    assert not found, f"{path.name}:\n" + "\n".join(found)


@pytest.mark.parametrize("path", SHOWN_TEXT_MODULES, ids=lambda p: p.name)
def test_labels_and_messages_follow_the_glossary(path):
    found = [f"line {line}: {v}" for line, s in chinese_strings(path) for v in violations(s)]
    assert not found, f"{path.relative_to(ROOT)}:\n" + "\n".join(found)


def glossary_cache_modes(text: str) -> dict[str, str]:
    """The 缓存模式 table of GLOSSARY.md: {mode: its name in legends}."""
    section = text.split("## 缓存模式", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", section, flags=re.M))


def test_every_cache_mode_has_its_one_name_in_the_glossary():
    from kvlab.cache_modes import MODES

    table = glossary_cache_modes((ROOT / "GLOSSARY.md").read_text(encoding="utf-8"))
    assert table == {name: m.label for name, m in MODES.items()}
    assert all(not violations(m.label) for m in MODES.values())


def test_the_rules_catch_what_they_should():
    for bad in ["生成token数", "1个token", "动态扩容", "KV头", "缓存 (kv)", "（…） (tokens)", "说明:这里", "甲,乙",
                "“引号”", "脊点", "受带宽限制"]:
        assert violations(bad), bad
    for good in ["生成 token 数", "1 个 token", "逐步拼接（dynamic）", "KV 头", "有缓存（kv）", "12, 40, 7",
                 "(L, B, H, S, D)", "形状：（2, 4）", "原文说「只需计算新token的Q」"]:
        assert not violations(good), good
