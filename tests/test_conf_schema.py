"""conf/ and the registries' schemas agree: a group option's YAML restates no parameter default
differently from its registry entry's defaults (``PolicySpec.params().as_dict()``, the verify
``ModeSpec.defaults``), and names no key the entry lacks; so a default has one source."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from specbench import CONF_DIR
from specbench.trees.policies import policy_spec
from specbench.verify.modes import get_mode

CONF = Path(CONF_DIR)
GROUP_KEYS = {"name", "budget"}  # the option's own name; the tree budget (a sweep axis, no default)


def plain(value):
    """A YAML value as the dataclass holds it (lists as lists, tuples as lists)."""
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    return value


def options(group: str):
    return sorted((CONF / group).glob("*.yaml"))


def differing(path: Path, schema: dict) -> list[str]:
    """The keys of one YAML option that the schema lacks, or that restate its default differently
    (an interpolation or a file path is a value, not a restated default: skipped)."""
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    bad = []
    for key, value in raw.items():
        if key in GROUP_KEYS:
            continue
        if key not in schema:
            bad.append(f"{path.name}: {key} is not a field of the schema")
        elif isinstance(value, str) and "${" in value:
            continue
        elif schema[key] not in (None, (), "") and plain(schema[key]) != value:  # else: required, no default
            bad.append(f"{path.name}: {key}={value!r}, schema default {schema[key]!r}")
    return bad


@pytest.mark.parametrize("path", options("tree"), ids=lambda p: p.stem)
def test_tree_options_restate_no_default_differently(path):
    name = OmegaConf.load(path).name
    assert name == path.stem
    assert differing(path, policy_spec(name).params().as_dict()) == []


@pytest.mark.parametrize("path", options("verify"), ids=lambda p: p.stem)
def test_verify_options_restate_no_default_differently(path):
    name = OmegaConf.load(path).name
    assert name == path.stem
    assert differing(path, dict(get_mode(name).defaults)) == []


def test_a_differing_default_fails(tmp_path):
    """The check itself: kary's YAML saying width 5 where the schema says otherwise is caught."""
    bad = tmp_path / "kary.yaml"
    bad.write_text("name: kary\nbudget: 16\nwidth: 5\nfoo: 1\n")
    found = differing(bad, policy_spec("kary").params().as_dict())
    assert any("width=5" in b for b in found) and any("foo" in b for b in found)
