"""A notebook's checks, named in Chinese: each claim the page makes is a (说明, condition) pair; ``confirm``
prints one ✓ line per claim that holds and fails with an AssertionError naming the first that does not.
The conditions stay real asserts (nbval fails the notebook when one is false); the learner reads what was checked."""
from __future__ import annotations


def confirm(*checks: tuple[str, bool], title: str = "本格检查了") -> None:
    """Print ``title`` and a ✓ line per check; raise AssertionError at the first false one (after printing
    the ones before it, so the page shows how far it got). Returns nothing, so a cell ending with it shows no value."""
    if not checks:
        raise ValueError("checks: needs at least one (说明, condition) pair")
    lines = [f"{title}："]
    for i, check in enumerate(checks):
        if not (isinstance(check, tuple) and len(check) == 2 and isinstance(check[0], str)):
            raise ValueError(f"checks: item {i} must be a (说明, condition) pair, got {check!r}")
        what, holds = check
        if not bool(holds):
            print("\n".join(lines))
            raise AssertionError(f"没有通过：{what}")
        lines.append(f"  ✓ {what}")
    print("\n".join(lines))
