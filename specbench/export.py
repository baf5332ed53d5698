"""`python -m specbench.export`: the command-line entry point kept at this path
(the code is specbench.study.serving.export); ``--help`` / ``-h`` prints its usage."""

import sys

from specbench.study.serving import export


def cli(argv: list[str]) -> None:
    if {"-h", "--help"} & set(argv):
        usage, _, rest = (export.__doc__ or "").strip().lstrip("`").partition("`: ")
        first, _, more = rest.partition("\n\n")
        first = " ".join(first.split())
        print(f"usage: {usage}\n\n{first[:1].upper()}{first[1:]}\n\n{more.rstrip()}")
        print("\nkeys: " + ", ".join(export.KEYS) + " (and the study's overrides)")
        return
    export.main(argv)


if __name__ == "__main__":
    cli(sys.argv[1:])
