"""conf/ and the registries' schemas agree, so a default has one source.

Every tree policy, verify mode and dataset is a config option through its registry entry's schema
alone (``core.options``: Hydra's ConfigStore, no YAML): ``PolicySpec.option()``, the verify
``ModeSpec.defaults``, the dataset loader's ``options`` (``DatasetLoader.schema``).  A YAML file
left in conf/tree/, conf/verify/ or conf/dataset/ is a named variant: it extends its entry's schema
(``defaults: [/schema/<group>/<name>@_here_]``), names no key the schema lacks, restates no default
differently, and carries data the schema does not (else it would only restate defaults, and goes).
Every pair is a named variant (its models): conf/pair/<name>.yaml extends its drafter's schema
(``/schema/pair/<drafter>@_here_``: the common pair keys and the drafter's ``pair_keys``) under
the same rules.  A key a schema lacks is refused in one line, with or without ``+``."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from specbench import CONF_DIR
from specbench.core.options import is_node, plain, schema_keys, stored
from specbench.drafting.drafters import DRAFTERS, pair_schema
from specbench.inputs.data import DATASETS
from specbench.trees.policies import POLICIES, policy_spec
from specbench.verify.modes import MODES, get_mode

CONF = Path(CONF_DIR)
GROUPS = ("tree", "verify", "dataset")
NO_DEFAULT = (None, (), [], "", "???")  # a default that is none: any value is data


def schema(group: str, name: str) -> dict:
    """The option's keys and defaults, from the registry entry (a pair's: its drafter's)."""
    if group == "tree":
        return policy_spec(name).option()
    if group == "dataset":
        return DATASETS.get(name).schema(name)
    if group == "pair":
        return pair_schema(name, DRAFTERS.get(name))
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
        elif is_node(defaults[key]):  # a nested node (a pair's model spec): no default, its keys typed
            continue
        elif defaults[key] not in NO_DEFAULT and plain(defaults[key]) != value:
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


@pytest.mark.parametrize(
    ("group", "names"), [("tree", POLICIES.names), ("verify", MODES.names), ("dataset", DATASETS.names)]
)
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
    from specbench.study.job.argv import run_hydra
    from specbench.study.job.launch import compose as compose_study

    with pytest.raises(SystemExit) as e:
        run_hydra(lambda: compose_study(["tree=kary", "tree.widht=3"]))
    assert e.value.code == 2
    line = capsys.readouterr().err.strip()
    assert line == (
        "specbench: error: tree.widht: not a parameter of tree=kary (did you mean width?); "
        "remove it (valid: budget, name, width)"
    )


@pytest.mark.parametrize("path", sorted((CONF / "pair").glob("*.yaml")), ids=lambda p: p.stem)
def test_a_pair_extends_its_drafters_schema_and_restates_no_default_differently(path):
    drafter = raw(path)["drafter"]
    assert raw(path)["defaults"] == [f"/schema/pair/{drafter}@_here_", "_self_"]
    assert differing(path, schema("pair", drafter)) == []
    node = composed("pair", path.stem)
    kind = OmegaConf.get_type(node)  # the node IS its drafter's schema (closed by Hydra)
    assert kind.__name__ == f"pair.drafter={drafter}" and list(kind.__dataclass_fields__) == list(
        schema("pair", drafter)
    )


def test_every_drafter_stores_its_pair_schema_and_no_option():
    for name in DRAFTERS.names():
        assert schema_keys("pair", name) == sorted(schema("pair", name))
    assert stored("pair") == []  # a pair is a file in conf/pair/ (or a plugin's folder)


def test_a_differing_pair_or_dataset_default_fails(tmp_path):
    """The check itself: a pair naming another drafter than its schema's or a key the drafter
    lacks, and a dataset preset restating a loader default differently, are caught."""
    bad = tmp_path / "p.yaml"
    bad.write_text("name: p\ndrafter: ngram\nlayrs: 3\nchat_template: true\n")
    found = differing(bad, schema("pair", "model"))
    assert len(found) == 2 and any("drafter='ngram'" in b for b in found) and any("layrs" in b for b in found)
    bad.write_text("name: stdlib_code\nper_file: 2\nroot: /x\n")
    assert differing(bad, schema("dataset", "stdlib_code")) == ["p.yaml: per_file=2, schema default 1"]


def refused(run, capsys) -> str:
    """The one line a refused command prints (exit status 2)."""
    with pytest.raises(SystemExit) as e:
        run()
    assert e.value.code == 2
    return capsys.readouterr().err.strip().removeprefix("specbench: error: ")


DATASET_LINE = (
    "dataset.limt: not a parameter of dataset=humaneval (did you mean limit?); "
    "remove it (valid: kind, limit, max_prompt_tokens, name, path)"
)
PAIR_LINE = (
    "pair.layrs: not a parameter of pair.drafter=layerskip (did you mean layers?); "
    "remove it (valid: chat_template, draft, drafter, layers, name, target)"
)


@pytest.mark.parametrize(
    ("overrides", "line"),
    [(["dataset.limt=3"], DATASET_LINE), (["pair=qwen_skip", "pair.layrs=1"], PAIR_LINE)],
)
def test_a_dataset_or_pair_key_its_schema_lacks_is_one_line_with_or_without_plus(overrides, line, capsys):
    """Without ``+``: Hydra's closed schema (``run_hydra``); with ``+``: the command-line check
    before Hydra starts (``argv.check_keys``) and, past it, every job's config (``jobspec``)."""
    from specbench.study.job import argv, jobspec
    from specbench.study.job.launch import compose as compose_study

    assert refused(lambda: argv.run_hydra(lambda: compose_study(overrides)), capsys) == line
    plus = [*overrides[:-1], "+" + overrides[-1]]
    assert refused(lambda: argv.check_keys(plus), capsys) == line
    with pytest.raises(jobspec.ConfigError) as e:
        jobspec.from_config(compose_study(plus))
    assert str(e.value) == line


def test_under_a_sweep_preset_a_key_no_option_of_its_group_has_is_refused_before_any_job(capsys):
    """A preset picks the options, so the command line checks a group key against all of them:
    a key none has is one line before Hydra starts, one some option has is left to that job."""
    from specbench.study.job import argv

    line = refused(lambda: argv.check_keys(["-m", "sweep=reference", "+dataset.limt=3"]), capsys)
    assert line.startswith("dataset.limt: not a parameter of any dataset option (did you mean limit?)")
    argv.check_keys(["-m", "sweep=reference", "+dataset.tasks=[x]"])  # mt_bench's: left to its jobs


def test_a_pair_file_that_extends_no_schema_has_its_model_specs_checked():
    """A plugin's pair file that does not extend ``/schema/pair/<drafter>`` composes as a plain
    mapping: its keys are still its drafter's, and its draft and target are model specs."""
    from specbench.study.job.schema import unknown_key

    pair = {"name": "p", "drafter": "model", "chat_template": False, "draft": None}
    good = OmegaConf.create(dict(pair, target={"source": "local", "path": "/m"}))
    assert unknown_key("pair", good) is None
    bad = OmegaConf.create(dict(pair, target={"source": "local", "pth": "/m"}))
    assert unknown_key("pair", bad) == (
        "pair.target.pth: not a parameter of a model spec (did you mean path?); "
        "remove it (valid: id, path, source, weights)"
    )
    assert unknown_key("pair", OmegaConf.create(dict(pair, drafter="no_such", extra=1))) is None  # no schema
