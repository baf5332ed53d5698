"""Markdown helpers: tables from column specs `[(header, fn)]`, bullets, figure links."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from .context import Ctx


def md_table(rows: list[list], headers: list[str]) -> str:
    if not rows:
        raise RuntimeError(f"internal: empty table ({', '.join(headers)}); omit it and say why")

    def cell(x):
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(x) for x in r) + " |" for r in rows]
    return "\n".join(lines)


def span(values: Iterable, fmt: str = ".2f", sep: str = "–") -> str:
    """'0.27–0.84', or one value where the smallest and largest print the same (NaN left out); ``sep``
    ' to ' where the values carry signs ('-0.071 to +0.062')."""
    xs = [float(v) for v in values if v == v]
    lo, hi = format(min(xs), fmt), format(max(xs), fmt)
    return lo if lo == hi else f"{lo}{sep}{hi}"


Column = tuple[str, Callable[[dict], object]]


def table(records: Iterable[dict], columns: Sequence[Column]) -> str:
    """A markdown table from records and a column spec [(header, fn(record) -> cell)]."""
    return md_table([[fn(r) for _, fn in columns] for r in records], [h for h, _ in columns])


def bullets(lines: list[str], empty: str) -> str:
    return "\n".join(f"- {s}" for s in lines) if lines else f"_{empty}_"


def fig_links(ctx: Ctx, *names) -> list[str]:
    """The links to those of ``names`` that were made (``ctx.figs``), each by ``ctx.link``."""
    return [ctx.link(n) for n in names if n in ctx.figs]


def figure_link(fig, rel: str) -> str:
    return f"![{fig.name}]({rel}/{fig.name})\n\n*{fig.caption}*\n"
