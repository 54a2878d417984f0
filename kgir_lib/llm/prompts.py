"""Versioned prompt files (``kgir_lib/prompts/<name>.txt``) and the chat requests built from them.

File format: ``# key: value`` header lines (``version`` required, ``source`` says
which paper figure or prompt it follows), then the chat turns in order, each
under its role: ``[system]`` (at most one, first), ``[user]`` and ``[assistant]``.
Worked examples sent as earlier chat turns are written out as ``[user]`` /
``[assistant]`` pairs (as HippoRAG 2's prompt templates write few-shot turns as
role/content messages); the last turn is the ``[user]`` turn that holds the
placeholders. Placeholders are ``{name}``; literal braces are doubled. Each turn's
text is stripped of surrounding blank lines.

:func:`chat` builds the request: every turn formatted with the values (an empty
system turn is left out) and tagged with the prompt's name
(:attr:`kgir_lib.llm.ChatRequest.prompt`, not part of the cache key). The version
is in the file, so editing a prompt changes the trace-resume fingerprint
(:mod:`kgir_lib.eval.evaluate`); the LLM cache is keyed by the rendered messages, so a
change that renders the same messages keeps its cache entries.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .core import ChatRequest

PROMPT_DIR = Path(__file__).resolve().parent.parent / "prompts"  # kgir_lib/prompts/*.txt
_SECTION = re.compile(r"^\[(system|user|assistant)\]\s*$")
_HEADER = re.compile(r"^#\s*(\w+):\s*(.*)$")


class PromptError(ValueError):
    """A prompt file is malformed; the message names the file."""


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    source: str
    turns: tuple  # ((role, template), ...) in order

    @property
    def system(self) -> str:
        """The system turn's template ('' when there is none)."""
        return self.turns[0][1] if self.turns and self.turns[0][0] == "system" else ""

    @property
    def examples(self) -> tuple:
        """The worked-example turns: every turn after the system turn and before the final user turn."""
        start = 1 if self.turns[0][0] == "system" else 0
        return self.turns[start:-1]

    @property
    def user(self) -> str:
        """The final user turn's template (the one with the placeholders)."""
        return self.turns[-1][1]

    def messages(self, values: dict, rstrip: bool = False) -> tuple:
        """``((role, text), ...)``: every turn formatted with ``values``; an empty system turn is left out.

        ``rstrip``: right-strip the final user turn after formatting (for templates whose optional
        parts, e.g. a rewrite history or a last-round note, may leave a trailing newline).
        """
        out = []
        for role, template in self.turns:
            try:
                text = template.format(**values)
            except KeyError as exc:
                raise KeyError(f"prompt {self.name!r} needs a value for {exc.args[0]!r}") from None
            if role == "system" and not text:
                continue
            out.append((role, text))
        if rstrip:
            out[-1] = (out[-1][0], out[-1][1].rstrip())
        return tuple(out)

    def render(self, **values: str) -> tuple:
        """``(system, user)`` of a prompt without example turns, placeholders filled."""
        if self.examples:
            raise PromptError(f"prompt {self.name!r} has example turns; use kgir_lib.llm.prompts.chat")
        msgs = dict(self.messages(values))
        return msgs.get("system", ""), msgs["user"]


def parse_prompt(name: str, text: str, where: str = "") -> Prompt:
    """A :class:`Prompt` from the text of a prompt file (format in the module docstring)."""
    where = where or name
    header: dict = {}
    turns: list = []
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m:
            turns.append([m.group(1), []])
        elif not turns:
            h = _HEADER.match(line)
            if h:
                header[h.group(1)] = h.group(2).strip()
        else:
            turns[-1][1].append(line)
    if "version" not in header:
        raise PromptError(f"prompt file {where} has no '# version:' header")
    turns = [(role, "\n".join(lines).strip()) for role, lines in turns]
    roles = [r for r, _ in turns]
    if not roles or roles[-1] != "user":
        raise PromptError(f"prompt file {where}: the last turn must be [user] (the one with the placeholders)")
    if "system" in roles[1:]:
        raise PromptError(f"prompt file {where}: [system] may only be the first turn")
    body = roles[1:] if roles[0] == "system" else roles
    if any(a == b for a, b in zip(body, body[1:])):
        raise PromptError(f"prompt file {where}: [user] and [assistant] turns must alternate ({' '.join(roles)})")
    return Prompt(name, header["version"], header.get("source", ""), tuple(turns))


@lru_cache(maxsize=None)
def load_prompt(name: str) -> Prompt:
    path = PROMPT_DIR / f"{name}.txt"
    if not path.exists():
        raise FileNotFoundError(f"no prompt file {path}")
    return parse_prompt(name, path.read_text(encoding="utf-8"), str(path))


def chat(name: str, values: dict, rstrip: bool = False, **request_kw) -> ChatRequest:
    """The chat request of prompt ``name`` with ``values`` (:meth:`Prompt.messages`), tagged with its name."""
    return ChatRequest(messages=load_prompt(name).messages(values, rstrip=rstrip), prompt=name, **request_kw)
