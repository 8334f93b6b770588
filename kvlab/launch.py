"""Open the course in JupyterLab: ``python -m kvlab.launch [--lang zh|en | --zh] [more jupyter lab options]``.

JupyterLab and the chapters' kernel both run in the launcher's own environment: the server is
``sys.executable -m jupyterlab`` (not the first ``jupyter-lab`` on PATH, which may belong to another
installation) and the "python3" kernel the notebooks ask for is ``sys.executable`` too, whatever
kernel specs the learner has elsewhere. Opens the first chapter with JupyterLab's defaults (bound to
127.0.0.1, a login token in the printed address) and adds ``--allow-root`` only when running as root
(containers, many cloud machines), where a plain ``jupyter lab`` stops with "Running as root is not
recommended".

The course's JupyterLab settings (no "official Jupyter news?" question, no news or update checks:
nothing is fetched at run time; with ``--zh`` or ``--lang zh`` the Chinese interface of the zh-CN language pack, with
``--lang en`` the English interface and the English edition's first chapter, ``chapters/en/``) are
default values layered over the installation's own, in a temporary settings folder removed when the
server stops: nothing is written into the learner's Jupyter configuration, and a setting the learner
chose in JupyterLab's Settings editor still wins.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from importlib.metadata import entry_points
from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parent.parent
FIRST_CHAPTER = "chapters/01_autoregressive_decode.ipynb"
FIRST_CHAPTERS = {"zh": FIRST_CHAPTER, "en": "chapters/en/01_autoregressive_decode.ipynb"}  # by --lang
ZH_FLAG = "--zh"
LANG_FLAG = "--lang"
LOCALES = {"zh": "zh_CN", "en": "en"}  # JupyterLab's interface language for each course language
ZH_LOCALE = "zh_CN"
ZH_PACK = "jupyterlab-language-pack-zh-CN"
NEWS_PLUGIN = "@jupyterlab/apputils-extension:notification"
LANGUAGE_PLUGIN = "@jupyterlab/translation-extension:plugin"
USAGE = f"""usage: python -m kvlab.launch [{LANG_FLAG} zh|en | {ZH_FLAG}] [jupyter lab options ...]

Opens the course's first chapter in JupyterLab, run by this Python ({sys.executable}).

  {LANG_FLAG} en  the English edition (chapters/en/) with JupyterLab's menus in English
  {LANG_FLAG} zh  the Chinese chapters with JupyterLab's menus and dialogs in Simplified Chinese (needs {ZH_PACK},
             part of requirements.txt); {ZH_FLAG} is the same

Every other option goes to JupyterLab unchanged (see `python -m jupyterlab --help`), e.g. --no-browser,
--ServerApp.port=8890."""


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def course_settings(zh: bool = False, lang: str | None = None) -> dict:
    """JupyterLab setting defaults for the course, by plugin id (``lang``: the interface language; ``zh``: "zh")."""
    settings = {NEWS_PLUGIN: {"fetchNews": "false", "checkForUpdates": False}}
    lang = "zh" if zh else lang
    if lang:
        settings[LANGUAGE_PLUGIN] = {"locale": LOCALES[lang]}
    return settings


def course_language(argv: list[str]) -> tuple[str | None, list[str]]:
    """(the language --lang or --zh asks for, or None; the other arguments); ValueError on a bad or missing code."""
    from .language import LANGUAGES, check_language

    lang, rest, args = None, [], list(argv)
    while args:
        arg = args.pop(0)
        if arg == ZH_FLAG:
            lang = "zh"
        elif arg == LANG_FLAG or arg.startswith(LANG_FLAG + "="):
            code = arg.split("=", 1)[1] if "=" in arg else (args.pop(0) if args else None)
            if code is None:
                raise ValueError(f"{LANG_FLAG} needs a language: {' or '.join(LANGUAGES)}")
            try:
                lang = check_language(code)
            except ValueError:
                raise ValueError(f"{LANG_FLAG}: no edition {code!r}; the course has {', '.join(LANGUAGES)}") from None
        else:
            rest.append(arg)
    return lang, rest


def language_pack_installed(locale: str) -> bool:
    """True when a JupyterLab language pack for ``locale`` ("zh_CN") is installed in this environment."""
    return any(ep.name == locale for ep in entry_points(group="jupyterlab.languagepack"))


def kernel_spec() -> dict:
    """The "python3" kernel the chapters name, run by this interpreter."""
    return {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (ipykernel)", "language": "python", "metadata": {"debugger": True}}


def installation_settings_dir() -> Path:
    """The settings folder of this JupyterLab installation (its overrides and page config live there)."""
    from jupyterlab.commands import get_app_dir

    return Path(get_app_dir()) / "settings"


def prepare_session(folder: Path, zh: bool = False, lang: str | None = None) -> tuple[dict, Path]:
    """Write the kernel spec and the settings into ``folder``. Returns (environment changes, settings folder).

    The kernel spec goes first on JUPYTER_PATH, so it is the "python3" the server finds. The settings folder is a
    copy of the installation's, plus the course's defaults in ``overrides.d/`` (applied before the installation's
    own ``overrides.json``, so an administrator's choice is kept)."""
    spec_dir = folder / "jupyter" / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(json.dumps(kernel_spec(), indent=1), encoding="utf-8")
    settings = folder / "lab" / "settings"
    installed = installation_settings_dir()
    if installed.is_dir():
        shutil.copytree(installed, settings)
    (settings / "overrides.d").mkdir(parents=True, exist_ok=True)
    (settings / "overrides.d" / "kvlab-course.json").write_text(
        json.dumps(course_settings(zh, lang), indent=1), encoding="utf-8")
    jupyter_path = os.pathsep.join(p for p in (str(folder / "jupyter"), os.environ.get("JUPYTER_PATH", "")) if p)
    return {"JUPYTER_PATH": jupyter_path}, settings


def lab_command(extra=(), root: bool | None = None, course_root: Path = COURSE_ROOT,
                app_settings_dir: Path | None = None, lang: str | None = None) -> list[str]:
    """The command line of this interpreter's JupyterLab, opening the first chapter (of ``lang``'s edition)."""
    root = running_as_root() if root is None else root
    options = {"--ServerApp.root_dir": course_root, "--ServerApp.ip": "127.0.0.1", "--LabApp.news_url": "None",
               "--LabApp.check_for_updates_class": "jupyterlab.NeverCheckForUpdate"}
    if app_settings_dir is not None:
        options["--LabApp.app_settings_dir"] = app_settings_dir
    given = {arg.split("=", 1)[0] for arg in extra}  # an option given twice is an error for some (root_dir)
    cmd = [sys.executable, "-m", "jupyterlab"]
    if "--ServerApp.root_dir" not in given:  # the chapter must lie under the folder served
        cmd.append(FIRST_CHAPTERS[lang or "zh"])
    cmd += [f"{name}={value}" for name, value in options.items() if name not in given]
    if root and "--allow-root" not in extra:
        cmd.append("--allow-root")
    return cmd + list(extra)


def problem(argv: list[str]) -> str | None:
    """Why the course cannot be opened with these options from this interpreter (None: it can)."""
    try:
        lang, _ = course_language(argv)
    except ValueError as e:
        return str(e)
    if not (COURSE_ROOT / FIRST_CHAPTERS[lang or "zh"]).exists():
        return (f"the chapters are not next to this kvlab ({COURSE_ROOT}); run it from a clone of the course "
                "repository (pip install -e .), or open the notebooks with `jupyter lab` yourself.")
    missing = [name for name in ("jupyterlab", "ipykernel") if importlib.util.find_spec(name) is None]
    if missing:
        return (f"{' and '.join(missing)} not installed for this Python ({sys.executable}); install the course "
                "with `python -m pip install -r requirements.txt -e .` using this same python.")
    if lang == "zh" and not language_pack_installed(ZH_LOCALE):
        return (f"{ZH_FLAG}: the Chinese interface needs the language pack; install it with "
                f"`{sys.executable} -m pip install {ZH_PACK}` (中文界面需要先安装语言包).")
    return None


def serve(cmd: list[str], env: dict) -> int:
    """Run the server until it stops. Ctrl-C and SIGTERM reach it (it shuts its kernels down), never a traceback."""
    proc = subprocess.Popen(cmd, cwd=COURSE_ROOT, env=env)
    previous = signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:  # the server got the same Ctrl-C: it asks, or stops; wait for it
                continue
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "-h" in argv or "--help" in argv:
        print(USAGE)
        return 0
    why = problem(argv)
    if why:
        print(f"kvlab.launch: {why}", file=sys.stderr)
        return 2
    lang, extra = course_language(argv)
    with tempfile.TemporaryDirectory(prefix="kvlab-launch-") as tmp:
        env_changes, settings = prepare_session(Path(tmp), lang=lang)
        if lang:
            env_changes["KVLAB_LANG"] = lang  # kvlab's language in every kernel (a chapter's own line still wins)
        return serve(lab_command(extra, app_settings_dir=settings, lang=lang), dict(os.environ, **env_changes))


if __name__ == "__main__":
    raise SystemExit(main())
