"""Mutation testing of the modules a change touches, against the tests chosen for them (mutmut;
CONTRIBUTING.md, "Mutation testing"):

    python tests/mutate.py src/normgrow/paper/stats.py --tests tests/test_tables_claims.py tests/test_comparison.py

mutmut reads its settings from `[tool.mutmut]` in pyproject.toml only; the two that change with every
change — the modules to mutate (`only_mutate`) and the tests that run (`pytest_add_cli_args_test_selection`)
— are set here, for this run, on the configuration mutmut has read. mutmut first runs the chosen tests once
to learn which test reaches which function, then runs each mutant against those tests alone. Run from the
repository root; `mutmut results` and `mutmut show NAME` read the outcome from mutants/ afterwards.

mutmut keeps each mutant's verdict until its function changes: after adding a test for a survivor, name it
(or a glob) with `--mutants` to test it again.
"""

from __future__ import annotations

import argparse

from mutmut.__main__ import cli
from mutmut.configuration import config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="+", help="source files to mutate (src/normgrow/...py; globs allowed)")
    parser.add_argument("--tests", nargs="+", required=True,
                        help="test files or node ids that cover them (in-process tests: a subprocess sees no mutant)")
    parser.add_argument("-k", dest="keyword",
                        help="pytest's -k: leave out the chosen files' tests that run the code in a subprocess "
                             "(a Snakemake dry run imports the mutated modules there)")
    parser.add_argument("--mutants", nargs="+", default=[],
                        help="mutant names or globs to test again (normgrow.paper.stats.x_mean_ci__mutmut_*)")
    parser.add_argument("--max-children", type=int, default=1, help="mutants tested at once (default 1)")
    args = parser.parse_args()
    settings = config()
    settings.only_mutate = args.modules
    settings.pytest_add_cli_args_test_selection = [*args.tests, *(["-k", args.keyword] if args.keyword else [])]
    cli(["run", "--max-children", str(args.max_children), *args.mutants])


if __name__ == "__main__":
    main()
