"""Prompt templates: versioned text files in ``prompts/`` (plan, claims, entailment, entailment_group).

File format (readable by an auditor)::

    # comment lines
    version: plan-v1
    === system ===
    ...
    === user ===
    ... {{query}} ...

``{{name}}`` slots are filled by :meth:`PromptTemplate.render`; every value is
passed through :func:`neutralize` first, so paper text cannot close the
``<paper>``/``<query>``/``<claims_*>``/``<cited>`` delimiters it is placed in. The
template's ``tag`` (version + 8 hex digits of the file's sha256) is part of
every component identity and therefore of every cache key.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from crase_core.errors import InputError
from crase_core.resources import prompts_dir
from crase_core.settings import environment

PROMPT_NAMES = ("plan", "claims", "entailment", "entailment_group")
_SLOT = re.compile(r"\{\{([a-z_]+)\}\}")
_TAGLIKE = re.compile(r"<\s*(/?)\s*(paper|query|claims_a|claims_b|cited|system|user|assistant)\b", re.IGNORECASE)
_SECTION = re.compile(r"^=== (system|user) ===\s*$", re.MULTILINE)


def default_prompts_dir() -> Path:
    """``$CRASE_PROMPTS_DIR``, else the shipped prompts (:func:`crase_core.resources.prompts_dir`)."""
    return environment.prompts_folder(prompts_dir())


def neutralize(text: str) -> str:
    """Make delimiter-like tags in data inert (``</paper>`` → ``‹/paper>``); everything else unchanged."""
    return _TAGLIKE.sub(lambda m: "‹" + m.group(1) + m.group(2), text)


@dataclass(frozen=True)
class PromptTemplate:
    """One prompt file: name, declared version, content hash, system and user templates."""

    name: str
    version: str
    sha: str
    system: str
    user: str

    @property
    def tag(self) -> str:
        return f"{self.version}+{self.sha[:8]}"

    def slots(self) -> set[str]:
        return set(_SLOT.findall(self.system)) | set(_SLOT.findall(self.user))

    def render(self, *, trusted: frozenset[str] = frozenset(), **values: object) -> list[dict[str, str]]:
        """Chat messages with every slot filled (values neutralised); KeyError names a missing slot.

        ``trusted``: slots whose value carries the prompt's own delimiters and whose data the caller
        has neutralised piece by piece (the grouped prompt's ``<cited>`` blocks).
        """
        missing = self.slots() - set(values)
        if missing:
            raise KeyError(f"prompt {self.name}: no value for {', '.join(sorted(missing))}")

        def value(name: str) -> str:
            return str(values[name]) if name in trusted else neutralize(str(values[name]))

        def fill(template: str) -> str:
            return _SLOT.sub(lambda m: value(m.group(1)), template)

        return [{"role": "system", "content": fill(self.system)}, {"role": "user", "content": fill(self.user)}]


def parse_prompt(name: str, text: str) -> PromptTemplate:
    """Parse a prompt file's text; :class:`InputError` when the format is broken."""
    head, *_ = _SECTION.split(text, maxsplit=1)
    version = None
    for line in head.splitlines():
        m = re.match(r"^version:\s*(\S+)\s*$", line)
        if m:
            version = m.group(1)
    parts = _SECTION.split(text)
    sections = {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts) - 1, 2)}
    if not version or "system" not in sections or "user" not in sections:
        raise InputError(f"prompt file {name!r} needs a 'version:' line and '=== system ===' / '=== user ===' sections")
    sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return PromptTemplate(name, version, sha, sections["system"].strip(), sections["user"].strip())


def load_prompt(name: str, directory: str | os.PathLike[str] | None = None) -> PromptTemplate:
    """Load ``<directory>/<name>.txt`` (default directory: :func:`default_prompts_dir`)."""
    if name not in PROMPT_NAMES:
        raise InputError(f"unknown prompt {name!r}; expected one of {', '.join(PROMPT_NAMES)}")
    path = Path(directory) if directory else default_prompts_dir()
    path = path / f"{name}.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        raise InputError(f"prompt file {path} is missing: set CRASE_PROMPTS_DIR or the prompts_dir option "
                         "to the folder holding plan.txt, claims.txt, entailment.txt and entailment_group.txt "
                         "(or pass --entailment-prompt edge, which needs no entailment_group.txt)") from None
    return parse_prompt(name, text)
