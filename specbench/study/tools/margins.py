"""`python -m specbench.study.tools.margins [--results results]`: the target's logit margin where a
greedy output diverges from plain decoding (results/divergence_margins.csv).

A greedy configuration's tokens should equal plain decoding's (tree none, same pair_id, dataset,
dtype and max_new_tokens; results/outputs.jsonl.gz).  Where they differ on a prompt, one float32
forward of the target over the prompt and the tokens both emitted gives its logits at the first
divergent position:

  margin       = logit(the baseline's token) - logit(the configuration's token)
  top2_margin  = top-1 logit - top-2 logit

A margin near zero is a near-tie that the run's dtype tipped the other way (bf16 kernels round
a tree forward differently from a one-token forward); a large margin would be a bug.  REPORT.md
quotes the margin beside each divergence.  A pair that conf/pair can't compose (pair=local, whose
paths were given on the command line) is skipped with a note.
"""

from __future__ import annotations

import os

import pandas as pd

from ...core import readers
from ...core.args import Parser, refuse
from ...results import schemas
from ...results.files import OUTPUTS_FILE, read_outputs, read_summary, write_csv
from ...results.metrics import first_divergence

COLUMNS = [
    "pair",
    "pair_id",
    "dataset",
    "dtype",
    "max_new_tokens",
    "config_hash",
    "baseline_hash",
    "prompt_id",
    "position",
    "token",
    "baseline_token",
    "margin",
    "top2_margin",
]
MATCH = ["pair_id", "dataset", "dtype", "max_new_tokens"]


def divergences(summary: pd.DataFrame, outputs: dict) -> list[dict]:
    """One row per (greedy configuration, prompt) whose tokens differ from its baseline's at a
    position both emitted (a sequence that only stops earlier has no token to compare)."""
    summary = summary.assign(pair_id=summary.get("pair_id", pd.Series("", index=summary.index)).fillna(""))
    greedy = summary[(summary.verify.astype(str) == "greedy") & (summary.temperature.astype(float) == 0)]
    base = greedy[greedy.tree.astype(str) == "none"]
    rows = []
    for r in greedy[greedy.tree.astype(str) != "none"].sort_values("config_hash").to_dict("records"):
        b = base
        for k in MATCH:
            b = b[b[k].astype(str) == str(r[k])]
        if b.empty:
            continue
        bh = str(b.sort_values("config_hash").config_hash.iloc[0])
        mine = {p for h, p in outputs if h == r["config_hash"]} & {p for h, p in outputs if h == bh}
        for prompt in sorted(mine):
            x, y = outputs[(r["config_hash"], prompt)], outputs[(bh, prompt)]
            pos = first_divergence(x, y)
            if pos is not None and pos < min(len(x), len(y)):
                rows.append(
                    {
                        **{k: r[k] for k in ["pair"] + MATCH},
                        "config_hash": r["config_hash"],
                        "baseline_hash": bh,
                        "prompt_id": prompt,
                        "position": pos,
                        "token": x[pos],
                        "baseline_token": y[pos],
                        "prefix": y[:pos],
                    }
                )
    return rows


def logit_margins(model, prompt_ids: list[int], rows: list[dict]) -> list[dict]:
    """Each row with its margins from one forward of ``model`` over prompt + the shared prefix."""
    import torch  # heavy: torch only where a divergence is measured (none: no model, no torch)

    out = []
    for r in rows:
        ids = torch.tensor([list(prompt_ids) + list(r["prefix"])], device=model.device)
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, -1].float()
        top = torch.topk(logits, 2).values
        out.append(
            {
                **{k: r[k] for k in COLUMNS if k in r},
                "margin": float(logits[r["baseline_token"]] - logits[r["token"]]),
                "top2_margin": float(top[0] - top[1]),
            }
        )
    return out


def measure(rows: list[dict]) -> tuple[list[dict], list[str]]:
    """Margins of every divergence, one float32 target load per (pair, dataset, dtype); notes for
    a pair that can't be composed or whose models' contents differ from the results' pair_id."""
    from ...inputs import models  # heavy: torch and transformers, only where a divergence is measured
    from ..job import identity, jobspec  # heavy: torch (the registries), as models above
    from ..job.context import context  # heavy: torch, as models above
    from ..job.launch import compose  # heavy: torch (launch imports jobspec), as models above

    done, notes = [], []
    for (pair, pid, dataset, dtype), group in pd.DataFrame(rows).groupby(
        ["pair", "pair_id", "dataset", "dtype"], dropna=False
    ):
        where = f"{pair} [{pid}] on {dataset} ({dtype})"
        try:
            job = jobspec.from_config(
                compose([f"pair={pair}", f"dataset={dataset}", f"dtype={dtype}", "dataset.limit=null"])
            )
            ident = identity.job_identity(job)
        except Exception as e:  # noqa: BLE001 (a pair conf/pair can't compose)
            notes.append(f"{where}: skipped ({str(e).splitlines()[0]})")
            continue
        if identity.pair_id(ident, job.pair.drafter, job.pair.drafter_params) != pid:
            notes.append(f"{where}: skipped (the installed models are not the ones that produced these results)")
            continue
        model = models.load_model(job.pair.target.as_dict(), "float32", job.device)  # the target alone
        ctx = context(job)
        prompts = {p.id: p.ids for p in ctx.prompts(ctx.tokenizer())}
        for prompt, g in group.groupby("prompt_id", sort=True):
            done += logit_margins(model, prompts[prompt], g.to_dict("records"))
    return done, notes


def main(argv=None) -> None:
    ap = Parser(prog="python -m specbench.study.tools.margins", description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results", help="folder with summary.csv and outputs.jsonl.gz")
    args = ap.parse_args(argv)
    summary_path = os.path.join(args.results, "summary.csv")
    outputs_path = os.path.join(args.results, OUTPUTS_FILE)
    fix = schemas.COLLECT_FIX
    try:  # a missing, binary, cut or garbled input: one line naming it, exit 2, nothing written
        summary = read_summary(summary_path, "--results", schemas.SUMMARY_DIVERGENCE)
        readers.check_file(outputs_path, fix, "--results")  # JSON lines: not a CSV
        rows = divergences(summary, read_outputs(outputs_path, fix))
        done, notes = measure(rows) if rows else ([], [])
    except (ValueError, KeyError, FileNotFoundError) as e:
        refuse((str(e).strip().splitlines() or [type(e).__name__])[0])
    write_csv(pd.DataFrame(done, columns=COLUMNS), os.path.join(args.results, "divergence_margins.csv"))
    for note in notes:
        print(f"specbench: {note}")
    print(f"specbench: {len(done)} divergences from plain decoding -> {args.results}/divergence_margins.csv")


if __name__ == "__main__":
    main()
