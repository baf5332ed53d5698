"""`python -m specbench.report`: results/*.csv -> results/figures/*.png + REPORT.md.

pandas + matplotlib only (never torch).  Deterministic: the same CSVs give a
byte-identical REPORT.md and PNGs.  The answer comes first (headline, modes,
speedup, losslessness), the full per-configuration table last (appendix); a
section with no data says why in one line.  Inputs (only summary.csv is required):
  results/summary.csv, results/steps.csv          (python -m specbench.collect)
  results/outputs.jsonl                           (python -m specbench.collect: config_hash, prompt_id, token_ids, text)
  results/lossless_check.csv                      (pair, verify, temperature, prefix_id, n_draws, chi2_p, tv)
  results/attention.csv                           (python -m specbench.attention_bench)
  results/acceptance_vector*.csv                  (rank, p[, pair, dataset])
  results/costs.csv                               (role=draft|target, n_tokens, seconds[, pair])
  results/gap_to_optimum.csv                      (python -m specbench.collect, with acceptance vectors)
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
from . import compare as C
from . import figures as F
from . import optimum as O
from . import sections as R
from . import speedup as S
from .sections import bullets, md_table
from .text import METHOD, METRICS, REFERENCES
from ..study.results import atomic_write, read_csv

REQUIRED = ["config_hash", "pair", "tree", "budget", "verify", "dataset",
            "acceptance_rate", "acceptance_length", "tokens_per_step"]
DEFAULT_COMMANDS = ["bash run_all.sh", "python -m specbench.run -m sweep=reference",
                    "python -m specbench.attention_bench", "python -m specbench.collect",
                    "python -m specbench.report"]

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
        raise ValueError(f"{path} lacks column(s) {', '.join(missing)}; regenerate it with `python -m specbench.collect`")
    vec_files = sorted(glob.glob(os.path.join(results, "acceptance_vector*.csv")))
    env_path = os.path.join(results, "environment.json")
    env = json.load(open(env_path, encoding="utf-8")) if os.path.isfile(env_path) else None
    labels = A.pair_labels(summary)            # a pair is its pair_id; its name only a label
    summary = A.relabel_pairs(summary, labels)
    by_hash = dict(zip(summary.config_hash.astype(str), summary.pair))
    return dict(summary=summary, steps=A.relabel_pairs(_csv(os.path.join(results, "steps.csv")), labels, by_hash),
                outputs=C.read_outputs(os.path.join(results, "outputs.jsonl")),
                lossless_check=A.relabel_pairs(_csv(os.path.join(results, "lossless_check.csv")), labels),
                attention=_csv(os.path.join(results, "attention.csv")),
                costs=_csv(os.path.join(results, "costs.csv")),
                gap=_csv(os.path.join(results, "gap_to_optimum.csv")),
                divergence=_csv(os.path.join(results, "continuation_divergence.csv")),
                margins=_csv(os.path.join(results, "divergence_margins.csv")),
                vector=pd.concat([_csv(f) for f in vec_files], ignore_index=True) if vec_files else None,
                env=env)


# --------------------------------------------------------------------------
# markdown helpers
# --------------------------------------------------------------------------
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
    out.append("\n**Replay continuations.** " + divergence_sentence(data.get("divergence")))
    cmds = (env or {}).get("commands") or DEFAULT_COMMANDS
    out.append("\n**Commands.**\n\n```\n" + "\n".join(cmds) + "\n```")
    return "\n".join(out)


def divergence_sentence(div: pd.DataFrame | None) -> str:
    """How often batched float32 continuations (replay's default) differ from batch-1 ones."""
    head = ("Replay computes the target's float32 continuations `batch_size` prompts per forward; batched "
            "kernels round differently, so at an exact near-tie a batched continuation can take the other token "
            "(`exact_continuations=true` computes them one prompt at a time, bit-exact with batch-1 live decoding).")
    if div is None or div.empty:
        return head + " _results/continuation_divergence.csv is absent: `scripts/bench_batch.py` measures it._"
    parts = [f"{int(r.diverged)} of {int(r.n_prompts)} {r.dataset} continuations of {int(r.max_new_tokens)} tokens "
             f"at batch {int(r.batch_size)} differ from batch-1 ({int(r.tokens_before_divergence)} of {int(r.tokens)} "
             f"tokens before the first divergence{'; ' + r.divergences if r.diverged else ''}; batched "
             f"{float(r.speedup):.2f}× faster)" for r in div.itertuples()]
    return head + " Measured by `scripts/bench_batch.py` on the real target: " + "; ".join(parts) + "."


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
    R.figure(out, F.fig_attention(kern, fig_dir), rel)
    for name in ATTN_FIGS:
        if os.path.exists(os.path.join(fig_dir, name)):
            out.append(f"![{name}]({rel}/{name})")
    return "\n\n".join(out)


def build(data: dict, fig_dir: str, rel: str) -> str:
    os.makedirs(fig_dir, exist_ok=True)
    summary, steps = data["summary"], data["steps"]
    df = A.prepare(summary)
    sums = C.prompt_sums(steps)
    pair = A.main_pair(df)
    head, chain_diffs, gains = A.headline(df, sums), A.vs_chain(df, sums), A.mode_gains(df, sums)
    speed = S.speedup_table(df, summary, steps, data["costs"])
    lossless = S.lossless_table(df, summary, data["outputs"])
    md = ["# specbench report", "",
          "_Generated by `python -m specbench.report` from results/*.csv; do not edit by hand._", "",
          "## Headline: best shape per budget", "", R.headline_section(df, sums, head, chain_diffs, pair, fig_dir, rel), "",
          "## Verification modes at T>0", "", R.modes_section(gains, fig_dir, rel), "",
          "## Measured and projected speedup", "", R.speedup_section(speed, summary, pair, fig_dir, rel), "",
          "## Losslessness on the real pair", "",
          R.lossless_section(lossless, data["lossless_check"], bool(data["outputs"]), not A.baselines(summary).empty,
                             data["margins"]), "",
          "## Where extra budget stops paying", "",
          f"Per pair, dataset and shape (greedy, on the group's full prompt set), a budget step stops paying "
          f"when it adds less than {A.MARGINAL_GAIN:.0%} tokens_per_step.", "",
          bullets(A.saturation_sentences(df, sums), "no shape ran at two or more budgets on the same prompts"), ""]
    vec = F.fig_acceptance_vector(steps, fig_dir)
    alpha = F.fig_alpha(A.main_groups(df, sums, pair), pair, fig_dir)
    if vec or alpha:
        md += ["## Acceptance by depth and rank", ""]
        R.figure(md, alpha, rel)
        R.figure(md, vec, rel)
    md += ["## Gap to the optimum", "", O.section(data.get("gap"), df, sums, fig_dir, rel), ""]
    md += ["## Method", "", METHOD, "", "## Setup", "", setup_section(data, df), "",
           "## Metric definitions", "", METRICS, "",
           "## Tree attention", "", attention_section(data["attention"], fig_dir, rel), "",
           "## Appendix A: every configuration", "", R.appendix_configs(df, summary), "",
           "## Appendix B: projected speedup of every configuration", "", R.appendix_speedup(speed), "",
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
