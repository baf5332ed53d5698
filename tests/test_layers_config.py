"""Below the study layer nothing sees a config dict or an OmegaConf node: the study layer reads the
config once into the typed job spec and hands plain values and mappings down (issue 25).
The check is the issue's own: `grep -rn "cfg\\|OmegaConf\\|DictConfig" specbench/{core,trees,verify,
drafting,engine,inputs}` finds nothing."""

import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "specbench"
BELOW_STUDY = ["core", "trees", "verify", "drafting", "engine", "inputs"]
PATTERN = re.compile(r"cfg|OmegaConf|DictConfig")


def _hits(layer: str) -> list[str]:
    return [
        f"{path.relative_to(PKG.parent)}:{i}: {line.strip()}"
        for path in sorted((PKG / layer).rglob("*.py"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if PATTERN.search(line)
    ]


@pytest.mark.parametrize("layer", BELOW_STUDY)
def test_no_config_object_below_the_study_layer(layer):
    hits = _hits(layer)
    assert not hits, "config objects below the study layer:\n" + "\n".join(hits)


def test_the_pattern_finds_what_grep_finds():
    """The regex is grep's `cfg\\|OmegaConf\\|DictConfig` (a substring match, names included)."""
    assert all(PATTERN.search(s) for s in ("pair_cfg = 1", "OmegaConf.load(p)", "x: DictConfig", "cfgs"))
    assert not PATTERN.search("config = model.config")
