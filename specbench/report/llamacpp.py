"""llama.cpp in the report (#84 item 9): its interleaved benchmark (results/speed.csv rows ``engine=llamacpp``),
beside specbench's plain decoding, projection and acceptance; nothing where no such row exists.

One function per number, read by the TL;DR's table (``brief``), speed.md's *llama.cpp* section (``section``)
and the figure (``fig_acceptance``):

* ``keys``: per llama.cpp run at batch 1 (machine, pair, dataset): the fastest candidate with an interval, its
  paired speedup and 95% interval (``t.measured``: ``speedstats.answers``, the number speed.md's measured
  table shows), the candidates that tie it, whether it pays (else the answer is plain decoding) and the controls;
* ``plain``: llama.cpp's plain tokens/s ÷ specbench's on the same prompts and machine at equal max_new_tokens
  (``results.engines.plain_ratio``);
* ``projection``: specbench's projection per candidate from its replay of the candidate's rule and llama.cpp's
  cost curve, with its error against the measured (``results.llamaproject.compare``); the pick is the highest;
* ``candidates``: every candidate's measured speedup, its accepted draft tokens per target step (accepted ÷
  steps) and per drafted token (``speedstats.describe``), specbench's chain N = n_max accepted per step on the
  same pair and dataset (``llamaproject.chain_row``), and the share of its decodes token-identical to llama.cpp's
  own plain decoding of the same prompt and round (``same_tokens``).
"""

from __future__ import annotations

import pandas as pd

from ..results import engines, llamaproject, speedstats
from ..results.columns import tree_params
from . import figures, llamaagree, machines, palette
from .context import Ctx, Inputs, Tables, once
from .llamaagree import LLAMA_LOOKS, setting
from .markdown import fig_links, span, table

ENGINE = llamaproject.ENGINE
FIG = "llamacpp_acceptance.png"


def runs(t: Tables) -> pd.DataFrame:
    """``t.measured``'s llama.cpp rows of answer runs at batch 1, each with its n_max and p_min."""
    m = t.measured
    if m is None or m.empty:  # speedstats.answers' rows name their engine
        return pd.DataFrame()
    m = speedstats.answer_first(m[(m.engine == ENGINE) & (m.batch_size.astype(int) == 1)])
    params = [tree_params(p) for p in m.tree_params]
    return m.assign(n_max=[int(p.get("n_max", 0)) for p in params], p_min=[float(p.get("p_min", 0)) for p in params])


def keys(t: Tables) -> pd.DataFrame:
    """One row per llama.cpp run (module docstring): its fastest candidate (``machines.fastest``), ``ties`` (the
    others tying it), ``pays``, ``controls_hold``, the machine's class; sorted by machine, pair and dataset."""
    m = runs(t)
    if m.empty:
        return m
    out = []
    for _run, g in m.groupby("run_id", sort=True):
        top = machines.fastest(g).to_dict()
        top["ties"] = int((g.tie & (g.candidate != top["candidate"])).sum())
        top["cls"] = machines.machine_class(top["machine"])
        out.append(top)
    return pd.DataFrame(out).sort_values(["cls", "pair", "dataset"], kind="mergesort").reset_index(drop=True)


def plain(bench: pd.DataFrame | None, r: dict) -> dict | None:
    """The plain ratio (``engines.plain_ratio``) of r's pair, dataset and machine: at r's max_new_tokens where
    both engines ran it, else at another length both ran (``at_other``), else None; of several specbench dtypes
    the one of the most prompts."""
    ratio = engines.plain_ratio(bench) if bench is not None else pd.DataFrame()
    if ratio.empty:
        return None
    g = ratio[
        (ratio.pair == r["pair"])
        & (ratio.dataset == r["dataset"])
        & (ratio.machine_id.astype(str) == str(r["machine_id"]))
    ]
    if g.empty:
        return None
    g = g.assign(_same=g.max_new_tokens.astype(int) == int(r["max_new_tokens"]))
    row = g.sort_values(["_same", "prompts", "max_new_tokens"], ascending=False, kind="mergesort").iloc[0].to_dict()
    return {**row, "at_other": not row["_same"]}


_compare = once(llamaproject.compare)  # computed once: the TL;DR and the section read it


def projection(data: Inputs) -> pd.DataFrame:
    """specbench's projection per llama.cpp candidate beside its measured speedup (``llamaproject.compare``)."""
    return _compare(data.bench, data.accept_llamacpp, data.costs_llamacpp)


def picked(proj: pd.DataFrame, r: dict) -> dict | None:
    """The candidate specbench projects fastest for r's pair, dataset and machine, with its error, or None."""
    if proj.empty:
        return None
    g = proj[(proj.pair == r["pair"]) & (proj.dataset == r["dataset"]) & (proj.machine == r["machine"])]
    g = g[g.projected.notna()]
    return None if g.empty else g.sort_values(["projected", "n_max"], ascending=[False, True]).iloc[0].to_dict()


def candidates(t: Tables, data: Inputs) -> pd.DataFrame:
    """Every llama.cpp candidate of ``runs`` with its acceptance per step and per drafted token, specbench's chain
    N = n_max acceptance per step (with its interval) and the token-identical share (module docstring)."""
    m = runs(t)
    if m.empty:
        return m
    bench = speedstats.with_engine(data.bench)
    bench = bench[bench.engine == ENGINE]
    out = []
    for r in m.to_dict("records"):
        chain = llamaproject.chain_row(data.summary, r["pair"], r["dataset"], r["n_max"])
        mine = bench[(bench.candidate == r["candidate"]) & (bench.pair == r["pair"]) & (bench.dataset == r["dataset"])]
        mine = mine[
            (mine.machine_id.astype(str) == str(r["machine_id"])) & (mine.max_new_tokens == r["max_new_tokens"])
        ]
        same = mine.same_tokens.astype(str).str.lower().eq("true")
        out.append({**r, "same": int(same.sum()), "decodes": len(same),
                    **{f"chain_{k}": (float("nan") if chain is None else float(chain[f"acceptance_length{k}"]))
                       for k in ("", "_lo", "_hi")}})  # fmt: skip
    return pd.DataFrame(out).sort_values(["machine", "pair", "dataset", "n_max", "p_min"], kind="mergesort")


def interval(r) -> str:
    """'0.87× [0.80, 0.95]', without the interval where none is claimed."""
    ci = f" [{r['lo']:.2f}, {r['hi']:.2f}]" if r["lo"] == r["lo"] else ""
    return f"{r['speedup']:.2f}×{ci}"


def best_cell(r) -> str:
    """'4/0.75 +1: 1.12× [1.05, 1.20]' where it pays, else 'plain decoding (best 4/0.75 +2: 0.87× [...])'."""
    cell = f"{setting(r)} +{r['ties']}: {interval(r)}"
    if r["lo"] != r["lo"]:
        return f"{cell}, under {speedstats.MIN_UNITS} prompts: not ranked"
    return cell if r["pays"] else f"plain decoding (best {cell})"


def plain_cell(bench: pd.DataFrame | None, r: dict, brief: bool = False) -> str:
    """'13.0 / 5.1 tok/s = 2.55× [2.41, 2.70] at 64 tokens' (the length where r ran another), or why none;
    ``brief``: '13.0 / 5.1 = 2.55×' (the TL;DR's lead names the unit and the length; the interval: speed.md)."""
    p = plain(bench, r)
    if p is None:
        return f"no specbench plain run at {int(r['max_new_tokens'])} tokens"
    ci = f" [{p['lo']:.2f}, {p['hi']:.2f}]" if p["lo"] == p["lo"] and not brief else ""
    at = f" at {int(p['max_new_tokens'])} tokens" if p["at_other"] and not brief else ""
    unit = "" if brief else " tok/s"
    return f"{p[f'{ENGINE}_tok_s']:.1f} / {p[f'{speedstats.SPECBENCH}_tok_s']:.1f}{unit} = {p['ratio']:.2f}×{ci}{at}"


def plain_lengths(bench: pd.DataFrame | None, k: pd.DataFrame) -> str:
    """The TL;DR lead's clause on the plain ratio's lengths: '; plain at 64 tokens' where a ratio was
    formed at another length than the benchmark's."""
    ps = [p for r in k.to_dict("records") if (p := plain(bench, r)) is not None]
    lengths = sorted({int(p["max_new_tokens"]) for p in ps})
    other = any(p["at_other"] for p in ps)
    return f"; plain at {' and '.join(map(str, lengths))} tokens" if other else ""


def pick_cell(proj: pd.DataFrame, r: dict) -> str:
    """'4/0 1.10× (error +26%)': specbench's projected pick and its error against the measured, or 'none'."""
    p = picked(proj, r)
    return "none" if p is None else f"{setting(p)} {p['projected']:.2f}× ({p['error']:+.0%})"


def controls(r) -> str:
    return "hold" if r["controls_hold"] else "fail"


def brief(ctx: Ctx) -> str:
    """The TL;DR's llama.cpp table with its one-line lead, or '' without llama.cpp benchmark rows."""
    t, data = ctx.t, ctx.data
    k = keys(t)
    if k.empty:
        return ""
    proj, bench = projection(data), data.bench
    cols = [("machine", lambda r: r["cls"])] * (k.cls.nunique() > 1) + [
        ("pair/dataset", lambda r: f"{r['pair']}/{r['dataset']}"),
        ("fastest n_max/p_min +ties [95% CI]", best_cell),
        ("plain tok/s, llama.cpp / specbench", lambda r: plain_cell(bench, r, brief=True)),
        ("projected pick (error)", lambda r: pick_cell(proj, r)),
        ("replay agrees", lambda r: llamaagree.cell(data, r)),
        ("controls", controls),
    ]
    where = f" on {k.cls.iloc[0]}" if k.cls.nunique() == 1 else ""
    lead = (
        f"**llama.cpp** (GGUF){where}, batch 1, {span(k.n_prompts, '.0f')} prompts × "
        f"{span(k.max_new_tokens, '.0f')} tokens{plain_lengths(bench, k)} (speed.md):"
    )
    return lead + "\n\n" + table(k.to_dict("records"), cols)


def rate(r) -> str:
    v = r.get("timed_acceptance_rate")
    return "–" if v is None or v != v else f"{v:.2f}"


def chain_cell(r) -> str:
    """specbench's chain N = n_max accepted draft tokens per step with its interval, or why none."""
    if r["chain_"] != r["chain_"]:
        return f"no chain N={int(r['n_max'])} replay"
    ci = f" [{r['chain__lo']:.2f}, {r['chain__hi']:.2f}]" if r["chain__lo"] == r["chain__lo"] else ""
    return f"{r['chain_']:.2f}{ci}"


def projected_cell(proj: pd.DataFrame, r: dict) -> str:
    """One candidate's projection '0.62–0.66× [0.58, 0.70] (−5%)' (the drafted bracket's ends where they differ,
    the interval over prompts where claimed, the error of their mean), or why none."""
    g = (
        proj[(proj.pair == r["pair"]) & (proj.dataset == r["dataset"]) & (proj.machine == r["machine"])]
        if len(proj)
        else proj
    )
    g = g[g.candidate == r["candidate"]] if len(g) else g
    if g.empty or g.projected.isna().all():
        return "none (no curve or replay)"
    p = g.iloc[0]
    ends = f"{p.projected_lo:.2f}–{p.projected_hi:.2f}" if f"{p.projected_lo:.2f}" != f"{p.projected_hi:.2f}" else ""
    ci = f" [{p.ci_lo:.2f}, {p.ci_hi:.2f}]" if p.ci_lo == p.ci_lo else ""
    return f"{ends or f'{p.projected:.2f}'}×{ci} ({p.error:+.0%})"


def projection_line(t: Tables, proj: pd.DataFrame) -> str:
    """'specbench's projection against the measured speedup: error −1% to +12% (median +5%) over 8 candidates; its
    pick is the measured fastest or ties it in 2 of 2 pair/datasets.', or '' where nothing is projected."""
    p = proj[proj.projected.notna()] if len(proj) else proj
    if p.empty:
        return ""
    m, hits = runs(t), []
    for r in keys(t).to_dict("records"):
        pick = picked(proj, r)
        g = m[(m.run_id == r["run_id"]) & m.tie] if pick is not None else m.iloc[:0]
        hits.append(pick is not None and (pick["candidate"] == r["candidate"] or pick["candidate"] in set(g.candidate)))
    e = p.error
    scale = f"{span(p.replay_prompts, '.0f')} prompts × {span(p.replay_tokens, '.0f')} tokens"
    bench = f"{span(p.prompts, '.0f')} × {span(p.tokens, '.0f')}"
    same = (p.replay_prompts == p.prompts).all() and (p.replay_tokens == p.tokens).all()
    return (
        f"specbench's projection against the measured speedup: error {e.min():+.0%} to {e.max():+.0%} (median "
        f"{e.median():+.0%}) over {len(p)} candidates; its pick is the measured fastest or ties it in {sum(hits)} of "
        f"{len(hits)} pair/datasets. Projected from the acceptance run's {scale}, measured on {bench}"
        + ("." if same else ": other prompts and lengths, so not a paired comparison.")
    )


def plain_lines(k: pd.DataFrame, bench: pd.DataFrame | None) -> list[str]:
    """Per key, both engines' plain tokens/s and their ratio (``plain_cell``), with the prompts paired."""
    out = []
    for r in k.to_dict("records"):
        p = plain(bench, r)
        n = f" on the same {int(p['prompts'])} prompts (specbench {p['dtype']})" if p is not None else ""
        out.append(f"{r['pair']}/{r['dataset']} on {r['cls']}: {plain_cell(bench, r)}{n}.")
    return out


def section(ctx: Ctx) -> str:
    """speed.md's llama.cpp section: every candidate (``candidates``), the plain ratio and the figure; '' without
    llama.cpp benchmark rows."""
    t, data = ctx.t, ctx.data
    c = candidates(t, data)
    if c.empty:
        return ""
    proj = projection(data)
    cols = [
        ("machine · pair/dataset", lambda r: f"{machines.machine_class(r['machine'])} · {r['pair']}/{r['dataset']}"),
        ("n_max/p_min", setting),
        ("measured [95% CI]", interval),
        ("ties the fastest", lambda r: "yes" if r["tie"] else "no"),
        ("accepted per step", lambda r: f"{r['timed_acceptance_length']:.2f}"),
        ("accepted ÷ drafted", rate),
        ("specbench chain N=n_max, accepted per step [95% CI]", chain_cell),
        ("specbench's projection (error)", lambda r: projected_cell(proj, r)),
        ("token-identical to plain", lambda r: f"{r['same']} of {r['decodes']}"),
    ]
    lead = (
        "llama.cpp's `llama-server` as the engine (`python -m specbench.study.tools.speed_llamacpp`): plain decoding "
        "and each candidate (`--spec-draft-n-max` n_max, `--spec-draft-p-min` p_min) on a server of its own, "
        "interleaved as the benchmark interleaves; speedup over llama.cpp's own plain decoding with its paired 95% "
        "interval. *Accepted per step*: accepted draft tokens per target step (accepted ÷ steps), beside specbench's "
        "replay of the chain of n_max on the same pair and dataset; *projection*: specbench's replay of the candidate's "
        "own rule (n_max, p_min) on the prompts of the acceptance comparison below, priced on llama.cpp's cost curve "
        "(results/costs.csv, engine llamacpp); a range where the replay brackets how long a chain ran past a "
        "rejected token, its 95% interval over prompts, and the error of the range's middle; *token-identical*: "
        "decodes equal to llama.cpp's plain decoding of the same prompt and round."
    )
    plain_text = "Plain decoding, both engines (tokens/s on the prompts both decoded, same machine and length):"
    lines = "\n".join(f"- {s}" for s in plain_lines(keys(t), data.bench))
    parts = [lead, table(c.to_dict("records"), cols), projection_line(t, proj), plain_text + "\n\n" + lines]
    return "\n\n".join([x for x in parts if x] + fig_links(ctx, FIG))


def fig_acceptance(t: Tables, data: Inputs) -> figures.Fig | None:
    """Accepted draft tokens per step against n_max: llama.cpp's candidates (one series per p_min) beside
    specbench's chain N = n_max replay (its 95% interval), one panel per machine, pair and dataset (at most
    ``figures.MAX_PANELS``); None without llama.cpp benchmark rows."""
    c = candidates(t, data) if data.bench is not None else pd.DataFrame()
    if c.empty:
        return None
    c = c.assign(panel=[f"{r.pair} · {r.dataset}" for r in c.itertuples()])
    if c.machine.nunique() > 1:
        c = c.assign(panel=[f"{machines.machine_class(m).split(' (')[0]}\n{p}" for m, p in zip(c.machine, c.panel)])
    groups = list(c.groupby("panel", sort=True))[: figures.MAX_PANELS]
    p_mins = sorted(set(c.p_min))
    chain = palette.SHAPES["chain"]

    def draw(ax, g):
        for p, s in g.groupby("p_min", sort=True):
            col, mk = LLAMA_LOOKS[p_mins.index(p) % len(LLAMA_LOOKS)]
            s = s.sort_values("n_max")
            ax.plot(
                s.n_max, s.timed_acceptance_length, color=col, marker=mk, ms=7, lw=1, label=f"llama.cpp, p_min {p:g}"
            )
        ch = g.drop_duplicates("n_max").dropna(subset=["chain_"]).sort_values("n_max")
        if len(ch):
            ax.errorbar(ch.n_max, ch.chain_, yerr=figures.ci(ch.chain_, ch.chain__lo, ch.chain__hi), color=chain[0],
                        marker=chain[1], ms=7, lw=1, ls="--", capsize=3, label="specbench chain N = n_max (replay)")  # fmt: skip
        figures.budget_axis(ax, sorted(set(g.n_max)))
        ax.set(xlabel="n_max (draft tokens)", ylabel="accepted per step")

    return figures.page_panels(
        [(k, g) for k, g in groups],
        FIG,
        draw,
        "Accepted draft tokens per target step (bonus not counted) against the draft length n_max: llama.cpp's "
        "timed candidates (accepted ÷ steps from its server's counters; one series per p_min, where a draft stops "
        "below that probability) and specbench's replay of the chain of n_max tokens on the same pair and dataset "
        "(bars: 95% interval over prompts). One panel per pair and dataset.",
        cols=min(3, len(groups)),
        h=3.0,
        ncol=2,
    )
