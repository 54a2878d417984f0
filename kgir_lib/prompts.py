"""Versioned prompt files (``kgir_lib/prompts/<name>.txt``).

File format: ``# key: value`` header lines (``version`` required, ``source`` says
which paper figure or prompt it follows), then a ``[system]`` section and a
``[user]`` section. Placeholders are ``{name}``; literal braces are doubled.
The version is part of every request's text, so editing a prompt invalidates
exactly its cache entries.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PROMPT_DIR = Path(__file__).parent / "prompts"


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    source: str
    system: str
    user: str

    def render(self, **values: str) -> tuple:
        """``(system, user)`` with the placeholders filled."""
        try:
            return self.system.format(**values), self.user.format(**values)
        except KeyError as exc:
            raise KeyError(f"prompt {self.name!r} needs a value for {exc.args[0]!r}") from None


@lru_cache(maxsize=None)
def load_prompt(name: str) -> Prompt:
    path = PROMPT_DIR / f"{name}.txt"
    if not path.exists():
        raise FileNotFoundError(f"no prompt file {path}")
    header, sections, current = {}, {"system": [], "user": []}, None
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\[(system|user)\]\s*$", line)
        if m:
            current = m.group(1)
        elif current is None:
            h = re.match(r"^#\s*(\w+):\s*(.*)$", line)
            if h:
                header[h.group(1)] = h.group(2).strip()
        else:
            sections[current].append(line)
    if "version" not in header:
        raise ValueError(f"prompt file {path} has no '# version:' header")
    return Prompt(name, header["version"], header.get("source", ""),
                  "\n".join(sections["system"]).strip(), "\n".join(sections["user"]).strip())
