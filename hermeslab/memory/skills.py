"""Skills: named procedures the agent writes down so it does not have to rediscover them.

A skill is a Markdown file ``<folder>/<name>.md`` that opens with YAML front
matter (``name`` and ``description``) followed by the body, the steps
themselves. Memory holds short facts; a skill holds a how-to. The names and
descriptions go into the system prompt; the body is read on demand. Skills are
written with the same lock, atomic rename and threat scan as memory entries.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import yaml

from .atomic import BusyError, locked, read_text, write_atomic
from .scan import scan

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1_024
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(?P<meta>.*?)\n---[ \t]*(?:\n|\Z)(?P<body>.*)\Z", re.DOTALL)


class SkillError(ValueError):
    """A skill that cannot be found, read or written; the text says why."""


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str

    def render(self) -> str:
        """The file's text: front matter, then the body."""
        meta = yaml.safe_dump({"name": self.name, "description": self.description}, sort_keys=False,
                              allow_unicode=True, width=10_000).strip()
        return f"---\n{meta}\n---\n{self.body.rstrip()}\n"


def parse_skill(name: str, text: str) -> Skill:
    """A skill from its file's text; a file without front matter is all body."""
    match = _FRONT_MATTER.match(text.replace("\r\n", "\n"))
    if match is None:
        return Skill(name, "", text.strip())
    try:
        meta = yaml.safe_load(match.group("meta")) or {}
    except yaml.YAMLError as exc:
        raise SkillError(f"skill {name!r}: the front matter is not valid YAML: {exc}") from None
    if not isinstance(meta, dict):
        raise SkillError(f"skill {name!r}: the front matter must be a mapping with name and description")
    description = meta.get("description", "")
    return Skill(name, " ".join(str(description).split()), match.group("body").strip())


def check_name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise SkillError("a skill name is required")
    if len(name) > MAX_NAME_CHARS:
        raise SkillError(f"skill name {name[:20]!r}… is {len(name)} chars; the limit is {MAX_NAME_CHARS}")
    if not NAME_PATTERN.match(name) or ".." in name:
        raise SkillError(f"invalid skill name {name!r}: use lower-case letters, digits, '.', '_' and '-', "
                         "starting with a letter or digit (e.g. 'deploy-docs')")
    return name


class SkillLibrary:
    """The skills in one folder: list, view, create and patch."""

    def __init__(self, folder: Path, *, max_chars: int):
        if max_chars < 1:
            raise ValueError(f"the skill size limit must be positive, got {max_chars}")
        self.folder = Path(folder)
        self.max_chars = max_chars

    def path(self, name: str) -> Path:
        return self.folder / f"{check_name(name)}.md"

    def list(self) -> list[Skill]:
        """Every readable skill, by name; a file with broken front matter is listed without a description."""
        skills = []
        for path in sorted(self.folder.glob("*.md")) if self.folder.is_dir() else ():
            if not NAME_PATTERN.match(path.stem):
                continue
            try:
                skills.append(parse_skill(path.stem, read_text(path)))
            except SkillError:
                skills.append(Skill(path.stem, "", ""))
        return skills

    def view(self, name: str) -> Skill:
        path = self.path(name)
        if not path.exists():
            known = ", ".join(skill.name for skill in self.list()) or "none yet"
            raise SkillError(f"no skill named {name!r}; existing skills: {known}")
        return parse_skill(name, read_text(path))

    def create(self, name: str, description: str, body: str) -> Skill:
        skill = self._checked(Skill(check_name(name), description, body))
        with self._lock(name):
            if self.path(name).exists():
                raise SkillError(f"a skill named {name!r} already exists; patch it instead")
            write_atomic(self.path(name), skill.render())
        return skill

    def patch(self, name: str, *, old_text: str | None = None, new_text: str | None = None,
              description: str | None = None) -> Skill:
        """Replace the one occurrence of ``old_text`` in the body, and/or set a new description."""
        if old_text is None and description is None:
            raise SkillError("a patch needs old_text and new_text (to change the body) or a new description")
        if (old_text is None) != (new_text is None):
            raise SkillError("old_text and new_text go together: give both to change the body")
        with self._lock(name):
            current = self.view(name)
            body = current.body
            if old_text is not None:
                if not old_text:
                    raise SkillError("old_text is empty; give text that occurs exactly once in the skill's body")
                count = body.count(old_text)
                if count != 1:
                    where = "does not occur" if count == 0 else f"occurs {count} times"
                    raise SkillError(f"old_text {old_text[:60]!r} {where} in skill {name!r}; it must occur exactly "
                                     "once (include more surrounding text)")
                body = body.replace(old_text, new_text or "")
            skill = self._checked(Skill(name, current.description if description is None else description, body))
            write_atomic(self.path(name), skill.render())
        return skill

    # ------------------------------------------------------------ internals

    def _checked(self, skill: Skill) -> Skill:
        description = " ".join(str(skill.description or "").split())
        body = (skill.body or "").strip()
        if not description:
            raise SkillError("a skill needs a one-line description saying when to use it")
        if len(description) > MAX_DESCRIPTION_CHARS:
            raise SkillError(f"the description is {len(description):,} chars; the limit is {MAX_DESCRIPTION_CHARS:,}")
        if not body:
            raise SkillError("a skill needs a body: the steps to follow")
        if len(body) > self.max_chars:
            raise SkillError(f"the body is {len(body):,} chars; the limit is {self.max_chars:,}. Keep the steps "
                             "that matter and cut the rest")
        for part, text in (("description", description), ("body", body)):
            threat = scan(text)
            if threat is not None:
                raise SkillError(f"refused: the skill's {part} {threat.describe()}. Skills are pasted into future "
                                 "prompts, so they must describe procedures, not override the agent")
        return Skill(skill.name, description, body)

    @contextmanager
    def _lock(self, name: str) -> Iterator[None]:
        try:
            with locked(self.path(name)):
                yield
        except BusyError as exc:
            raise SkillError(str(exc)) from None
