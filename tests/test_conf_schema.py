"""conf/ and the registries' schemas agree, so a default has one source.

Every tree policy and verify mode is a config option through its registry entry's schema alone
(``core.options``: Hydra's ConfigStore, no YAML): ``PolicySpec.option()``, the verify
``ModeSpec.defaults``.  A YAML file left in conf/tree/ or conf/verify/ is a named variant: it
extends its entry's schema (``defaults: [/schema/<group>/<name>@_here_]``), names no key the
schema lacks, restates no default differently, and carries data the schema does not (else it
would only restate defaults, and goes)."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from specbench import CONF_DIR
from specbench.core.options import plain, schema_keys, stored
from specbench.trees.policies import POLICIES, policy_spec
from specbench.verify.modes import MODES, get_mode

CONF = Path(CONF_DIR)
GROUPS = ("tree", "verify")


def schema(group: str, name: str) -> dict:
    """The option's keys and defaults, from the registry entry."""
    if group == "tree":
        return policy_spec(name).option()
    return {"name": name, **get_mode(name).defaults, "paired_with": []}


def variants():
    return [(g, p) for g in GROUPS for p in sorted((CONF / g).glob("*.yaml"))]


def raw(path: Path) -> dict:
    return OmegaConf.to_container(OmegaConf.load(path), resolve=False)


def differing(path: Path, defaults: dict) -> list[str]:
    """The keys of one YAML option that the schema lacks, or that restate its default differently
    (an interpolation is a value, not a restated default: skipped; a default of None, () or ""
    means no default)."""
    bad = []
    for key, value in raw(path).items():
        if key == "defaults":
            continue
        if key not in defaults:
            bad.append(f"{path.name}: {key} is not a field of the schema")
        elif isinstance(value, str) and "${" in value:
            continue
        elif defaults[key] not in (None, (), [], "") and plain(defaults[key]) != value:
            bad.append(f"{path.name}: {key}={value!r}, schema default {defaults[key]!r}")
    return bad


def composed(group: str, name: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("config", overrides=[f"{group}={name}"])[group]


@pytest.mark.parametrize(("group", "path"), variants(), ids=lambda v: getattr(v, "stem", v))
def test_a_yaml_variant_extends_its_schema_and_carries_data(group, path):
    assert raw(path)["defaults"] == [f"/schema/{group}/{path.stem}@_here_", "_self_"]
    defaults = schema(group, path.stem)
    assert differing(path, defaults) == []
    data = {k: v for k, v in raw(path).items() if k != "defaults" and plain(defaults[k]) != v}
    assert data, f"{path.name} only restates defaults: delete it"


@pytest.mark.parametrize(("group", "names"), [("tree", POLICIES.names), ("verify", MODES.names)])
def test_every_entry_is_an_option_with_its_schemas_keys(group, names):
    files = {p.stem for g, p in variants() if g == group}
    assert sorted(names()) == sorted(set(stored(group)) | files)
    for name in names():
        assert schema_keys(group, name) == sorted(schema(group, name))
        node = OmegaConf.to_container(composed(group, name), resolve=False)
        assert sorted(node) == sorted(schema(group, name)) and node["name"] == name
        if name not in files:
            assert node == plain(schema(group, name))


def test_a_differing_default_fails(tmp_path):
    """The check itself: kary's YAML saying width 5 where the schema says otherwise is caught."""
    bad = tmp_path / "kary.yaml"
    bad.write_text("budget: 16\nwidth: 5\nfoo: 1\n")
    found = differing(bad, schema("tree", "kary"))
    assert any("width=5" in b for b in found) and any("foo" in b for b in found)


def test_hydra_refuses_a_key_the_schema_lacks_in_one_line(capsys):
    """Past the command-line check (a compose from code, a sweep preset), Hydra's structured config
    refuses the key; ``run_hydra`` names it, its closest valid key and the valid keys."""
    from specbench.study.argv import run_hydra
    from specbench.study.launch import compose as compose_study

    with pytest.raises(SystemExit) as e:
        run_hydra(lambda: compose_study(["tree=kary", "tree.widht=3"]))
    assert e.value.code == 2
    line = capsys.readouterr().err.strip()
    assert line == (
        "specbench: error: tree.widht: not a parameter of tree=kary (did you mean width?); "
        "remove it (valid: budget, name, width)"
    )
