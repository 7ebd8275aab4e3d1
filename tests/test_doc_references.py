"""Every file the docs and the code's comments point to is in the repository: the README's
and docs' links, and every path that starts at one of the repository's top folders
(`docs/gold.md`, `pipelines/lake/positions.py`, ...) wherever a tracked text file names it.
A renamed or moved file leaves no reference behind."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT = (".py", ".md", ".sh", ".toml", ".yaml", ".rs", ".cfg")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
PATH = re.compile(r"(?<![\w./-])((?:[\w-]+/)+[\w.-]+\.(?:py|md|sh|toml|yaml|yml|rs|json|xml|properties))\b")


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / f for f in out.split() if f.endswith(TEXT)]


def _missing() -> list[tuple[str, str]]:
    files = _tracked()
    tops = {p.relative_to(ROOT).parts[0] for p in files if len(p.relative_to(ROOT).parts) > 1}
    missing = []
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        refs = [m.group(1) for m in LINK.finditer(text) if f.suffix == ".md" and "://" not in m.group(1)
                and not m.group(1).startswith("mailto:") and "=" not in m.group(1)]
        refs += [m.group(1) for m in PATH.finditer(text) if m.group(1).split("/")[0] in tops]
        for ref in refs:
            if not ((ROOT / ref).exists() or (f.parent / ref).exists()):
                missing.append((str(f.relative_to(ROOT)), ref))
    return missing


def test_every_referenced_file_is_in_the_repository():
    assert _tracked(), "no tracked file found: not a git checkout?"
    assert _missing() == []
