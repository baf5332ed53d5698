"""Issue 56: outputs.jsonl has one reader (``results.files.output_rows`` on ``core.jsonl``), parsed
once per read: the report's check, collect and margins all go through it."""

from __future__ import annotations

import gzip
import json

import pytest

from specbench.report import load
from specbench.results import files

ROWS = [{"config_hash": "abc", "prompt_id": str(i), "token_ids": [i, i + 1], "text": "x"} for i in range(5)]


def _write(path, lines: list[str]) -> str:
    path.write_bytes(gzip.compress("".join(x + "\n" for x in lines).encode(), mtime=0))
    return str(path)


def test_the_report_parses_each_line_once(tmp_path, monkeypatch):
    path = _write(tmp_path / "outputs.jsonl.gz", [json.dumps(r) for r in ROWS])
    calls = []
    real = json.loads
    monkeypatch.setattr(json, "loads", lambda s, *a, **k: calls.append(s) or real(s, *a, **k))
    got = load.read_outputs(path)
    assert got == {("abc", str(i)): [i, i + 1] for i in range(5)}
    assert len(calls) == len(ROWS)


@pytest.mark.parametrize(
    "bad, says",
    [
        ('{"config_hash": "abc", "prompt_id": "1", "tok', ":2: not valid JSON"),
        ("[1, 2]", ":2: expected a JSON object"),
        ('{"config_hash": "abc", "prompt_id": "1"}', ":2: expected {"),
        ('{"config_hash": "abc", "prompt_id": "1", "token_ids": ["a"]}', ":2: expected {"),
    ],
)
def test_a_bad_line_is_one_line_naming_file_line_and_fix(tmp_path, bad, says):
    path = _write(tmp_path / "outputs.jsonl.gz", [json.dumps(ROWS[0]), bad])
    with pytest.raises(ValueError, match="specbench.collect") as e:
        files.read_outputs(path)
    assert says in str(e.value) and str(e.value).startswith(path) and "\n" not in str(e.value)
    with pytest.raises(load.InputError) as e2:
        load.read_outputs(path)
    assert str(e2.value).startswith(path) and says in str(e2.value)


def test_a_binary_or_cut_file_is_refused_and_an_absent_one_is_empty(tmp_path):
    binary = tmp_path / "b.jsonl.gz"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe\n")
    with pytest.raises(ValueError, match="truncated or corrupt"):
        files.read_outputs(str(binary))
    plain = tmp_path / "p.jsonl"
    plain.write_bytes(b'{"a": "\xff\xfe"}\n')
    with pytest.raises(ValueError, match="not UTF-8"):
        files.read_outputs(str(plain))
    assert files.read_outputs(str(tmp_path / "absent.jsonl.gz")) == {}
    assert list(files.output_rows(str(tmp_path / "absent.jsonl"))) == []
