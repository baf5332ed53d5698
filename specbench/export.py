"""`python -m specbench.export`: the command-line entry point kept at this path
(the code is specbench.study.export)."""

from specbench.study.export import main

if __name__ == "__main__":
    main()
