"""Prompt datasets (specbench/data.py): every loader, limit, chat template, errors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from specbench import data
from specbench.registry import UnknownName

CONF = Path(__file__).resolve().parents[1] / "conf" / "dataset"
CHAT_TASKS = {"writing", "roleplay", "reasoning", "extraction", "translation", "summarisation", "qa"}


def _build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|im_start|>", "<|im_end|>", "<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["def f(x):\n    return x", "hello world", "The quick brown fox."], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return fast


@pytest.fixture(scope="module")
def tok(request):
    """The lead's session tokenizer when tests/conftest.py provides one, else a throwaway BPE."""
    try:
        return request.getfixturevalue("tiny_tokenizer")
    except pytest.FixtureLookupError:
        return _build_tokenizer()


def _cfg(name, **kw):
    """The shipped conf/dataset/<name>.yaml with overrides, as Hydra would compose it."""
    cfg = OmegaConf.load(CONF / f"{name}.yaml")
    return OmegaConf.merge(cfg, kw)


@pytest.mark.parametrize("name,minimum,task", [
    ("humaneval", 164, "code"), ("smoke", 3, None), ("stdlib_code", 40, "code"),
    ("chat", 40, None), ("math", 40, "math"),
])
def test_every_dataset_loads(tok, name, minimum, task):
    prompts = data.load_prompts(_cfg(name), tok)
    assert len(prompts) >= minimum
    assert len({p.id for p in prompts}) == len(prompts)
    for p in prompts:
        assert isinstance(p, data.Prompt) and p.text.strip() and p.ids
        assert p.ids == tok.encode(p.text, add_special_tokens=False)
        if task:
            assert p.task == task


def test_humaneval_is_the_bundled_stub(tok):
    import gzip
    first = json.loads(gzip.open(data.humaneval_path(), "rt").readline())
    p = data.load_prompts(_cfg("humaneval", limit=1), tok)[0]
    assert p.id == first["task_id"] == "HumanEval/0" and p.text == first["prompt"]


def test_limit_is_first_n_and_deterministic(tok):
    for name in ("humaneval", "stdlib_code", "chat", "math"):
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
        "def nodoc(x):\n    return x\n")
    (tmp_path / "broken.py").write_text("def (:\n")
    one = data.load_prompts({"name": "stdlib_code", "root": str(tmp_path)}, tok)
    two = data.load_prompts({"name": "stdlib_code", "root": str(tmp_path), "per_file": 2}, tok)
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


@pytest.mark.parametrize("content,match", [
    ('{"id": "a"}\n', "missing key"),
    ("not json\n", "not valid JSON"),
    ('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', "duplicate id"),
    ('{"id": "a", "text": "   "}\n', "empty text"),
])
def test_jsonl_bad_lines(tok, tmp_path, content, match):
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    with pytest.raises(ValueError, match=match) as e:
        data.load_prompts({"name": "jsonl", "path": str(f)}, tok)
    assert "\n" not in str(e.value)


def test_jsonl_needs_path(tok, tmp_path):
    with pytest.raises(ValueError, match="dataset.path"):
        data.load_prompts(_cfg("jsonl"), tok)
    with pytest.raises(ValueError, match="not found"):
        data.load_prompts({"name": "jsonl", "path": str(tmp_path / "nope.jsonl")}, tok)


def test_empty_dataset_is_one_line_error(tok, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    for cfg in ({"name": "smoke", "limit": 0}, {"name": "jsonl", "path": str(empty)},
                {"name": "smoke", "prompts": []}):
        with pytest.raises(ValueError, match=r"^dataset \w+ has no prompts: ") as e:
            data.load_prompts(cfg, tok)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="dataset.limit"):
        data.load_prompts({"name": "smoke", "limit": -1}, tok)


def test_unknown_dataset_lists_valid(tok):
    with pytest.raises(UnknownName) as e:
        data.load_prompts({"name": "humanevl"}, tok)
    msg = str(e.value)
    for name in ("humaneval", "smoke", "stdlib_code", "chat", "math", "jsonl"):
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


@pytest.fixture(scope="module")
def chat_tok(tok):
    """A tokenizer with a chat template (the throwaway one when the session tokenizer has none)."""
    return tok if getattr(tok, "chat_template", None) else _build_tokenizer()


def test_chat_template(chat_tok):
    tok = chat_tok
    raw = data.load_prompts(_cfg("smoke", limit=1), tok)[0]
    chat = data.load_prompts(_cfg("smoke", limit=1), tok, chat_template=True)[0]
    expected = tok.apply_chat_template([{"role": "user", "content": raw.text}],
                                       add_generation_prompt=True, tokenize=False)
    assert expected.endswith("assistant\n") and raw.text in expected
    assert chat.ids == tok.encode(expected, add_special_tokens=False)
    assert chat.text == raw.text and len(chat.ids) > len(raw.ids)


def test_chat_template_missing(tok):
    class NoTemplate:
        chat_template = None

        def encode(self, text, add_special_tokens=False):
            return list(text.encode())

    with pytest.raises(ValueError, match="pair.chat_template=false"):
        data.load_prompts({"name": "smoke"}, NoTemplate(), chat_template=True)


def test_yaml_files_have_contract_keys():
    for path in sorted(CONF.glob("*.yaml")):
        cfg = OmegaConf.load(path)
        assert cfg.name == path.stem and cfg.name in data.DATASETS
        assert "limit" in cfg and cfg.limit is None
