"""`python -m specbench.export [overrides] format=F [out=PATH] [nearest=true] [eagle_head=ID]`: a
configuration in the form a serving engine takes, or its speculation profile.

The configuration is the study's overrides (``pair=qwen_coder tree=binary tree.budget=16``,
checked as ``run`` checks them, no model loads) or ``config_hash=H``, a committed row of
``results_dir`` (default results).  ``format``:

- ``paths``: the tree as a rank-path list, ``[[0], [0, 0], [1], ...]`` (Medusa's choices,
  TensorRT-LLM's ``medusa_choices`` and ``eagle_choices``), for every static shape (Sequoia's
  DP tree included); its parents and sibling ranks are the policy's.
- ``sglang``, ``trtllm``, ``vllm``: the engine's own settings (``engines.FORMATS``; each names
  the engine source it was checked against, docs/serving.md).  ``eagle_head=HUB_ID_OR_DIR``: the
  EAGLE-3 head TensorRT-LLM's Eagle3 drafts trees with (it has no tree of a separate draft model).
- ``profile``: the speculation profile of the configuration's committed rows (``profile``).

``out=PATH`` writes JSON there (atomically); without it the JSON goes to stdout.  What a format
cannot run as the study ran it is refused in one line naming the engine, the reason and the
nearest exportable configuration, exit 2; ``nearest=true`` exports that one instead, labelled.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pandas as pd

from ...core import readers
from ...core.atomic import command, lock, os_line, write_text
from ...results import costcurve, costtable, ranking, schedule, schemas
from ...results.files import STEPS_FILE, read_speed, read_speedup, read_steps, read_summary
from ...results.speedstats import answer_first, answers
from ...trees.policies import make_policy, policy_spec
from ..job import identity
from ..job.argv import check_out, fail
from ..job.launch import checked_job
from .engines import FORMATS, Choice, settings

KEYS = (
    "format",
    "out",
    "config_hash",
    "results_dir",
    "recommend",
    "nearest",
    "eagle_head",
)  # export's own keys, set without a +
PROFILE_VERSION = 1


def paths(choice: Choice) -> list[list[int]]:
    """The static shape's rank paths (a refusal for a tree drafted at run time)."""
    if policy_spec(choice.tree).shape is None:
        raise ValueError(
            f"format=paths: tree={choice.tree} is drafted at run time, not one static rank-path list; export a "
            "static shape (chain, binary, kary, specinfer, topk_wide, sequoia, medusa63, paths), or EAGLE-2 "
            "and chains with format=sglang / trtllm / vllm"
        )
    policy = make_policy(choice.tree, choice.budget, choice.params)
    return [list(p) for p in policy.paths()]  # type: ignore[attr-defined]


def profile(summary: pd.Series, steps: pd.DataFrame) -> dict:
    """The field's per-position acceptance figures of one configuration's steps: the
    acceptance-length histogram, marginal (P(accepted >= d)) and conditional (P(accepted >= d |
    accepted >= d - 1)) acceptance per position, the acceptance length AL = 1 + accepted per
    step token-weighted (over all steps) and per request (the mean of each prompt's), and the
    consistency checks as fields (AL = 1 + sum of marginals; marginals non-increasing)."""
    acc = steps.accepted.to_numpy(int)
    depth = int(max(acc.max(initial=0), steps.tree_depth.max()))
    hist = np.bincount(acc, minlength=depth + 1)
    marginal = [float((acc >= d).mean()) for d in range(1, depth + 1)]
    conditional = [m / prev if prev else None for m, prev in zip(marginal, [1.0, *marginal[:-1]])]
    al = 1 + float(acc.mean())
    per_request = steps.groupby("prompt_id").accepted.mean() + 1
    return {
        "profile_version": PROFILE_VERSION,
        "config_hash": str(summary.config_hash),
        **{
            k: _plain(summary[k]) for k in ("pair", "dataset", "tree", "tree_params", "budget", "verify", "temperature")
        },
        "n_requests": int(per_request.size),
        "n_steps": int(acc.size),
        "acceptance_length_histogram": hist.tolist(),
        "marginal_acceptance": marginal,
        "conditional_acceptance": conditional,
        "acceptance_length_token_weighted": al,
        "acceptance_length_per_request": float(per_request.mean()),
        "checks": {
            "al_equals_1_plus_sum_marginal": bool(np.isclose(al, 1 + sum(marginal))),
            "marginal_non_increasing": bool(all(b <= a + 1e-12 for a, b in zip(marginal, marginal[1:]))),
            "histogram_counts_steps": int(hist.sum()) == int(acc.size),
        },
    }


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v


def summary_row(results: str, chash: str) -> pd.Series:
    """The summary row of ``chash`` in ``results`` (one line when absent, or when the file is missing, cut,
    binary or lacks a column it needs: ``core.readers``)."""
    summary = read_summary(os.path.join(results, "summary.csv"))
    rows = summary[summary.config_hash.astype(str) == chash]
    if rows.empty:
        raise ValueError(
            f"config_hash={chash}: no such row in {results}/summary.csv; run the configuration and collect it first"
        )
    return rows.iloc[0]


def committed(results: str, chash: str) -> tuple[pd.Series, pd.DataFrame]:
    """The summary row and step rows of ``chash`` in ``results`` (one line when absent, or when a
    file is missing, cut, binary or lacks a column it needs: ``core.readers``)."""
    row = summary_row(results, chash)
    path = os.path.join(results, STEPS_FILE)
    steps = read_steps(path, STEP_COLUMNS)
    steps = steps[steps.config_hash.astype(str) == chash]
    for c in ("accepted", "tree_depth"):
        if not pd.api.types.is_numeric_dtype(steps[c]) or steps[c].isna().any() or (steps[c] < 0).any():
            raise readers.TableError(
                f"results_dir={path}: column {c} of config_hash={chash} holds a value that is not a count; "
                f"{schemas.COLLECT_FIX}"
            )
    return row, steps


STEP_COLUMNS = ("config_hash", "prompt_id", "accepted", "tree_depth")


def choose(argv: list[str], opts: dict) -> tuple[Choice, str | None]:
    """(what to export, its config hash where known) from ``config_hash`` or the overrides."""
    if opts.get("recommend") in ("true", "True"):
        opts["config_hash"] = recommended(
            opts["results_dir"], dict(a.lstrip("+").split("=", 1) for a in argv if "=" in a)
        )
    if opts.get("config_hash"):
        row, _ = committed(opts["results_dir"], opts["config_hash"])
        return Choice.of_row(row), str(opts["config_hash"])

    job = checked_job(argv)
    chash = None
    if opts["format"] == "profile" or job.tree.params.get("calib_pair_id") == "auto":
        job, _, chash = identity.bound(job)  # content fingerprints: no model loads
    return Choice.of_job(job), chash


def recommended(results: str, given: dict) -> str:
    """``recommend=true``: the config hash of what the report's TL;DR names for ``pair`` on ``dataset``
    at ``batch_size`` (default 1): the interleaved benchmark's answer where it timed them (results/
    speed.csv, ``results.speedstats``: the configuration shown among the ties; its replayed row), else the
    best projection in results/speedup.csv (``results.ranking.best``, the report's rule; rows of at least
    ``MIN_RANKED`` prompts where there are any; optionally of one ``tree``)."""
    if "pair" not in given or "dataset" not in given:
        raise ValueError("recommend=true needs pair=NAME and dataset=NAME (the recommendation's pair and data)")
    speed = read_speedup(os.path.join(results, "speedup.csv"), kind=schemas.SPEEDUP_ROWS)
    b = int(given.get("batch_size", 1))  # a replayed row stands for batch 1 (its batch_size is replay's)
    at_b = (speed.batch_size.astype(int) == b) & (speed.engine == "live") | ((speed.engine == "replay") & (b == 1))
    rows = speed[
        (speed.pair.astype(str) == given["pair"]) & (speed.dataset == given["dataset"]) & (speed.temperature == 0)
        & at_b & (speed.budget.astype(int) > 0)
    ]  # fmt: skip
    if "tree" in given:
        rows = rows[rows.tree == given["tree"]]
    big = rows[ranking.enough(rows)]  # the report ranks rows of >= MIN_RANKED prompts (the shown one's too)
    rows = big if len(big) else rows
    shown = measured_answer(results, given, b)
    if shown is not None and "tree" not in given:
        same = rows[(rows.tree == shown["tree"]) & (rows.budget.astype(int) == int(shown["budget"]))]
        same = same[(same.engine == "replay") & (same.dtype == shown["dtype"])]
        if len(same):
            return str(same.sort_values("max_new_tokens", ascending=False).iloc[0].config_hash)
    top = ranking.best(rows[rows.projected.notna()], "projected")
    if top is None:
        raise ValueError(f"recommend=true: no measured or projected speedup of {given['pair']} on {given['dataset']}")
    return str(top.config_hash)


def benchmark_rows(results: str, pair: str, dataset: str, batch: int) -> pd.DataFrame:
    """The interleaved benchmark's candidates of ``pair`` on ``dataset`` at ``batch`` (``speedstats.answers``:
    each key's pooled estimate, the number every page of the report prints), the TL;DR's machine first
    (``costcurve.run_order``: the machine whose curves the projections read); empty without speed.csv."""
    path = os.path.join(results, "speed.csv")
    if not os.path.isfile(path):
        return pd.DataFrame()
    a = answer_first(answers(read_speed(path)))
    a = a[(a.pair == pair) & (a.dataset == dataset) & (a.batch_size.astype(int) == batch)] if len(a) else a
    if a.empty:
        return a
    cpath = os.path.join(results, "costs.csv")
    costs = costtable.read(cpath) if os.path.isfile(cpath) else None
    key = costcurve.run_order(a, costcurve.machines(costcurve.one_per_curve(costs)), costcurve.machines(costs))
    return a.assign(_k=key).sort_values("_k", ascending=False, kind="mergesort").drop(columns="_k")


def measured_answer(results: str, given: dict, batch: int) -> dict | None:
    """The benchmark's shown configuration of the pair and dataset at ``batch`` (the TL;DR's run:
    ``report.measured.shown``), or None."""
    a = benchmark_rows(results, given["pair"], given["dataset"], batch)
    a = a[a.shown & a.controls_hold] if len(a) else a
    return a.iloc[0].to_dict() if len(a) else None


def measured_block(results: str, choice: Choice, dataset: str | None, batch: int) -> dict | None:
    """The exported configuration's measured speedup: the benchmark's pooled estimate of the same pair, dataset,
    tree, budget and batch size with its 95% paired interval (the report's number for that key), or None where
    the benchmark has not timed it."""
    if not dataset:
        return None
    a = benchmark_rows(results, choice.pair, dataset, batch)
    if choice.params or a.empty:
        return None  # the benchmark times each shape at its default parameters
    a = a[(a.tree == choice.tree) & (a.budget.astype(int) == choice.budget) & (a.tree_params.astype(str) == "{}")]
    if a.empty or a.iloc[0].lo != a.iloc[0].lo:
        return None
    r = a.iloc[0]
    return {"speedup": round(float(r.speedup), 4), "interval_95": [round(float(r.lo), 4), round(float(r.hi), 4)],
            "machine": str(r.machine), "dataset": dataset, "batch_size": batch, "runs": int(r.n_runs),
            "source": "results/speed.csv: the interleaved benchmark's pooled estimate (REPORT.md prints the same)"}  # fmt: skip


def split_argv(argv: list[str]) -> tuple[list[str], dict]:
    """(the study's overrides, export's own keys) of the command line."""
    opts: dict = {k: None for k in KEYS} | {"results_dir": "results"}
    rest = []
    for arg in argv:
        key, eq, value = arg.lstrip("+").partition("=")
        if eq and key in KEYS:
            opts[key] = "" if value in ("''", '""') else value  # Hydra's quoted empty string
        else:
            rest.append(arg)
    if opts["format"] not in (*FORMATS, "paths", "profile"):
        raise ValueError(
            f"format={opts['format']}: must be one of paths, profile, {', '.join(FORMATS)} (e.g. format=paths)"
        )
    for key in ("recommend", "nearest"):  # booleans: true or false, nothing else
        if opts[key] is not None and opts[key] not in ("true", "True", "false", "False"):
            raise ValueError(f"{key}={opts[key]}: must be true or false")
    head = opts["eagle_head"]
    if (
        head and head.startswith(("/", ".", "~")) and not os.path.isdir(os.path.expanduser(head))
    ):  # a path, not a hub id
        raise ValueError(f"eagle_head={head}: no such folder; give the EAGLE-3 head's folder or its hub id (ORG/NAME)")
    if os.path.exists(opts["results_dir"]) and not os.path.isdir(opts["results_dir"]):
        raise ValueError(f"results_dir={opts['results_dir']}: not a folder; give the folder of the collected results")
    if opts["out"] == "":
        raise ValueError("out=: an empty path; give a file path (e.g. out=tree.json) or leave out= out for stdout")
    return rest, opts


def export(argv: list[str]) -> tuple[object, dict]:
    """(the exported JSON object, export's own keys) for a command line (one-line ValueErrors)."""
    rest, opts = split_argv(argv)
    choice, chash = choose(rest, opts)
    if opts["format"] == "paths":
        return paths(choice), opts
    if opts["format"] == "profile":
        if chash is None:
            raise ValueError("format=profile needs the configuration's committed rows: give config_hash=H")
        row, steps = committed(opts["results_dir"], chash)
        if steps.empty:
            raise ValueError(f"config_hash={chash}: no step rows in {opts['results_dir']}; collect them first")
        return profile(row, steps), opts
    near = opts.get("nearest") in ("true", "True")
    sched = batch_schedule(opts["results_dir"], choice)
    out = settings(opts["format"], choice, paths, sched, opts.get("eagle_head"), near)
    if "nearest" not in out:  # a nearest configuration is not the one the benchmark timed
        given = dict(a.lstrip("+").split("=", 1) for a in rest if "=" in a)
        dataset = given.get("dataset") or (
            summary_row(opts["results_dir"], str(chash)).dataset if opts["config_hash"] else None
        )
        block = measured_block(opts["results_dir"], choice, dataset, int(given.get("batch_size", 1)))
        if block:
            out["measured"] = block
    return out, opts


def batch_schedule(results: str, choice: Choice) -> list[tuple[int, int]] | None:
    """[(batch size, draft length K), ...] of this pair: the interleaved benchmark's schedule
    (results/speed.csv, ``results.schedule.draft_lengths`` of the benchmark: each B's intervals), else the
    single live chains of the batch-size study (results/speedup.csv, of the live runs, labelled as single
    runs); None without either."""
    bench = os.path.join(results, "speed.csv")
    if os.path.isfile(bench):
        speed = read_speed(bench)
        found = schedule.draft_lengths(speed, choice.pair, schedule.BENCHMARK)
        if found:
            return found
    path = os.path.join(results, "speedup.csv")
    live = read_speedup(path) if os.path.exists(path) else None
    return schedule.draft_lengths(live, choice.pair, schedule.LIVE)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    command("export")  # its staged files are .tmp-export-*: a killed export's, cleaned by the next (``lock``)
    try:
        obj, opts = export(argv)
    except ValueError as e:
        print(f"specbench: error: {(str(e).strip().splitlines() or [type(e).__name__])[0]}", file=sys.stderr)
        sys.exit(2)
    text = json.dumps(obj, indent=None if opts["format"] == "paths" else 1) + "\n"
    if opts["out"]:
        check_out(opts["out"], "out")  # a folder, or a folder it cannot write: one line, exit 2
        try:
            with lock(os.path.dirname(os.path.abspath(opts["out"]))):
                write_text(opts["out"], text)
        except OSError as e:  # the disk refused the write: one line, nothing replaced
            fail(os_line(e, opts["out"], "out"), 1)
        print(f"specbench: wrote {opts['format']} -> {opts['out']}")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
