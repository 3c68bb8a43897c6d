"""The update-matched control's written blocks (normgrow.paper.control), from the files kept in the repository
(docs/results/control: every cell's final CE per fresh seed with the commit and code digest that trained it
and its teacher's validation CE, and the teachers' CE, both written by the run's `control` rule), and the
replay check: a set of kept runs trained again from the current code, compared bit for bit.

    python tools/control.py --keep results/comparison          # copy a finished control's files here
    python tools/control.py --part summary --write docs/miniature.md
    python tools/control.py --part tables --write docs/miniature.md
    python tools/control.py --replay A 0.01 --seeds 201         # train them again here and compare
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import kept_results
import pandas as pd
import yaml

REPO = kept_results.REPO
KEPT = REPO / "docs" / "results" / "control"
SELECTION = REPO / "docs" / "results" / "comparison" / "selection.json"
TUNING = REPO / "docs" / "results" / "comparison" / "tuning.csv"
FILES = ("per_seed.csv", "teachers.csv")
LEAD = "`python tools/control.py --part tables`, from docs/results/control:"


def keep(run: Path, kept: Path = KEPT) -> None:
    """Copy a finished control's kept files (results/NAME/control/) into `kept`."""
    kept.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copyfile(run / "control" / name, kept / name)


def _modules():
    sys.path.insert(0, str(REPO / "src"))
    from normgrow.paper import control
    from normgrow.paper.comparison import Selection

    return control, Selection


def render(part: str, kept: Path = KEPT) -> str:
    """The block `part` (summary or tables) from the kept files."""
    control, Selection = _modules()
    config = yaml.safe_load((REPO / "configs" / "comparison.yaml").read_text())["comparison"]
    per_seed = pd.read_csv(kept / "per_seed.csv")
    table = control.estimates(per_seed, Selection.read(SELECTION), list(config["teachers"]))
    if part == "summary":
        return "\n".join([LEAD.replace("--part tables", "--part summary"), "", control.summary(table)])
    teachers = pd.read_csv(kept / "teachers.csv")
    provenance = ", ".join(f"teacher {r['teacher']} validation CE {r['validation_ce']:.4f}"
                           for _, r in teachers.iterrows())
    commits = ", ".join(sorted(per_seed["commit"].astype(str).unique()))
    digests = ", ".join(sorted(per_seed["code_digest"].astype(str).unique()))
    return "\n".join([LEAD, "", f"Trained at commit {commits} (science code digest {digests}); {provenance}.", "",
                      control.markdown(table, Selection.read(SELECTION))])


def replay(teacher: str, lr: float, seeds: list[int], kept: Path = KEPT) -> pd.DataFrame:
    """Train the kept set of runs (teacher, LR) on `seeds` again from this checkout, by the workflow's own rules in
    a scratch directory, and compare every cell's final CE with the kept row bit for bit: one row per cell and
    seed with both values and whether they are equal."""
    control, _ = _modules()
    with tempfile.TemporaryDirectory(prefix="normgrow-replay-") as scratch:
        override = Path(scratch) / "replay.yaml"
        override.write_text(yaml.safe_dump({"comparison": {"tuning": str(TUNING), "fresh_seeds": seeds}}))
        target = f"results/comparison/control/{teacher}/lr{lr:g}.phases.csv"
        subprocess.run([str(Path(sys.executable).parent / "snakemake"), "-s", str(REPO / "workflow" / "comparison.smk"),
                        "--directory", scratch, "--cores", "2", "--configfile", str(override), "--", target],
                       check=True, cwd=REPO)
        again = control.final_ce(pd.read_csv(Path(scratch) / target), lr)
        teacher_ce = json.loads((Path(scratch) / target.replace(".phases.csv", ".check.json")).read_text())
    rows = pd.read_csv(kept / "per_seed.csv")
    rows = rows[(rows["teacher"] == teacher) & (rows["lr"] == lr) & rows["seed"].isin(seeds)]
    both = rows.merge(again, on=["seed", "cell"], suffixes=("_kept", "_now"))
    both["teacher_ce_now"] = teacher_ce["validation_ce"]
    both["equal"] = (both["ce_kept"] == both["ce_now"]) & (both["teacher_ce"] == both["teacher_ce_now"])
    return both[["seed", "cell", "ce_kept", "ce_now", "teacher_ce", "teacher_ce_now", "equal"]]


def block(args: argparse.Namespace) -> str:
    """The block of `--part`; with `--replay`, the replay's comparison instead, exiting 0 when bit-identical."""
    if not args.replay:
        return render(args.part)
    result = replay(args.replay[0], float(args.replay[1]), args.seeds)
    print(result.to_string(index=False))
    equal = bool(len(result)) and bool(result["equal"].all())
    print("bit-identical" if equal else "NOT bit-identical (or nothing to compare)")
    sys.exit(0 if equal else 1)


def main() -> None:
    parser = kept_results.parser(__doc__, "control", KEPT, parts=("summary", "tables"))
    parser.add_argument("--replay", nargs=2, metavar=("TEACHER", "LR"), help="train a kept set of runs again and "
                                                                             "compare bit for bit")
    parser.add_argument("--seeds", nargs="+", type=int, default=[201], help="the seeds --replay trains")
    kept_results.main(parser, __file__, keep, block)

if __name__ == "__main__":
    main()
