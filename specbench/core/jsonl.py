"""JSON-lines text read as objects, every bad line one error naming the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator


def json_objects(lines: Iterable[str], where: str, fix: str, like: str) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line; a ValueError '<where>:<line>: ...; <fix>' for a
    line that is not JSON or not a JSON object (``like``: an example of one)."""
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}:{lineno}: not valid JSON ({exc.msg}); {fix}") from None
        if not isinstance(row, dict):
            raise ValueError(f"{where}:{lineno}: expected a JSON object like {like}; {fix}")
        yield lineno, row
