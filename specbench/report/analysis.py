"""Every number REPORT.md states, computed from results/*.csv (pandas only, no torch).

Labels and groups, the paired differences to chain and the mode comparison at T>0 (paired gains
over the token-level rules); the sentences on them are in the findings table
(`specbench.report.findings`).  Comparisons go through `compare.paired_difference`, so two
configurations are only ever compared on the prompts both ran, within one
comparison group (`GROUP`: pair, dataset, dtype, max_new_tokens) and one
temperature.  Speedup and losslessness tables live in `specbench.report.speedup`.
Functions return empty frames when their inputs are missing, so the report
omits a section (and says why) rather than printing an empty one.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ..results.columns import DESCRIBED, cost_aware, tree_params
from . import compare

BASELINE_TREES = ("none",)
GROUP = ["pair", "dataset", "dtype", "max_new_tokens"]
# A mode's role is read from its rows (study.job.describe): ``baseline_of`` names the kind of tree
# ("chain" or "tree") whose token-level reference it is (every other rule at T>0 is compared with it),
# or "lossy" (the rule each lossy rule is compared with on the same trees); ``token_level_on`` the kinds
# on which it is a token-level rule, the baseline of a rule that verified the same drafted trees.
LOSSY_BASELINE = "lossy"


def fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    return f"{float(x):.{digits}f}"


def fmt_ci(v, lo, hi, digits: int = 2) -> str:
    if lo is None or hi is None or lo != lo or hi != hi:
        return fmt(v, digits)
    return f"{fmt(v, digits)} [{fmt(lo, digits)}, {fmt(hi, digits)}]"


def fmt_diff(p: compare.Paired | None, digits: int = 2) -> str:
    if p is None:
        return "n/a"
    return f"{p.diff:+.{digits}f} [{p.lo:+.{digits}f}, {p.hi:+.{digits}f}]" + (
        " (includes 0)" if p.includes_zero else ""
    )


def pair_keys(df: pd.DataFrame) -> pd.Series:
    """A row's pair identity: its ``pair_id`` (draft + target content), else (rows collected
    before pair ids) its pair name."""
    name = df["pair"].astype(str)
    pid = df["pair_id"]  # NaN where not recorded (results.optional): the name
    return pid.where(pid.notna() & (pid.astype(str) != ""), name).astype(str)


def pair_labels(df: pd.DataFrame) -> dict[str, str]:
    """{pair identity: label}: the identity's first name.  Where one name has several identities
    that each ran one dtype of their own (the same models converted to float32 and to bfloat16),
    the name stays (the dtype column tells them apart); where two identities of a name share a
    dtype (a model folder changed in place, one config name for two pairs) each gets its id
    appended, so the report never merges two pairs nor splits one."""
    key = pair_keys(df)
    first = {k: min(g) for k, g in df["pair"].astype(str).groupby(key, sort=True)}
    dtypes = (df["dtype"].astype(str) if "dtype" in df else pd.Series("?", index=df.index)).groupby(key).agg(set)
    out = {}
    for name in sorted(set(first.values())):
        ids = [k for k, n in first.items() if n == name]
        seen = [d for k in ids for d in dtypes[k]]
        apart = len(ids) == 1 or len(seen) == len(set(seen))
        out.update({k: name if apart else f"{name} [{k}]" for k in ids})
    return out


def relabel_pairs(df: pd.DataFrame | None, labels: dict[str, str], by_hash: dict | None = None):
    """``df`` with its ``pair`` column set from ``labels`` (through ``pair_id``, or through the
    config hash with ``by_hash`` for files without one, such as steps.csv)."""
    if df is None or not labels:
        return df
    out = df.copy()
    out["pair_name"] = out["pair"]  # the config name stays: files keyed by it (costs.csv) are read by it
    if by_hash is not None and out.pair_id.isna().all():  # a steps.csv from before pair ids
        out["pair"] = out["config_hash"].astype(str).map(by_hash).fillna(out["pair"])
    else:
        out["pair"] = pair_keys(out).map(labels).fillna(out["pair"])
    return out


# parameters that say where a shape comes from, not what it is: a named path list
# (medusa63) is its name; sequoia's vector is calibrated per dataset
LABEL_SKIP = ("name", "budget", "vector", "max_children")


def params_of(cell) -> dict:
    """A JSON parameters cell as a dict ({} for an empty, garbled or non-object cell: ``results.columns.tree_params``)."""
    return tree_params(cell)


def shape_label(tree: str, params) -> str:
    """``kary(width=3)``: the shape name plus its shape-defining parameters; a cost-aware Sequoia
    ``sequoia(cost-aware)`` (its budget and depth are bounds: ``built_label`` names the tree it built)."""
    p = params_of(params)
    if cost_aware(tree, p):
        return f"{tree}(cost-aware)"
    items = [
        f"{k}={v}"
        for k, v in sorted(p.items())
        if v is not None
        and k not in LABEL_SKIP
        and not k.startswith("calib_")
        and not (k == "paths" and tree != "paths")
    ]
    return f"{tree}({', '.join(items)})" if items else str(tree)


def built_trees(steps: pd.DataFrame | None) -> pd.DataFrame:
    """Per configuration (index config_hash): the tree it built, ``built_nodes`` (mean draft tokens
    per step) and ``built_depth`` (its deepest step), from steps.csv."""
    if steps is None or steps.empty or not {"tree_size", "tree_depth"} <= set(steps.columns):
        return pd.DataFrame(columns=["built_nodes", "built_depth"])
    g = steps.groupby("config_hash", sort=True)
    return pd.DataFrame({"built_nodes": g.tree_size.mean().astype(float), "built_depth": g.tree_depth.max()})


def with_built(df: pd.DataFrame, steps: pd.DataFrame | None) -> pd.DataFrame:
    """``df`` with ``built_nodes`` / ``built_depth`` (``built_trees``) and ``tree_budget``: the budget a
    row is grouped and deduplicated by, its built size for a cost-aware Sequoia that built one tree
    size in every step (its budget is only the DP's bound), else its budget."""
    b = built_trees(steps)
    out = df.assign(built_nodes=df.config_hash.map(b.built_nodes), built_depth=df.config_hash.map(b.built_depth))
    aware = np.array([cost_aware(t, p) for t, p in zip(out.tree, out.tree_params)], bool)
    whole = out.built_nodes.notna() & (out.built_nodes.round() == out.built_nodes)
    out["tree_budget"] = np.where(aware & whole, out.built_nodes.fillna(0), out.budget).astype(int)
    return out


def built_label(r: dict) -> str | None:
    """'3 nodes, depth 2 (N ≤ 64)' for a cost-aware Sequoia row with its built tree, else None."""
    n, d = r.get("built_nodes"), r.get("built_depth")
    if not cost_aware(r.get("tree"), r.get("tree_params")) or n is None or n != n:
        return None
    return f"{n:.3g} nodes, depth {int(d or 0)} (N ≤ {int(r['budget'])})"


def cross_shapes(trees, params, resolved, labels) -> list[str]:
    """The static shape each row fills: its own label, or, for a merged tree, its model part's shape
    with that shape's parameters, defaults filled in (the row's ``tree_resolved``; rows without one:
    the parameters the merged tree was given)."""
    return [_model_part(p, r) if t == "merged" else lab for t, p, r, lab in zip(trees, params, resolved, labels)]


def _model_part(params, resolved) -> str:
    if isinstance(resolved, str) and resolved:
        p = json.loads(resolved)
        return shape_label(str(p.get("shape", "chain")), json.dumps(p.get("model", {})))
    p = tree_params(params, strict=True)
    model = {k: v for k, v in p.items() if k not in ("ngram_share", "shape")}
    return shape_label(str(p.get("shape", "chain")), json.dumps(model))


def kind(tree) -> str:
    """The kind of drafted tree a role names: "chain" for tree=chain, else "tree"."""
    return "chain" if tree == "chain" else "tree"


def has_role(cell, what: str) -> bool:
    """Whether a ``baseline_of`` / ``token_level_on`` cell (comma-separated) names ``what``."""
    return isinstance(cell, str) and what in cell.split(",")


def with_role(df: pd.DataFrame, column: str, what: str) -> pd.DataFrame:
    """The rows whose ``column`` (``baseline_of`` or ``token_level_on``) names ``what``."""
    return df[[has_role(c, what) for c in df[column]]]


def is_reference(baseline_of, tree) -> bool:
    """Whether a row's mode is the token-level reference on its kind of tree."""
    return has_role(baseline_of, kind(tree))


def role_names(df: pd.DataFrame) -> dict[str, str]:
    """{"chain" / "tree" / LOSSY_BASELINE: the mode(s) the rows declare the baseline of it}, for prose."""
    out = {}
    for what in ("chain", "tree", LOSSY_BASELINE):
        names = sorted(set(with_role(df, "baseline_of", what).verify.astype(str)))
        out[what] = " / ".join(names) or f"its {what} baseline"
    return out


def mode_label(verify: str, temperature) -> str:
    t = float(temperature) if temperature == temperature else 0.0
    return f"{verify} T={t:g}"


def _with_defaults(summary: pd.DataFrame) -> pd.DataFrame:
    df = summary.copy()
    df["pair_key"] = df.get("pair_key", pd.Series(index=df.index, dtype=object)).fillna(df.get("config_hash"))
    df["pair_role"] = df.get("pair_role", pd.Series(index=df.index, dtype=object)).fillna("decode")
    for col, default in (
        ("tree_params", "{}"),
        ("temperature", 0.0),
        ("dataset", "?"),
        ("pair", "?"),
        ("verify", "?"),
        ("engine", "?"),
        ("dtype", "?"),
        ("max_new_tokens", 0),
        *((c, "") for c in DESCRIBED),
    ):
        if col not in df.columns:
            df[col] = default
    df["temperature"] = df.temperature.astype(float)
    df["shape"] = [shape_label(t, p) for t, p in zip(df.tree, df.tree_params)]
    df["mode"] = [mode_label(v, t) for v, t in zip(df.verify, df.temperature)]
    return df


def prepare(summary: pd.DataFrame) -> pd.DataFrame:
    """Summary rows with label columns (shape, mode), in a fixed order; baseline rows dropped."""
    df = _with_defaults(summary)
    df = df[~df.tree.isin(BASELINE_TREES) & (df.budget > 0)]
    keys = [c for c in ("pair", "dataset", "mode", "shape", "budget", "engine", "config_hash") if c in df]
    return df.sort_values(keys, kind="mergesort").reset_index(drop=True)


def baselines(summary: pd.DataFrame) -> pd.DataFrame:
    """Plain-decoding rows (tree none, budget 0), with label columns."""
    if summary.columns.empty:  # no summary at all (a context built without one)
        return summary
    df = _with_defaults(summary)
    return df[df.tree.isin(BASELINE_TREES) | (df.budget <= 0)].sort_values("config_hash", kind="mergesort")


def main_pair(df: pd.DataFrame) -> str | None:
    """The pair with the most greedy configurations (ties: first by name)."""
    g = df[df.temperature == 0]
    if g.empty:
        return None
    counts = g.groupby("pair").size()
    return str(sorted(counts.index, key=lambda p: (-counts[p], p))[0])


def prompt_key(sums: pd.DataFrame, row) -> frozenset | tuple:
    """The set of prompts a config ran (steps.csv), or its prompt count when steps.csv is absent."""
    got = compare.prompts_of(sums, row["config_hash"])
    return got if got else ("n_prompts", row.get("n_prompts"))


def main_set(df: pd.DataFrame, sums: pd.DataFrame) -> pd.DataFrame:
    """The rows of one comparison group that ran its most common prompt set (ties: the larger set)."""
    keys = [prompt_key(sums, r) for r in df.to_dict("records")]
    counts: dict = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    best = max(counts, key=lambda k: (counts[k], len(k) if isinstance(k, frozenset) else 0, str(sorted(k, key=str))))
    return df[[k == best for k in keys]]


def _pair_or_none(sums, a, b) -> compare.Paired | None:
    try:
        return compare.paired_difference(sums, a, b)
    except compare.Incomparable:
        return None


def groups(df: pd.DataFrame, keys=GROUP):
    """``df`` grouped by ``keys``, sorted; no groups for an empty frame (which may lack the columns)."""
    return df.groupby(keys, sort=True) if len(df) else []


def greedy_groups(df: pd.DataFrame, main_only: bool = False) -> list:
    """(group key, rows) for the T=0 configurations, one comparison group at a time; with main_only,
    per (pair, dataset) only the group with the most configurations (the sweep, not the live set)."""
    g = df[df.temperature == 0]
    groups = list(g.groupby(GROUP, sort=True)) if len(g) else []
    if not main_only:
        return groups
    best: dict = {}
    for k, rows in groups:
        if k[:2] not in best or len(rows) > len(best[k[:2]][1]):
            best[k[:2]] = (k, rows)
    return [best[k] for k in sorted(best)]


def main_groups(df: pd.DataFrame, sums: pd.DataFrame, pair: str | None) -> list[tuple[str, pd.DataFrame]]:
    """(dataset, rows) for one pair at T=0: per dataset its main comparison group on its main prompt set."""
    return [(k[1], main_set(g, sums)) for k, g in greedy_groups(df, main_only=True) if k[0] == pair]


def versus(df: pd.DataFrame, sums: pd.DataFrame, select, reference) -> pd.DataFrame:
    """Paired difference of every row chosen by select(rows) to its reference row (reference(rows, row)
    returns the matching reference rows of the same group), on their shared prompts."""
    rows = []
    for r in select(df).to_dict("records"):
        ref = reference(df, r)
        if ref.empty:
            continue
        ref = ref.sort_values("config_hash", kind="mergesort").iloc[0].to_dict()
        p = _pair_or_none(sums, r, ref)
        if p is not None:
            rows.append(
                dict(
                    r,
                    ref_hash=ref["config_hash"],
                    ref_mode=ref["mode"],
                    ref_shape=ref["shape"],
                    paired=p,
                    diff=p.diff,
                    lo=p.lo,
                    hi=p.hi,
                    n_shared=p.n_prompts,
                )
            )
    return pd.DataFrame(rows)


def _same(df: pd.DataFrame, r: dict, keys) -> pd.DataFrame:
    m = np.ones(len(df), bool)
    for k in keys:
        m &= (df[k] == r[k]).to_numpy()
    return df[m]


def vs_chain(df: pd.DataFrame, sums: pd.DataFrame) -> pd.DataFrame:
    """Every T=0 non-chain configuration against chain at the same budget (same group and mode)."""
    keys = GROUP + ["mode", "budget"]
    chains = df[df.tree == "chain"]
    by_key = dict(tuple(chains.groupby(keys, sort=False))) if len(chains) else {}  # grouped once, not per row
    return versus(
        df,
        sums,
        lambda d: d[(d.temperature == 0) & (d.tree != "chain")],
        lambda d, r: by_key.get(tuple(r[k] for k in keys), chains.iloc[:0]),
    )


def _reference_row(d: pd.DataFrame, r: dict, keys) -> pd.DataFrame:
    """The token-level row a T>0 row is compared with: on the same drafted trees when one of
    another token-level mode (``token_level_on``) shares its pair_key (the reference first, then a
    paired re-verification: it shares the row's random numbers too), else the reference rule's own
    decode (``baseline_of`` the row's kind of tree) with the same keys."""
    k = kind(r["tree"])
    level = with_role(d, "token_level_on", k)
    same = _same(level[level.verify != r["verify"]], r, keys)
    same = same[same.pair_key == r["pair_key"]]
    same = same.assign(other=[not has_role(b, k) for b in same.baseline_of])
    if len(same):
        order = ["other", "pair_role", "config_hash"]
        return same.sort_values(order, ascending=[True, False, True], kind="mergesort").iloc[:1]
    ref = _same(with_role(d, "baseline_of", k), r, keys)
    return ref[ref.pair_role == "decode"]


def _controls(d: pd.DataFrame) -> np.ndarray:
    """Paired rows that re-verify their decode's own mode: references for the other paired modes,
    never compared themselves (the decode row stands for that mode)."""
    decode_mode = dict(zip(d.config_hash[d.pair_role == "decode"], d.verify[d.pair_role == "decode"]))
    return ((d.pair_role == "paired") & (d.verify == d.pair_key.map(decode_mode))).to_numpy()


def mode_gains(df: pd.DataFrame, sums: pd.DataFrame) -> pd.DataFrame:
    """Every T>0 configuration against the token-level rule (speculative on a chain, mss on a tree;
    on the same drafted chains mss, which is speculative sampling there, serves too) on the same
    shape, budget, temperature and group: the paired gain in tokens_per_step.  Paired controls
    (``_controls``) are references only.
    ``same_trees``: both rows verified the same drafted trees (verify.paired_with); ``exact_gain``:
    then the difference of their mean exact expected accepted per step (``expected_accepted``, the
    law of each verdict on each tree: no verifier noise), else NaN."""
    keys = GROUP + ["tree", "tree_params", "budget", "temperature"]

    def select(d):
        hot = d[(d.temperature > 0) & ~_controls(d)]
        return hot[[not is_reference(b, t) for b, t in zip(hot.baseline_of, hot.tree)]]

    out = versus(df, sums, select, lambda d, r: _reference_row(d, r, keys))
    if len(out):
        key_of = dict(zip(df.config_hash, df.pair_key))
        out["same_trees"] = [key_of.get(h) == k for h, k in zip(out.ref_hash, out.pair_key)]
        ea = dict(zip(df.config_hash, df.expected_accepted))  # NaN where not recorded (results.optional)
        out["exact_gain"] = [
            ea.get(a, np.nan) - ea.get(b, np.nan) if same else np.nan
            for a, b, same in zip(out.config_hash, out.ref_hash, out.same_trees)
        ]
    return out


def is_lossless(v) -> bool:
    return str(v).strip().lower() in ("true", "1", "1.0")
