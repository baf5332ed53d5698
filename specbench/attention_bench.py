"""`python -m specbench.attention_bench`: the command-line entry point kept at this path
(the code is specbench.attention.bench)."""

from specbench.attention.bench import main

if __name__ == "__main__":
    main()
