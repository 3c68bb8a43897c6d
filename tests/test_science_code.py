"""Which code trained a phase (normgrow.design.science_code): the digest follows the phase modules and nothing
else, every module a training job imports is classified, a resumed phase lists every code that trained
it, and the report warns when its phases come from other code than the checkout's."""

import ast
import json
import shutil
from pathlib import Path

import pandas as pd
from conftest import REPO, phase_record

from normgrow.design import science_code
from normgrow.design.curriculum import DataPosition
from normgrow.paper.provenance import code_warning, phase_code
from normgrow.paper.report import report_provenance
from normgrow.paper.results import RunPhase, collect_phases, read_metric

PACKAGE = Path(science_code.__file__).parents[1]  # src/normgrow


def test_the_digest_changes_with_one_line_of_a_phase_modules_code_only(tmp_path):
    copy = tmp_path / "normgrow"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert science_code.digest(copy) == science_code.digest() == science_code.record()["digest"]
    with open(copy / "train" / "tracking.py", "a") as f:  # execution only: the same code for a phase
        f.write("TRACKED = 1\n")
    assert science_code.digest(copy) == science_code.digest()
    objective = copy / "train" / "objective.py"
    with open(objective, "a") as f:  # a comment, in a phase module
        f.write("# a comment\n")
    assert science_code.digest(copy) == science_code.digest()
    source = objective.read_text()
    documented = source.replace('"""The distillation', '"""An edited docstring. The distillation', 1).replace(
        '"""Loss terms', '"""An edited docstring. Loss terms', 1)  # the module's docstring and a method's
    assert documented.count("An edited docstring") == 2
    objective.write_text(documented.replace("\n\n\n", "\n\n\n\n"))  # and the layout
    assert science_code.digest(copy) == science_code.digest()
    with open(objective, "a") as f:
        f.write("FIX = 1\n")  # a one-line fix
    assert science_code.digest(copy) != science_code.digest()


def normgrow_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("normgrow."):
            module = node.module.split(".", 1)[1]
            if (PACKAGE / module.replace(".", "/")).is_dir():  # from normgrow.train import trainer
                names.update(f"{module}.{alias.name}" for alias in node.names)
            else:
                names.add(module)
        elif isinstance(node, ast.ImportFrom) and node.module == "normgrow":
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".", 1)[1] for a in node.names if a.name.startswith("normgrow."))
    return names


def test_every_module_a_training_job_imports_is_phase_code_or_execution_only():
    """A module the trainer starts to import must be classified, in normgrow.design.science_code, before the
    digest can be trusted to follow the code that decides a phase's numbers."""
    seen, todo = set(), sorted(normgrow_imports(REPO / "workflow" / "scripts" / "train_phase.py"))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += normgrow_imports(PACKAGE / f"{name.replace('.', '/')}.py")
    phase, execution = set(science_code.PHASE_MODULES), set(science_code.EXECUTION_ONLY)
    assert not phase & execution
    assert all((PACKAGE / f"{name.replace('.', '/')}.py").is_file() for name in phase | execution)
    assert seen - {"design.science_code"} <= phase | execution, seen - phase - execution
    assert {"train.trainer", "train.objective", "train.forward", "model.student", "train.data",
            "design.curriculum"} <= phase


def test_a_resumed_phase_lists_every_code_that_trained_it():
    from normgrow.train.trainer import PhaseProgress

    state = PhaseProgress.start(DataPosition())
    now = science_code.record()
    state.trained_by(now)
    state.trained_by(now)
    assert state.code == [now]
    saved = json.loads(json.dumps(state.to_json()))
    resumed = PhaseProgress.from_json(saved)
    other = {**now, "digest": "0" * 16}
    resumed.trained_by(other)
    assert resumed.code == [now, other]
    del saved["code"]  # a resume state written before phases recorded their code
    assert PhaseProgress.from_json(saved).code == [science_code.UNRECORDED]


CURRENT = {"digest": "a" * 16, "torch": "2.9.0", "transformers": "4.57.0"}


def write_phase(folder: Path, code: list[dict] | None) -> None:
    folder.mkdir(parents=True)
    state = phase_record(final_eval={"ce": 3.0, "kd": 0.5, "kd_soft": 1.0, "ppl": 20.0}).to_json()
    if code is None:  # a record written before phases recorded their code
        del state["code"]
    else:
        state["code"] = code
    (folder / "state.json").write_text(json.dumps(state))
    (folder / "eval.csv").write_text("step,global_step,ce,kd,kd_soft,ppl\n4,4,3.0,0.5,1.0,20.0\n")


def collected(tmp_path: Path, codes: dict[str, list[dict] | None]) -> pd.DataFrame:
    """phases.csv as rule collect_metrics writes it for one phase per run, each trained by `codes[run]`."""
    layout = []
    for run, code in codes.items():
        write_phase(tmp_path / run, code)
        layout.append(RunPhase(run, 42, 0, tmp_path / run, (0,), "continue"))
    path = tmp_path / "phases.csv"
    collect_phases(layout)[1].to_csv(path, index=False)
    return read_metric(path)


def test_the_report_warns_when_reused_phases_come_from_other_code(tmp_path):
    """After a one-line change to a science module the checkout's digest differs from the one a reused
    phase recorded: the report says so, names the other code and the runs it trained."""
    old = {**CURRENT, "digest": "b" * 16}
    phases = collected(tmp_path, {"pre-grow": [CURRENT], "post-grow": [old], "post-joint": [CURRENT]})
    entries = phase_code(phases, CURRENT)
    assert [(e["digest"], e["phases"], e["current"]) for e in entries] == [("a" * 16, 2, True), ("b" * 16, 1, False)]
    warning = code_warning(entries, CURRENT)
    assert warning and "2 code versions" in warning and "b" * 16 in warning and "post-grow" in warning
    assert "pre-grow" not in warning
    assert code_warning(phase_code(phases[phases["run"] != "post-grow"], CURRENT), CURRENT) is None


def test_a_digest_that_reads_as_a_number_is_still_this_checkouts_code(tmp_path):
    """A digest is 16 hex digits: some are digits alone (leading zeros included) or digits and one `e`,
    which a plain pd.read_csv takes for an integer or a float. phases.csv reads them back as written, and
    the phases they trained count as this checkout's."""
    for i, code in enumerate(("0123456789012345", "1200000000000e45")):
        current = {**CURRENT, "digest": code}
        phases = collected(tmp_path / str(i), {"pre-grow": [current], "post-grow": [current]})
        assert phases["code_digest"].tolist() == [code, code]
        entries = phase_code(phases, current)
        assert [(e["digest"], e["phases"], e["current"]) for e in entries] == [(code, 2, True)]
        assert code_warning(entries, current) is None
        assert pd.read_csv(tmp_path / str(i) / "phases.csv")["code_digest"].astype(str).tolist() != [code, code]


def test_the_report_warns_when_every_phase_comes_from_other_code_or_records_none(tmp_path):
    other_torch = {**CURRENT, "torch": "2.8.0"}
    assert "every phase was trained by code other than this checkout" in code_warning(
        phase_code(collected(tmp_path / "a", {"pre-grow": [other_torch]}), CURRENT), CURRENT)
    resumed = collected(tmp_path / "b", {"pre-grow": [CURRENT, {**CURRENT, "digest": "c" * 16}]})
    assert resumed["code_digest"].tolist() == [f"{'a' * 16} + {'c' * 16}"]
    assert code_warning(phase_code(resumed, CURRENT), CURRENT)
    unrecorded = phase_code(collected(tmp_path / "c", {"pre-grow": None}), CURRENT)
    assert unrecorded[0]["digest"] == "unrecorded" and code_warning(unrecorded, CURRENT)
    # a phases.csv collected before phases recorded their code has no code columns
    assert code_warning(phase_code(pd.DataFrame({"run": ["pre-grow"]}), CURRENT), CURRENT)


def test_the_report_compares_with_the_checkout_and_the_installed_software(tmp_path):
    versions = tmp_path / "versions.tsv"
    versions.write_text("kind\tname\tversion\nsystem\tworkflow git commit\tabc\n"
                        f"package\ttorch\t{CURRENT['torch']}\npackage\ttransformers\t{CURRENT['transformers']}\n")
    data = {"splits": {"valid": {"text_sha256": "0" * 64}}, "corpus": {"source": {"loader": "datasets"}}}
    phases = collected(tmp_path, {"pre-grow": [CURRENT]})
    config = {"teacher": {"name": None}, "tokenizer": {"train": True}, "data": {"source": {"loader": "package"}}}
    assert report_provenance(data, versions, phases, CURRENT["digest"], config)["code warning"] is None
    found = report_provenance(data, versions, phases, "d" * 16, config)
    assert found["current code"] == {**CURRENT, "digest": "d" * 16}
    assert "d" * 16 in found["code warning"] and CURRENT["digest"] in found["code warning"]


def test_only_the_docstring_leaves_the_code_the_statement_after_it_stays():
    source = ('"""Module."""\nLIMIT = 8\n\n\ndef f():\n    """Doc."""\n    return LIMIT\n\n\n'
              'def g():\n    """Only a docstring."""\n')
    assert science_code.code_only(source) == "LIMIT = 8\n\ndef f():\n    return LIMIT\n\ndef g():\n    pass"
