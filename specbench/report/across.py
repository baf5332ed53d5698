"""The report's comparisons across pairs and across rules: every pair at one shape and budget on the
prompts all of them ran (``cross_pair``), and each rule against its baseline with the baseline named
(``modes``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import analysis, compare


def cross_pair(df: pd.DataFrame, sums: pd.DataFrame) -> pd.DataFrame:
    """Greedy tokens_per_step and acceptance rate of every pair at each (shape, budget) that two or
    more pairs ran, per dataset, dtype and max_new_tokens, on the prompts all of them ran."""
    g = df[df.temperature == 0]
    # a drafter that only fills a static shape (merged n-gram + model) is compared at that shape
    g = g.assign(cross_shape=analysis.cross_shapes(g.tree, g.tree_params, g.tree_resolved, g["shape"]))
    rows = []
    for _key, grp in g.groupby(["dataset", "dtype", "max_new_tokens", "cross_shape", "budget"], sort=True):
        if grp.pair.nunique() < 2:
            continue
        grp = grp.drop_duplicates("pair")
        sets = [set(compare.prompts_of(sums, h)) for h in grp.config_hash]
        shared = set.intersection(*sets) if sets else set()
        if not shared:
            continue
        for r in grp.to_dict("records"):
            t = sums.loc[r["config_hash"]].loc[sorted(shared)]
            rows.append(
                dict(
                    r,
                    n_shared=len(shared),
                    tps_shared=t.emitted.sum() / t.steps.sum(),
                    rate_shared=t.accepted.sum() / t.drafted.sum() if t.drafted.sum() else math.nan,
                    len_shared=t.accepted.sum() / t.steps.sum(),
                )
            )
    return pd.DataFrame(rows)


def sibling_orders(df: pd.DataFrame) -> dict:
    """{config_hash: the order a rule tries siblings in} from a `sibling_order` column or a
    `sibling_order` key of `verify_params` (mss: random as in SpecInfer, or storage order)."""
    if df.sibling_order.notna().any():  # both NaN where not recorded (results.optional)
        return {h: o for h, o in zip(df.config_hash, df.sibling_order) if isinstance(o, str) and o}
    got = {h: analysis.params_of(p).get("sibling_order") for h, p in zip(df.config_hash, df.verify_params)}
    return {h: o for h, o in got.items() if o}


def modes(df: pd.DataFrame, sums: pd.DataFrame, fps: pd.Series) -> pd.DataFrame:
    """analysis.mode_gains with the baseline named: its rule, whether it verified the same drafted trees,
    and its sibling order where the study records one (`sibling_order`).  A rule whose step
    records equal its baseline's (mss or sequoia on a chain is speculative sampling) is an
    identity, stated under Identities, not a row here."""
    gains = analysis.mode_gains(df, sums)
    if gains.empty:
        return gains
    fp = fps.to_dict()
    same = [fp.get(a) is not None and fp.get(a) == fp.get(b) for a, b in zip(gains.config_hash, gains.ref_hash)]
    gains = gains[~np.asarray(same, bool)].reset_index(drop=True)
    if gains.empty:
        return gains
    order = sibling_orders(df)
    gains["baseline"] = [
        f"{m.split(' ')[0]}"
        + (f" ({order[h]} order)" if h in order else "")
        + (", same trees" if same else ", own trees")
        for m, h, same in zip(gains.ref_mode, gains.ref_hash, gains.same_trees)
    ]
    gains["lossless_b"] = gains.lossless.astype(str).str.lower().isin(["true", "1"])
    return gains
