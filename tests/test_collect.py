"""collect keeps config hashes as text: '3726142e8142' is not a number."""
import pandas as pd

from specbench.collect import job_dirs, merge
from specbench.results import read_csv


def test_float_looking_hashes_survive_collect(tmp_path):
    for i, h in enumerate(("3726142e8142", "1e5", "0af82bef9817", "123456789012")):
        d = tmp_path / f"job{i}"
        d.mkdir()
        pd.DataFrame([{"config_hash": h, "pair": "p", "dataset": "d", "verify": "greedy",
                       "temperature": 0.0, "tree": "chain", "budget": i + 1, "engine": "live",
                       "n_steps": 1, "new_tokens": 1}]).to_csv(d / "summary.csv", index=False)
        pd.DataFrame([{"config_hash": h, "prompt_id": "0", "step": 0, "emitted": 1}]
                     ).to_csv(d / "steps.csv", index=False)
    summary, steps, _ = merge(job_dirs([str(tmp_path)])[0])
    assert sorted(summary.config_hash) == ["0af82bef9817", "123456789012", "1e5", "3726142e8142"]
    assert len(steps) == 4


def test_read_csv_keeps_all_digit_and_hex_hashes_sortable(tmp_path):
    """An all-digit hash next to a hex one must not give a mixed int/str column."""
    path = tmp_path / "summary.csv"
    pd.DataFrame({"config_hash": ["123456789012", "0af82bef9817"], "prompt_id": ["7", "x"]}).to_csv(path, index=False)
    df = read_csv(path).sort_values(["config_hash", "prompt_id"])
    assert list(df.config_hash) == ["0af82bef9817", "123456789012"]
