"""collect keeps config hashes as text: '3726142e8142' is not a number."""
import pandas as pd

from specbench.collect import job_dirs, merge


def test_float_looking_hashes_survive_collect(tmp_path):
    for i, h in enumerate(("3726142e8142", "1e5", "0af82bef9817")):
        d = tmp_path / f"job{i}"
        d.mkdir()
        pd.DataFrame([{"config_hash": h, "pair": "p", "dataset": "d", "verify": "greedy",
                       "temperature": 0.0, "tree": "chain", "budget": i + 1, "engine": "live"}]
                     ).to_csv(d / "summary.csv", index=False)
        pd.DataFrame([{"config_hash": h, "prompt_id": "0", "step": 0}]).to_csv(d / "steps.csv", index=False)
    summary, steps = merge(job_dirs([str(tmp_path)]))
    assert sorted(summary.config_hash) == ["0af82bef9817", "1e5", "3726142e8142"]
    assert len(steps) == 3
