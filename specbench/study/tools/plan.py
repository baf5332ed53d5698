"""`python -m specbench.study.tools.plan`: the reference study's plan (``results.plan``, its one
declaration) as the shell reads it: one tab-separated line per sweep of a phase (``runs --phase hour``:
``part  folder  preset  overrides...``, what ``run_all.sh`` runs) or per batch-size schedule benchmark
(``schedule``).  Pure Python: imports ``results.plan`` only.
"""

from __future__ import annotations

import argparse

from ...results.plan import PHASES, runs, schedule_jobs, schedule_marker


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m specbench.study.tools.plan", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "command",
        choices=["runs", "schedule"],
        help="runs: one tab-separated line per sweep of --phase; schedule: one per batch-size schedule benchmark "
        "(marker, pair, dataset, B, prompts, max_new_tokens)",
    )
    ap.add_argument("--phase", choices=PHASES, help="runs: the phase (hour, extended, tiny)")
    a = ap.parse_args(argv)
    if a.command == "schedule":
        for j in schedule_jobs():
            print("\t".join(map(str, (schedule_marker(j[0], j[2]), *j))))
        return
    if a.phase is None:
        ap.error("runs needs --phase")
    for part, s in runs(a.phase):
        print("\t".join((part, s.folder, s.preset, *s.args)))


if __name__ == "__main__":
    main()
