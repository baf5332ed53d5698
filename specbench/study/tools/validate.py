"""`python -m specbench.study.tools.validate`: which configurations to time live, from the projections.

The cost model ranks nothing until it has been checked against live timing on the same
machine.  This picks, per pair and dataset, each static shape at its projected best
budget and the overall top ``--top`` configurations (any tree), from the replayed greedy
study in results/speedup.csv (written by ``python -m specbench.report``), and prints one
line of ``specbench.run`` overrides per job, plain decoding (``tree=none``) first, for
run_all.sh to run with ``sweep=reference_validate`` (batch 1, live, the same prompts)::

    python -m specbench.study.tools.validate --pairs qwen_coder,smollm_qwen --datasets humaneval,mt_bench

Only the pairs and datasets asked for; one line naming the fix (exit 2) for a missing, cut, binary
or garbled speedup.csv (``results.schemas.SPEEDUP``: its columns and values), a pair or dataset with no
projection.  No model loads.
"""

from __future__ import annotations

import sys

import pandas as pd

from ...core.args import Parser, number
from ...results import ranking, schedule, speedstats
from ...results.columns import cost_aware, tree_label
from ...results.files import read_speedup
from ...results.plan import SCHEDULE_CHAINS
from ...trees.policies import policy_spec

CHAINS = SCHEDULE_CHAINS  # a schedule run's chains (the benchmarks themselves: results.plan.schedule_jobs)
BINARY = 3  # the binary tree's budget where no projection ranks one


def static(tree: str) -> bool:
    """A static shape: its trees are one rank-path list per budget."""
    return policy_spec(tree).shape is not None


def projected(speed: pd.DataFrame, pair: str, dataset: str) -> pd.DataFrame:
    """The replayed greedy rows with a projection of the longest study (``max_new_tokens``) of this
    pair and dataset, best first (``results.ranking.order`` by the projection: rows of at least
    ``MIN_RANKED`` prompts first); a ValueError naming the fix where there is none."""
    g = speed[
        (speed.pair == pair)
        & (speed.dataset == dataset)
        & (speed.engine == "replay")
        & (speed.verify == "greedy")
        & (speed.temperature.astype(float) == 0)
        & speed.projected.notna()
    ]
    g = g[g.max_new_tokens == g.max_new_tokens.max()] if len(g) else g
    if g.empty:
        raise ValueError(f"no projected replay row for pair={pair} dataset={dataset} (run its greedy grid first)")
    return ranking.order(g, "projected")


def addressable(g: pd.DataFrame) -> pd.DataFrame:
    """The rows a (tree, budget) pair re-runs: a cost-aware Sequoia row is left out (``tree=sequoia
    tree.budget=64`` alone would run the DP's 64-node tree, not the small tree its cost curves picked);
    the static tree it built is in the grid under its own name."""
    if "tree_params" not in g:
        return g
    return g[[not cost_aware(t, p) for t, p in zip(g.tree, g.tree_params)]]


def picks(speed: pd.DataFrame, pair: str, dataset: str, top: int) -> list[tuple[str, int]]:
    """(tree, budget) of each static shape's best projection and of the top ``top`` overall,
    from the replayed greedy rows of the longest study (``max_new_tokens``) of this pair and dataset."""
    g = addressable(projected(speed, pair, dataset))
    chosen = [(t, int(b)) for t, b in zip(g.tree, g.budget)][:top]
    for tree, s in g[g.tree.map(static)].groupby("tree", sort=True):
        chosen.append((tree, int(s.budget.iloc[0])))
    return list(dict.fromkeys(chosen))


def speed_picks(speed: pd.DataFrame, pair: str, dataset: str, most: int = 6) -> list[tuple[str, int]]:
    """The interleaved benchmark's candidates (``study.tools.speed``), at most ``most``: the projected top
    three, the budgets either side of the top's in its shape's grid (so a measured optimum is
    bracketed), then each other shape's best whose projected interval overlaps the top's.  Rows
    costed on a derived basis and cost-aware Sequoia rows (``addressable``) are left out, and configurations
    that build the same trees (equal tokens per step and projection: binary N=3 and medusa63 N=3) are taken once.
    A merged drafter's tree is named with its inner shape (``merged:binary``, as ``launch.compose_tree`` reads it)."""
    g = addressable(projected(speed, pair, dataset))
    g = g.assign(tree=[tree_label(t, p) for t, p in zip(g.tree, g.get("tree_params", pd.Series("", index=g.index)))])
    if "cost_basis" in g:  # a derived basis is never ranked (an n-gram pair's rows are costed on ``lookup``)
        g = g[g.cost_basis.astype(str) != "derived"]
    if g.empty:
        raise ValueError(f"pair={pair} dataset={dataset}: every projection is costed on a derived basis (re-run it)")
    whole = g
    g = g.assign(_same=g.tokens_per_step.astype(float).round(6).astype(str) + g.projected.round(6).astype(str))
    g = g.drop_duplicates("_same")
    top = g.iloc[0]
    chosen = [(t, int(b)) for t, b in zip(g.tree, g.budget)][:3]
    grid = sorted(whole[whole.tree == top.tree].budget.astype(int))
    i = grid.index(int(top.budget))
    chosen += [(str(top.tree), b) for b in grid[max(0, i - 1) : i + 2] if b != int(top.budget)]
    lo = float(top.projected_lo) if top.projected_lo == top.projected_lo else float(top.projected)
    near = g[(g.tree != top.tree) & (g.projected_hi.astype(float) >= lo)].drop_duplicates("tree")
    chosen += [(t, int(b)) for t, b in zip(near.tree, near.budget)]
    return list(dict.fromkeys(chosen))[:most]


def answer_tree(bench: pd.DataFrame | None, pair: str, dataset: str, dtype: str, machine_id=None):
    """(tree, budget) the benchmark shows at batch 1 for ``pair`` on ``dataset`` (its answer runs, whose
    controls hold; the same machine and dtype first, then the newest), or None."""
    if bench is None or bench.empty:
        return None
    b = bench[(schedule.rosters(bench) == schedule.ANSWER) & (bench.pair == pair) & (bench.dataset == dataset)]
    b = b[b.batch_size.astype(int) == 1]
    a = speedstats.answers(b) if len(b) else pd.DataFrame()
    if a.empty:
        return None
    a = a[a.shown & a.controls_hold]
    if a.empty:
        return None
    a = a.assign(_here=(a.machine_id == machine_id).astype(int), _dt=(a.dtype == dtype).astype(int))
    r = a.sort_values(["_here", "_dt", "run_id"], kind="mergesort").iloc[-1]
    return str(r.tree), int(r.budget)


def projected_binary(speedup: pd.DataFrame | None, pair: str, dataset: str) -> int:
    """The budget of the binary tree projected best for the pair and dataset (``results.ranking.best``),
    else ``BINARY``."""
    if speedup is None or speedup.empty or "projected" not in speedup:
        return BINARY
    g = speedup[(speedup.pair == pair) & (speedup.dataset == dataset) & (speedup.tree == "binary")]
    top = ranking.best(g[(g.engine == "replay") & g.projected.notna()], "projected")
    return BINARY if top is None else int(top.budget)


def schedule_picks(bench, speedup, pair: str, dataset: str, dtype: str, machine_id=None) -> list[tuple[str, int]]:
    """A schedule run's trees (``results.schedule``'s benchmark source), the first twinned: the batch-1
    answer's (the benchmark's, ``answer_tree``, else the projected top, ``speed_picks``), chain N ∈
    ``CHAINS``, one binary tree (``projected_binary``); each once."""
    first = answer_tree(bench, pair, dataset, dtype, machine_id)
    if first is None and speedup is not None and not speedup.empty:
        try:
            first = speed_picks(speedup, pair, dataset)[0]
        except (ValueError, KeyError, IndexError):
            first = None
    out = [first] if first else []
    out += [("chain", n) for n in CHAINS] + [("binary", projected_binary(speedup, pair, dataset))]
    return list(dict.fromkeys(out))


def jobs(speed: pd.DataFrame, pairs: list[str], datasets: list[str], top: int) -> list[str]:
    out = []
    for pair in pairs:
        for ds in datasets:
            out.append(f"pair={pair} dataset={ds} tree=none")
            out += [f"pair={pair} dataset={ds} tree={t} tree.budget={b}" for t, b in picks(speed, pair, ds, top)]
    return out


def named(flag: str, text: str, have: pd.Series, path: str) -> list[str]:
    """The comma-separated names of ``flag``, each one ``have`` holds (a ValueError naming the flag, the file
    and the names it holds otherwise: an empty list, a typo)."""
    given = [w.strip() for w in text.split(",") if w.strip()]
    known = sorted(set(have.dropna().astype(str)))
    unknown = [w for w in given if w not in known]
    if not given or unknown:
        what = "names none" if not given else f"{', '.join(unknown)} not in {path}"
        raise ValueError(f"{flag}={text}: {what}; give comma-separated names it holds: {', '.join(known)}")
    return given


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="python -m specbench.study.tools.validate", description=__doc__.splitlines()[0])
    ap.add_argument("--speedup", default="results/speedup.csv", help="the report's speedup.csv")
    ap.add_argument("--pairs", default="qwen_coder,smollm_qwen,ngram_qwen")
    ap.add_argument("--datasets", default="humaneval,mt_bench")
    ap.add_argument(
        "--top", type=number(int, 0), default=3, help="the overall best this many, besides each static shape's"
    )
    args = ap.parse_args(argv)
    try:
        speed = read_speedup(args.speedup, "--speedup")  # cut, binary, garbled
        pairs = named("--pairs", args.pairs, speed.pair, args.speedup)
        lines = jobs(speed, pairs, named("--datasets", args.datasets, speed.dataset, args.speedup), args.top)
    except ValueError as e:
        print(f"specbench.study.tools.validate: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
