"""`python -m specbench.report`: results/*.csv -> results/figures/*.png + REPORT.md.

pandas + matplotlib only (never torch).  Deterministic: the same CSVs give a
byte-identical REPORT.md and PNGs.  Inputs (only summary.csv is required):
  results/summary.csv, results/steps.csv          (specbench.collect)
  results/attention.csv                           (specbench.attention_bench)
  results/acceptance_vector*.csv                  (rank, p[, pair, dataset])
  results/costs.csv                               (role=draft|target, n_tokens, seconds[, pair])
  results/environment.json                        (hardware, versions, models, commands)
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys

import pandas as pd

from . import analysis as A
from . import figures as F
from .results import atomic_write, read_csv

REQUIRED = ["config_hash", "pair", "tree", "budget", "verify", "dataset",
            "acceptance_rate", "acceptance_length", "tokens_per_step"]
DEFAULT_COMMANDS = ["bash run_all.sh", "python -m specbench.run -m sweep=reference",
                    "python -m specbench.attention_bench", "python -m specbench.collect",
                    "python -m specbench.report"]

METHOD = """\
**Trees.** A draft tree is stored as parent pointers in breadth-first order: node 0 is the root (the last
committed token, not yet in any KV cache) and nodes 1..N are the N draft tokens, N being the budget. A static
shape is a prefix-closed set of draft *rank paths* (Medusa style: the path `0.1` is the runner-up child of the
draft's top-1 token): `chain` follows the top-1 token, `binary` and `kary` expand the top-2 / top-`width`
children of every node, `topk_wide` continues each of the top-k first tokens as a chain, `specinfer` expands
by a per-depth factor list and `paths` takes an explicit rank-path list. Every shape lists its paths by
(depth, rank path) and the budget keeps the first N, so a budget always yields a tree of exactly N nodes.

**Drafters.** The model drafter grows the tree level by level with one draft forward per depth over the whole
frontier, using the draft's KV cache and the tree mask; it never re-runs the prefix. Children are chosen as the
verification mode requires: the draft's top-k (greedy, typical and the lossy rules), samples from q with
replacement (SpecInfer multi-step speculative sampling, `mss`) or without replacement (`sequoia`).

**Tree attention.** One mask function builds the additive mask from the parent pointers: each node attends to
the whole prefix, to itself and to its ancestors (its row is its parent's row plus itself, as in EAGLE), and
its position id is prefix length + depth. The target scores all N+1 nodes in one forward over its prefix
cache; afterwards both caches keep only the root and the accepted path.

**Verification.** Greedy accepts the longest path whose tokens equal the target's argmax and appends the
target's next token (the bonus). The lossless sampling modes (`speculative`, `mss`, `sequoia`) use rejection
sampling against the target distribution; the lossy rules (`typical` and the seed rules such as
p_target ≥ p_draft) accept more but drift from the target distribution, which `first_token_tv` measures.

**Engines.** `live` runs real speculative decoding and measures wall time. `replay` is exact for greedy
verification in float32: from one cached target greedy continuation and one teacher-forced draft forward per
prompt it derives every static shape and budget; n-gram, merged and dynamic (EAGLE-2) drafters run for real
against the cached continuation, with no target forward (tests check that both reproduce the live step records)."""

METRICS = """\
Per decode step (a row of `steps.csv`): `tree_size` = draft tokens N verified in the step; `accepted` = draft
tokens accepted, **excluding** the bonus/correction token; `emitted` = tokens appended (normally accepted + 1,
less only at EOS or the length limit).

Per configuration (a row of `summary.csv`):
- `acceptance_rate` = Σ accepted / Σ tree_size (verified tokens ÷ all draft tokens).
- `acceptance_length` = mean `accepted` per step — the bonus token is **not** counted.
- `tokens_per_step` = mean `emitted` per step — the bonus token **is** counted (Spec-Bench's τ).
- `alpha_d` = P(accepted ≥ d | accepted ≥ d−1 and tree_depth ≥ d), the per-depth conditional acceptance (EAGLE).
- `first_token_tv` = mean total-variation distance between the mode's first-token output distribution and
  the target's (zero for lossless modes).
- Brackets give 95% bootstrap confidence intervals, resampling prompts (seeded)."""

REFERENCES = """\
1. Y. Leviathan, M. Kalman, Y. Matias. *Fast Inference from Transformers via Speculative Decoding.* ICML 2023.
2. C. Chen, S. Borgeaud, G. Irving, J.-B. Lespiau, L. Sifre, J. Jumper. *Accelerating Large Language Model
   Decoding with Speculative Sampling.* arXiv:2302.01318, 2023.
3. X. Miao et al. *SpecInfer: Accelerating Large Language Model Serving with Tree-based Speculative Inference
   and Verification.* ASPLOS '24. doi:10.1145/3620666.3651335.
4. Z. Chen et al. *Sequoia: Scalable, Robust, and Hardware-aware Speculative Decoding.* arXiv:2402.12374, 2024.
5. Y. Li, F. Wei, C. Zhang, H. Zhang. *EAGLE-2: Faster Inference of Language Models with Dynamic Draft Trees.*
   EMNLP 2024.
6. T. Cai et al. *Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding Heads.* ICML 2024.
7. H. Xia et al. *Unlocking Efficiency in Large Language Model Inference: A Comprehensive Survey of
   Speculative Decoding* (Spec-Bench). Findings of ACL 2024."""


# --------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------
def _csv(path: str) -> pd.DataFrame | None:
    """A CSV with identifier columns kept as text (a hash like 0123e45 is not a number)."""
    return read_csv(path) if os.path.isfile(path) else None


def load(results: str) -> dict:
    path = os.path.join(results, "summary.csv")
    if not os.path.isfile(path):
        raise ValueError(f"{path} not found; run `python -m specbench.collect` first (or pass --results DIR)")
    summary = _csv(path)
    missing = [c for c in REQUIRED if c not in summary.columns]
    if missing:
        raise ValueError(f"{path} lacks column(s) {', '.join(missing)}; regenerate it with specbench.collect")
    vec_files = sorted(glob.glob(os.path.join(results, "acceptance_vector*.csv")))
    env_path = os.path.join(results, "environment.json")
    env = json.load(open(env_path, encoding="utf-8")) if os.path.isfile(env_path) else None
    return dict(summary=summary, steps=_csv(os.path.join(results, "steps.csv")),
                attention=_csv(os.path.join(results, "attention.csv")),
                costs=_csv(os.path.join(results, "costs.csv")),
                vector=pd.concat([_csv(f) for f in vec_files], ignore_index=True) if vec_files else None,
                env=env)


# --------------------------------------------------------------------------
# markdown helpers
# --------------------------------------------------------------------------
def md_table(rows: list[list], headers: list[str]) -> str:
    def cell(x):
        return str(x).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(x) for x in r) + " |" for r in rows]
    return "\n".join(lines)


def with_ci(r, metric: str, digits: int = 3) -> str:
    v = A.fmt(r.get(metric), digits)
    lo, hi = r.get(f"{metric}_lo"), r.get(f"{metric}_hi")
    if lo is None or hi is None or lo != lo or hi != hi:
        return v
    return f"{v} [{A.fmt(lo, digits)}, {A.fmt(hi, digits)}]"


def _bullets(lines: list[str], empty: str) -> str:
    return "\n".join(f"- {s}" for s in lines) if lines else f"_{empty}_"


def _figure(out: list[str], made, rel: str) -> None:
    if made:
        name, caption = made
        out.append(f"![{name}]({rel}/{name})\n\n*{caption}*\n")


# --------------------------------------------------------------------------
# sections
# --------------------------------------------------------------------------
def setup_section(data: dict, df: pd.DataFrame) -> str:
    out = []
    env = data["env"]
    if env:
        items = [(k, v) for k, v in sorted(env.items()) if k != "commands"]
        out.append(md_table([[k, v if isinstance(v, str) else json.dumps(v, sort_keys=True)]
                             for k, v in items], ["item", "value"]))
    else:
        out.append("_results/environment.json is absent: hardware and library versions were not recorded._")
    summary = data["summary"]
    pairs = summary.drop_duplicates("pair").sort_values("pair")
    if {"draft", "target"} <= set(summary.columns):
        out.append("\n**Pairs.**\n\n" + md_table([[r.pair, r.draft, r.target] for r in pairs.itertuples()],
                                                 ["pair", "draft", "target"]))
    ds = summary.groupby("dataset", sort=True)
    rows = [[d, int(g.n_prompts.max()) if "n_prompts" in g else "n/a", len(g)] for d, g in ds]
    out.append("\n**Datasets.**\n\n" + md_table(rows, ["dataset", "prompts (max per config)", "configurations"]))
    common = [c for c in ("max_new_tokens", "dtype", "device", "seed") if c in summary]
    if common:
        vals = [[c, ", ".join(map(str, sorted(summary[c].astype(str).unique())))] for c in common]
        out.append("\n**Run settings.**\n\n" + md_table(vals, ["setting", "values"]))
    shapes = df.drop_duplicates("shape")[["shape", "tree", "tree_params"]]
    out.append("\n**Shapes and parameters.**\n\n" + md_table(
        [[r.shape, r.tree, r.tree_params] for r in shapes.itertuples()], ["label", "tree", "tree_params"]))
    cmds = (env or {}).get("commands") or DEFAULT_COMMANDS
    out.append("\n**Commands.**\n\n```\n" + "\n".join(cmds) + "\n```")
    return "\n".join(out)


def results_section(df: pd.DataFrame, summary: pd.DataFrame) -> str:
    out = []
    has_tv = "first_token_tv" in df and df.first_token_tv.notna().any()
    headers = ["config_hash", "dataset", "shape", "N", "engine", "prompts", "steps", "acceptance_rate",
               "acceptance_length", "tokens_per_step"] + (["first_token_tv"] if has_tv else [])
    for (pair, mode), g in df.groupby(["pair", "mode"], sort=True):
        rows = []
        for r in g.to_dict("records"):
            row = [r["config_hash"], r["dataset"], r["shape"], int(r["budget"]), r.get("engine", ""),
                   A.fmt(r.get("n_prompts")), A.fmt(r.get("n_steps")), with_ci(r, "acceptance_rate"),
                   with_ci(r, "acceptance_length", 2), with_ci(r, "tokens_per_step", 2)]
            rows.append(row + ([A.fmt(r.get("first_token_tv"))] if has_tv else []))
        out.append(f"### {pair} · {mode}\n\n" + md_table(rows, headers) + "\n")
    base = A.baselines(summary)
    if not base.empty:
        rows = [[r["config_hash"], r["pair"], r["dataset"], r.get("engine", ""),
                 A.fmt(r.get("tokens_per_s"), 2)] for r in base.sort_values(["pair", "dataset", "config_hash"]).to_dict("records")]
        out.append("### Baseline (plain target decoding)\n\n" +
                   md_table(rows, ["config_hash", "pair", "dataset", "engine", "tokens_per_s"]) + "\n")
    return "\n".join(out)


ATTN_KEY = {"batch": 1, "kv_len": 1024, "tree_size": 64}
ATTN_FIGS = ("attention_time_bfloat16.png", "attention_time_float32.png",
             "attention_speedup_bfloat16.png", "attention_speedup_float32.png")


def attention_section(att: pd.DataFrame | None, fig_dir: str, rel: str) -> str:
    """The tree-attention benchmark, summarised: the headline point, the fused/sequential
    ratio by tree size, the real-model view and the benchmark's own figures."""
    if att is None or att.empty or "impl" not in att or "median_s" not in att:
        return "_results/attention.csv is absent: run `python -m specbench.attention_bench`._"
    out = []
    kern = att[att.level == "kernel"] if "level" in att else att
    wide = kern.pivot_table(index=["shape", "dtype", "batch", "kv_len", "tree_size"], columns="impl",
                            values="median_s", aggfunc="median").reset_index()
    if "bw_frac" in kern:
        bw = kern[kern.impl == "fused"].groupby(["shape", "dtype", "batch", "kv_len", "tree_size"]).bw_frac.median()
        wide = wide.merge(bw.rename("fused_bw_frac").reset_index(), how="left")
    impls = [c for c in ("fused", "sequential", "flex", "flex_compiled") if c in wide]
    key = wide[(wide.batch == ATTN_KEY["batch"]) & (wide.kv_len == ATTN_KEY["kv_len"])
               & (wide.tree_size == ATTN_KEY["tree_size"])]
    if len(key) and "fused" in key:
        rows = []
        for r in key.sort_values(["shape", "dtype"]).itertuples(index=False):
            d = r._asdict()
            rows.append([d["shape"], d["dtype"]] + [A.fmt(1000 * d[c]) for c in impls]
                        + [A.fmt(d[c] / d["fused"]) for c in impls if c != "fused"]
                        + [A.fmt(d.get("fused_bw_frac", float("nan")))])
        out.append(f"**Headline point** (batch {ATTN_KEY['batch']}, KV length {ATTN_KEY['kv_len']}, "
                   f"tree size {ATTN_KEY['tree_size']}; median ms, ratios = time ÷ fused time, "
                   "fused_bw_frac = bytes-moved ÷ bandwidth bound over the fused time):")
        out.append(md_table(rows, ["shape", "dtype"] + [f"{c} ms" for c in impls]
                            + [f"{c}/fused" for c in impls if c != "fused"] + ["fused_bw_frac"]))
        best = key.assign(r=key.sequential / key.fused).sort_values("r").iloc[-1]
        out.append(f"At this point the largest fused speedup over per-branch attention is "
                   f"{best.r:.2f}× ({best['shape']}, {best['dtype']}); chains and top-k-wide trees have "
                   "few branches, so per-branch attention recomputes little there.")
    plane = wide[(wide.batch == 1) & (wide.kv_len == ATTN_KEY["kv_len"]) & (wide["shape"] == "binary")]
    if len(plane) and {"fused", "sequential"} <= set(plane):
        t = plane.pivot_table(index="tree_size", columns="dtype", values="sequential") / \
            plane.pivot_table(index="tree_size", columns="dtype", values="fused")
        out.append("**Sequential ÷ fused by tree size** (binary trees, batch 1, KV length "
                   f"{ATTN_KEY['kv_len']}):")
        out.append(md_table([[int(i)] + [A.fmt(v) for v in row] for i, row in t.iterrows()],
                            ["tree size"] + list(t.columns)))
    model = att[att.level == "model"] if "level" in att else att.iloc[0:0]
    if len(model):
        rows = [[r["shape"], r["impl"], int(r["tree_size"]), int(r["kv_len"]), A.fmt(r["median_s"])]
                for _, r in model.sort_values(["shape", "impl"]).iterrows()]
        out.append("**Model-level view** (one real 1.5B target forward over the whole tree vs one "
                   "forward per root-to-leaf branch, seconds):")
        out.append(md_table(rows, ["shape", "impl", "tree size", "KV length", "median s"]))
    _figure(out, F.fig_attention(kern, fig_dir), rel)
    for name in ATTN_FIGS:
        if os.path.exists(os.path.join(fig_dir, name)):
            out.append(f"![{name}]({rel}/{name})")
    return "\n\n".join(out)


def speedup_section(df, data, fig_dir, rel) -> tuple[str, pd.DataFrame]:
    proj = A.projected_speedup(df, data["steps"], data["costs"])
    meas = A.measured_speedup(data["summary"], df)
    out = ["Projected speedup of a configuration = tokens_per_step × t_target(1) / (draft_cost + verify_cost), "
           "where t_target(n) and t_draft(n) are the median measured forward times with n query tokens on this "
           "machine (results/costs.csv, linearly interpolated), verify_cost = t_target(N+1) (root plus N draft "
           "nodes in one forward) and draft_cost = D × t_draft(⌈N/D⌉) (one draft forward per depth over a "
           "frontier of about N/D nodes; D = the config's deepest tree in steps.csv). It is the expected "
           "ratio of plain-decoding time per token to speculative time per token; prefill is ignored. "
           "Measured speedup = live tokens_per_s ÷ the plain-decoding baseline row's tokens_per_s."]
    if proj.empty:
        out.append("_results/costs.csv is absent (or lacks role, n_tokens, seconds), so no projected speedup "
                   "is computed._")
    else:
        m = proj.merge(meas, on="config_hash", how="left") if not meas.empty else proj.assign(measured=float("nan"))
        rows = [[r.config_hash, r.pair, r.dataset, r.mode, r.shape, r.budget, A.fmt(r.tokens_per_step, 2), r.depth,
                 A.fmt(r.draft_cost * 1e3, 2), A.fmt(r.verify_cost * 1e3, 2), A.fmt(r.projected, 2),
                 A.fmt(r.measured, 2)] for r in m.itertuples(index=False)]
        out.append(md_table(rows, ["config_hash", "pair", "dataset", "mode", "shape", "N", "tokens_per_step", "D",
                                   "draft_cost ms", "verify_cost ms", "projected ×", "measured ×"]))
        _figure(out, F.fig_speedup(proj, fig_dir), rel)
    if meas.empty:
        out.append("_No live run has a matching plain-decoding baseline row, so no measured speedup is shown._")
    elif proj.empty:
        rows = [[r.config_hash, A.fmt(r.tokens_per_s, 2), A.fmt(r.baseline_tokens_per_s, 2), A.fmt(r.measured, 2)]
                for r in meas.itertuples(index=False)]
        out.append(md_table(rows, ["config_hash", "tokens_per_s", "baseline tokens_per_s", "measured ×"]))
    return "\n\n".join(out), proj


def build(data: dict, fig_dir: str, rel: str) -> str:
    os.makedirs(fig_dir, exist_ok=True)
    summary = data["summary"]
    df = A.prepare(summary)
    lossy = A.lossy_table(df)
    md = ["# specbench report", "",
          "_Generated by `python -m specbench.report` from results/*.csv; do not edit by hand._", "",
          "## Method", "", METHOD, "", "## Setup", "", setup_section(data, df), "",
          "## Metric definitions", "", METRICS, "",
          f"## Results\n\nEvery configuration in results/summary.csv ({len(summary)} rows), by pair and "
          "mode (verify rule and temperature).\n", results_section(df, summary), "## Figures", ""]
    for made in (F.fig_metric_vs_budget(df, fig_dir, "tokens_per_step"),
                 F.fig_metric_vs_budget(df, fig_dir, "acceptance_rate"),
                 F.fig_alpha(df, fig_dir), F.fig_heatmap(df, fig_dir),
                 F.fig_acceptance_vector(data["vector"], data["steps"], fig_dir),
                 F.fig_by_dataset(df, fig_dir), F.fig_lossy(lossy, fig_dir)):
        _figure(md, made, rel)
    md += ["## Tree attention", "", attention_section(data["attention"], fig_dir, rel), ""]
    speed, proj = speedup_section(df, data, fig_dir, rel)
    md += ["## Projected speedup", "", speed, ""]
    md += ["## Analysis", "",
           "### Best shape per budget", "", _bullets(A.best_shape_sentences(df), "no configurations"), "",
           "### Where extra budget stops paying", "",
           f"A budget step stops paying when it adds less than {A.MARGINAL_GAIN:.0%} tokens_per_step.", "",
           _bullets(A.saturation_sentences(df), "no shape ran at two or more budgets"), "",
           "### Verification modes", "", _bullets(A.mode_sentences(df), "only one mode ran"), "",
           "### What the lossy rules give up", "", _bullets(A.lossy_sentences(lossy), "no lossy mode ran"), ""]
    if not lossy.empty:
        rows = [[r.config_hash, r.pair, r.dataset, r.mode, r.shape, r.budget, A.fmt(r.acceptance_rate),
                 A.fmt(r.gain_vs_lossless), r.lossless_ref or "n/a", A.fmt(r.gain_vs_greedy), A.fmt(r.first_token_tv)]
                for r in lossy.itertuples(index=False)]
        md += [md_table(rows, ["config_hash", "pair", "dataset", "mode", "shape", "N", "acceptance_rate",
                               "gain vs lossless", "lossless ref", "gain vs greedy", "first_token_tv"]), ""]
    md += ["### Dataset dependence", "", _bullets(A.dataset_sentences(df), "only one dataset ran"), "",
           "### Projected speedup", "", _bullets(A.speedup_sentences(proj), "no cost measurements"), "",
           "## References", "", REFERENCES, ""]
    return "\n".join(md)


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m specbench.report", description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results", help="folder with summary.csv etc. (default results)")
    ap.add_argument("--out", default="REPORT.md", help="report path (default REPORT.md)")
    ap.add_argument("--figures", default=None, help="figure folder (default RESULTS/figures)")
    args = ap.parse_args(argv)
    fig_dir = args.figures or os.path.join(args.results, "figures")
    try:
        data = load(args.results)
        rel = os.path.relpath(fig_dir, os.path.dirname(os.path.abspath(args.out))).replace(os.sep, "/")
        text = build(data, fig_dir, rel)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    atomic_write(args.out, lambda tmp: _write_text(tmp, text))
    print(f"wrote {args.out} and {fig_dir}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
