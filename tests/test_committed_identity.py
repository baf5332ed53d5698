"""The committed config hashes stay valid: every decode configuration of results/summary.csv,
rebuilt from its row (pair, tree and its ``tree_params``, budget, verify and its parameters,
dataset, the top-level keys) through the real conf/ and the group schemas, normalises to the
config its hash was computed from.

* ``tree_params`` is the committed record of what the hash covered of the tree group
  (``results.row_keys``: ``job.tree.params``), so ``job.tree.as_dict()`` must equal
  ``{name, budget, **tree_params}`` exactly (no key added by a schema, none dropped);
* the whole normalised config, hashed with a fixed content identity (``IDENT``; the models'
  and datasets' fingerprints are not this test's subject), must equal the hash the code before
  the group schemas computed for the same row: tests/fixtures/committed_identity.json, keyed by
  the row's committed config hash (written by ``write`` on that code).

Each (pair, tree, verify, dataset) combination is composed once; a row's values are set over it.
"""

from __future__ import annotations

import copy
import csv
import json
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from specbench import CONF_DIR
from specbench.study.job import identity, jobspec

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "committed_identity.json"
IDENT = identity.Identity("draft-fp", "target-fp", "dataset-fp")
TOP = ("seed", "max_new_tokens", "dtype", "device", "engine", "batch_size")


def decode_rows() -> list[dict]:
    """results/summary.csv's rows of decode jobs (a paired row's hash derives from its job's)."""
    with open(ROOT / "results" / "summary.csv", newline="") as fh:
        return [r for r in csv.DictReader(fh) if r["pair_role"] != "paired"]


def row_values(row: dict) -> dict:
    """The values a row records, as config keys over its options' defaults."""
    from specbench.verify.modes import get_mode

    verify = {k: float(row[k]) for k in ("temperature", "draft_temperature", "top_p")}
    defaults = get_mode(row["verify"]).defaults
    if "order" in defaults:
        verify["order"] = row["sibling_order"]
    if "children" in defaults:
        verify["children"] = row["child_rule"]
    tree = {"budget": int(row["budget"]), **json.loads(row["tree_params"] or "{}")}
    return {
        "tree": tree,
        "verify": verify,
        **{k: json.loads(row[k]) if k not in ("dtype", "device", "engine") else row[k] for k in TOP},
    }


def jobs(rows: list[dict]):
    """(row, job spec) of every row: its options composed once, its values set over them."""
    composed: dict[tuple, dict] = {}
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        for row in rows:
            key = tuple(row[g] for g in ("pair", "tree", "verify", "dataset"))
            if key not in composed:
                overrides = [f"{g}={v}" for g, v in zip(("pair", "tree", "verify", "dataset"), key)]
                composed[key] = OmegaConf.to_container(compose("config", overrides=overrides))
            cfg = copy.deepcopy(composed[key])  # as Hydra composes it, the row's values set over it
            values = row_values(row)
            cfg["tree"].update(values.pop("tree"))
            cfg["verify"].update(values.pop("verify"))
            yield row, jobspec.from_config({**cfg, **values})


def write(path: Path = FIXTURE) -> None:
    """The fixture: {committed config hash: hash of the normalised config under IDENT}."""
    out = {row["config_hash"]: identity.config_hash(job, IDENT) for row, job in jobs(decode_rows())}
    path.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")


def test_every_committed_configuration_normalises_as_when_it_was_hashed():
    """Rows collected after the fixture was written (a user's own runs) are checked for their tree
    dict; every row the fixture holds is still committed, and its hash recomputes equal."""
    expected = json.loads(FIXTURE.read_text())
    rows = decode_rows()
    assert len(expected) >= 1000 and set(expected) <= {r["config_hash"] for r in rows}
    for row, job in jobs(rows):
        tree = {"name": row["tree"], "budget": int(row["budget"]), **json.loads(row["tree_params"] or "{}")}
        assert job.tree.as_dict() == tree, row["config_hash"]
        if row["config_hash"] in expected:
            assert identity.config_hash(job, IDENT) == expected[row["config_hash"]], row["config_hash"]


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURE)
