"""``--split-input-file`` chunks and ``--verify-diagnostics`` expectations of ``jaxpp-opt``.

Follows mlir-opt: ``// expected-<kind> @<where> {{text}}`` comments, checked
against the diagnostics a chunk produced.
"""

from __future__ import annotations

import dataclasses
import re

from jax.interpreters.mlir import ir

from jaxpp_mlir import diagnostics
from jaxpp_mlir.diagnostics import Diagnostic
from jaxpp_mlir.runtime import records
from jaxpp_mlir.tools.opt_base import SPLIT_MARKER


@records.frozen
class Site:
    """A file position a diagnostic points at; ``filename`` as MLIR recorded it."""

    filename: str
    line: int
    col: int


def site_of(location: ir.Location) -> Site | None:
    """The file position of ``location`` (searching nested locations), None if unknown."""
    text = diagnostics.format_location(location)
    if text == "loc(unknown)":
        return None
    filename, line, col = text.rsplit(":", 2)
    return Site(filename, int(line), int(col))


@dataclasses.dataclass
class Expected:
    """One ``// expected-<kind> @<where> {{text}}`` comment."""

    kind: str
    line: int | None  # None: @unknown (a diagnostic without a file location)
    comment_line: int
    comment_col: int
    text: str
    regex: re.Pattern[str] | None = None
    matched: bool = False

    def matches(self, message: str) -> bool:
        if self.regex is not None:
            return self.regex.search(message) is not None
        return self.text in message


_EXPECTED_RE = re.compile(
    r"expected-(error|note|remark|warning)(-re)? *(@([+-][0-9]+|above|below|unknown))? *"
    r"\{\{(.*)\}\}$"
)


def parse_expectations(lines: list[str], first: int, last: int) -> tuple[list[Expected], list]:
    """Reads the expected-* comments of lines ``first..last`` (0-based, inclusive).

    Follows mlir-opt: ``@above`` means the last line above that holds no
    expectation, ``@below`` the next such line below. Returns the expectations
    and ``(line, col, message)`` for each malformed one.
    """
    expected: list[Expected] = []
    problems: list[tuple[int, int, str]] = []
    last_plain_line = first
    pending_below: list[Expected] = []
    for index in range(first, last + 1):
        match = _EXPECTED_RE.search(lines[index].rstrip())
        if match is None:
            for item in pending_below:
                item.line = index + 1
            pending_below.clear()
            last_plain_line = index
            continue
        kind, is_regex, _, where, text = match.groups()
        item = Expected(kind, index + 1, index + 1, match.start() + 1, text)
        if is_regex:
            try:
                item.regex = _compile_expected_regex(text)
            except (ValueError, re.error) as exc:
                problems.append((index + 1, match.start() + 1, f"invalid regex: {exc}"))
                continue
        if where is None:
            pass
        elif where[0] in "+-":
            item.line = index + 1 + int(where)
        elif where == "unknown":
            item.line = None
        elif where == "above":
            item.line = last_plain_line + 1
        else:  # below: the next line without an expectation (the last line if none)
            item.line = last + 1
            pending_below.append(item)
        expected.append(item)
    return expected, problems


def _compile_expected_regex(text: str) -> re.Pattern[str]:
    """``foo {{[0-9]+}} bar``: literal text with regular expressions inside ``{{ }}``."""
    parts, pos = [], 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            parts.append(re.escape(text[pos:]))
            break
        end = text.find("}}", start + 2)
        if end < 0:
            raise ValueError("'{{' without its closing '}}'")
        parts.append(re.escape(text[pos:start]))
        parts.append(f"(?:{text[start + 2 : end]})")
        pos = end + 2
    return re.compile("".join(parts))


@dataclasses.dataclass
class Chunk:
    """A piece of the input; ``text`` is padded with empty lines to keep line numbers."""

    text: str
    first: int  # 0-based index of its first line in the input
    last: int  # 0-based index of its last line


def split_chunks(lines: list[str], split: bool) -> list[Chunk]:
    if not split:
        return [Chunk("".join(lines), 0, max(len(lines) - 1, 0))]
    chunks, start = [], 0
    for index, line in enumerate(lines + [SPLIT_MARKER]):
        if line.rstrip() == SPLIT_MARKER:
            text = "\n" * start + "".join(lines[start:index])
            chunks.append(Chunk(text, start, max(index - 1, start)))
            start = index + 1
    return chunks


def flatten(diagnostic: Diagnostic) -> list[tuple[str, ir.Location, str]]:
    items = [(diagnostic.severity, diagnostic.location, diagnostic.message)]
    for note in diagnostic.notes:
        items.extend(flatten(note))
    return items
