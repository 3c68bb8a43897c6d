"""The `.tex` tables as pdflatex reads them: every character mapped or refused by name, signed
numbers in math mode, subscripts as math, and every table the builders make compiling with pdflatex,
booktabs and graphicx and fitting the text width of a one-column article; and the tables for a paper of
one's own (config report.tables): without the paper's values, two runs' tables and macros in one document."""

import re
import shutil
import subprocess

import pandas as pd
import pytest
import yaml
from conftest import (
    OVERFULL,
    OVERFULL_TOLERANCE_PT,
    REPO,
    TABLE_PACKAGES,
    compile_tables,
    latex_errors,
    overfull_by_table,
)
from test_tables_claims import fixture, phase_rows, removal_rows, rms_rows, with_controls

from normgrow.design.config import validate_config
from normgrow.design.kinds import SCHEMA
from normgrow.paper.latex import LINE_WIDTH, MATH, TEXT, UnmappedCharacter, latex
from normgrow.paper.results import Results
from normgrow.paper.tables import (
    BUILDERS,
    MACROS,
    PAPER_ROW,
    Table,
    TexStyle,
    build_tables,
    macro_name,
    reproduces_the_paper,
    write_macros,
)


@pytest.mark.parametrize(("text", "tex"), [
    ("Σ", "$\\Sigma$"), ("β", "$\\beta$"), ("ε", "$\\varepsilon$"), ("≈", "$\\approx$"), ("Δ", "$\\Delta$"),
    ("×", "$\\times$"), ("→", "$\\rightarrow$"), ("−", "$-$"), ("·", "$\\cdot$"), ("±", "$\\pm$"),
    ("≤", "$\\le$"), ("§", "\\S{}"), ("–", "--"), ("…", "\\ldots{}"), ("é", "\\'{e}"), ("ï", '\\"{\\i}'),
    ("AUC 2% (mean)", "AUC 2\\% (mean)"), ("a & b # c", "a \\& b \\# c"),
    ("$x^2$ {y} ~z \\", "\\$x\\textasciicircum{}2\\$ \\{y\\} $\\sim$z \\textbackslash{}"),  # a tilde not raised
    # a subscript after a lone letter is one, upright when a word; an underscore inside a name stays
    ("Δ_grow − Δ_joint", "$\\Delta_{\\mathrm{grow}}$ $-$ $\\Delta_{\\mathrm{joint}}$"),
    ("−Σ q_teacher·log q_student", "$-$$\\Sigma$ $q_{\\mathrm{teacher}}$$\\cdot$log $q_{\\mathrm{student}}$"),
    ("Δ_c(P), x_0", "$\\Delta_{c}$(P), $x_{0}$"), ("train.padding_free", "train.padding\\_free"),
    ("auc_1k run_steps", "auc\\_1k run\\_steps"),
    ("x<y>z|w", "x$<$y$>$z$|$w"),
    ("a note\non two lines\tand a tab", "a note\non two lines\tand a tab"),  # whitespace LaTeX reads as a space
])
def test_characters_map_to_latex(text, tex):
    assert latex(text) == tex


@pytest.mark.parametrize(("text", "tex"), [
    ("-0.0328", "$-0.0328$"), ("+0.0500", "$+0.0500$"), ("−0.2", "$-0.2$"), ("0.0328", "0.0328"),
    ("-0.1000 [-0.1000, +0.0010]", "$-0.1000$ [$-0.1000$, $+0.0010$]"), ("-1,234,567", "$-1{,}234{,}567$"),
    ("1e-08", "$10^{-8}$"), ("2.5e-04", "$2.5\\times10^{-4}$"), ("(0.9, 0.95)", "(0.9, 0.95)"),
    ("Δ_0 ≥ −0.01.", "$\\Delta_{0}$ $\\ge$ $-0.01$."),
    # hyphens inside names stay hyphens: run names, model names, token counts
    ("post-joint-long", "post-joint-long"), ("Qwen3-8B", "Qwen3-8B"), ("grow-3x50k", "grow-3x50k"),
    ("3.11B", "3.11B"), ("3→6→9", "3$\\rightarrow$6$\\rightarrow$9"),
    # a signed decimal glued to a word is part of it, not a number followed by text
    ("-1.5x", "-1.5x"), ("+2.25e-3B", "+2.25e-3B"),
])
def test_signed_numbers_are_typeset_in_math_mode(text, tex):
    assert latex(text) == tex


def test_every_mapping_is_ascii_latex():
    """What the writer emits is ASCII (pdflatex reads it without any Unicode set-up)."""
    for char in [*MATH, *TEXT]:
        assert latex(char).isascii(), char


@pytest.mark.parametrize("char", ["中", "😀", "∀", "\x07"])
def test_a_character_without_a_mapping_is_refused_by_name(char):
    t = Table("table1")
    t.add("row", "column", text=f"a {char} b")
    with pytest.raises(UnmappedCharacter, match=rf"table table1: character .*U\+{ord(char):04X}") as refused:
        t.latex()
    assert refused.value.char == char


def every_table_results() -> Results:
    """Synthetic results from which every table builder builds its table: the paper's runs and
    controls over three seeds, another placement, another growth operator, block removal, boundary
    RMS, transitions and the embedded default's configuration, with negative differences."""
    phases = with_controls(fixture(grow=(2.90, 2.80), noise=0.05))
    rows = phases.to_dict("records")
    seeds = [1, 2, 3]
    for run, ce in (("post-joint-long", 2.95), ("post-joint-longer", 2.85)):
        rows += phase_rows(run, "post", [[ce, ce + 0.01, ce - 0.01]], seeds, active=[3])
    for placement, (j, g) in {"sandwich": (3.00, 2.70), "deepnorm": (3.10, 3.00)}.items():
        rows += phase_rows(f"{placement}-joint", placement, [[j, j + 0.02, j - 0.02]], seeds, active=[3])
        rows += phase_rows(f"{placement}-grow", placement, [3.5, 3.2, [g, g + 0.02, g - 0.02]], seeds)
    for placement, final in (("pre", 2.95), ("post", 2.85)):
        rows += phase_rows(f"{placement}-grow+zero", placement, [3.5, 3.2, [final, final + 0.01, final - 0.02]], seeds)
    transitions = pd.DataFrame([
        {"run": run, "seed": seed, "phase": p, "placement": run.split("-")[0], "transition_step": 1200 * p,
         "jump": jump - 0.01 * seed, "auc_1k": 0.1, "auc_5k": -0.05, "auc_1k_sum": 1.5, "auc_5k_sum": -2.5,
         "recovery_paper_steps": 19000.0 * seed}
        for run, jump in (("pre-grow", 0.5), ("post-grow", 0.4), ("pre-grow+zero", -0.1), ("post-grow+zero", 0.2))
        for seed in seeds for p in (1, 2)])
    removal = removal_rows(pre=(0.12, 0.3), post=(0.4, 2.0))
    removal = pd.concat([removal, removal.assign(run=removal["run"].str.replace("grow", "joint"))], ignore_index=True)
    rms = pd.DataFrame([row for run in ("pre-grow", "post-grow", "sandwich-grow") for seed in seeds
                        for row in rms_rows(run, seed, 30, 119.0, 7.1, 900.0)])
    sandwich = removal[removal["run"] == "post-grow"].assign(run="sandwich-grow")
    config = validate_config(yaml.safe_load((REPO / "config.yaml").read_text()))
    return Results(pd.DataFrame(rows), transitions, pd.concat([removal, sandwich], ignore_index=True), config, rms)


def test_every_table_compiles_with_pdflatex(pdflatex, tmp_path):
    """Every table the builders make (all of them, from synthetic results), the float and its bare tabular
    set in running text, compiles with pdflatex, booktabs and graphicx, no wider than the text
    (latex_errors), and no cell keeps a text hyphen before a number."""
    tables, not_built = build_tables(every_table_results())
    assert not not_built and [t.name for t in tables] == [build.__name__ for build in BUILDERS]
    paths = [path for t in tables for path in t.write(tmp_path / "tables") if path.suffix == ".tex"]
    for path in paths:
        outside_math = re.sub(r"\$[^$]*\$", "", path.read_text())
        assert not re.search(r"(?<![\w.])-\d", outside_math), path.name
    assert latex_errors(pdflatex, paths, tmp_path / "latex") == {}
    assert len(paths) == 2 * len(BUILDERS) == 26  # each float and its bare tabular (NAME_tabular.tex)


# the least a tabular is shrunk to (graphicx's \resizebox) before it is hard to read: what the column
# groups and the paper rows are there to spare it
MIN_SCALE = 0.85


def test_every_table_fits_the_text_width_of_a_one_column_article(pdflatex, tmp_path):
    """Each of the 13 tables (from synthetic results) set alone in a one-column article with the
    packages its first line names: no Overfull \\hbox beyond the tolerance. Set at their natural
    width (\\resizebox a no-op), none runs past the line by more than a shrink to MIN_SCALE takes
    back: wide tables are split into column groups with the paper's values on rows of their own, not
    squeezed to fit."""
    tables, _ = build_tables(every_table_results())
    paths = [t.write(tmp_path / "tables")[2] for t in tables]
    for path in paths:
        first = path.read_text().splitlines()[0]
        assert first.startswith("% ") and all(f"\\usepackage{{{p}}}" in first for p in TABLE_PACKAGES), path
    finished, log = compile_tables(pdflatex, paths, tmp_path / "fit", "fit")
    assert finished and overfull_by_table(log) == {t.name: [] for t in tables} and len(tables) == 13
    finished, log = compile_tables(pdflatex, paths, tmp_path / "natural", "natural",
                                   preamble="\\renewcommand{\\resizebox}[3]{#3}\n")
    natural = {name: max(widths, default=0.0) for name, widths in overfull_by_table(log).items()}
    assert finished and len(natural) == 13
    assert max(natural.values()) <= LINE_WIDTH * (1 / MIN_SCALE - 1), natural


def test_captions_subscripts_and_tildes_print_as_a_paper_sets_them():
    """LaTeX numbers a table, so its caption is the title alone (not 'Table 1: Table 1: ...' once
    printed); Δ_grow and q_teacher are subscripts, not an underscore; ~19k has no raised tilde."""
    tables = {t.name: t.latex() for t in build_tables(every_table_results())[0]}
    for name, tex in tables.items():
        caption = re.search(r"\\caption\{(.*)\}", tex)[1]
        assert not re.match(r"Table [A-Z]?\d", caption) and caption[0].isupper(), (name, caption)
        assert "\\_" not in tex and "textasciitilde" not in tex, name
    assert "Interaction ($\\Delta_{\\mathrm{grow}}$ $-$ $\\Delta_{\\mathrm{joint}}$)" in tables["table1"]
    assert "$q_{\\mathrm{teacher}}$" in tables["table2"] and "$\\sim$19k" in tables["tableA4"]


def test_latex_errors_names_the_table_that_does_not_compile(pdflatex, tmp_path):
    """The compile check itself: a raw Unicode character stops pdflatex, and a tabular wider than the
    text is an Overfull \\hbox beyond the tolerance; each table is named."""
    table = Table("table1")
    table.add("row", "column", text="-0.5 ≈ Σ")
    good, bad, wide = tmp_path / "good.tex", tmp_path / "bad.tex", tmp_path / "wide.tex"
    good.write_text(table.latex())
    bad.write_text(table.latex().replace("Placement", "raw \u2248"))
    wide.write_text("\\begin{tabular}{l}" + "wide " * 80 + "\\end{tabular}\n")
    errors = latex_errors(pdflatex, [good, bad, wide], tmp_path / "latex")
    assert list(errors) == ["bad.tex", "wide.tex"] and "Unicode character" in errors["bad.tex"]
    assert re.fullmatch(r"Overfull \\hbox \(\d+\.\d+pt too wide\) in table wide", errors["wide.tex"])


def own_paper_tables(directory, style: TexStyle) -> list:
    """Every table (synthetic results) written into `directory` in `style`, and the macros file beside them."""
    tables, _ = build_tables(every_table_results())
    paths = [path for t in tables for path in t.write(directory, style) if path.suffix == ".tex"]
    return [*paths, write_macros(tables, directory / MACROS, style)]


def test_without_the_paper_s_values_no_table_quotes_the_paper():
    """paper_rows off: no column or row of the paper's, and no note that quotes its numbers; on, both are there."""
    tables, _ = build_tables(every_table_results())
    without, with_paper = TexStyle(paper_rows=False), TexStyle()
    for t in tables:
        tex = t.latex(without)
        assert PAPER_ROW not in tex and "(paper)" not in tex and "paper's KD" not in tex, t.name
        assert "The paper reports no numbers" not in tex and "paper's post-norm" not in tex, t.name
    quoting = {t.name for t in tables if PAPER_ROW in t.latex(with_paper) or "(paper)" in t.latex(with_paper)}
    assert {"table1", "table2", "tableA1", "tableA4"} <= quoting
    notes = {t.name: t.latex(with_paper) for t in tables}
    assert "paper's KD" in notes["table2"] and "The paper reports no numbers" in notes["tableB3"]


def test_the_paper_s_values_default_to_on_for_a_reproduction_only():
    """report.tables.paper_rows null: on with a teacher pretrained here (the embedded default) or the paper's
    teacher by its hub id or a local directory, off with another teacher; true or false as set."""
    assert reproduces_the_paper(None) and reproduces_the_paper("Qwen/Qwen3-8B-Base")
    assert reproduces_the_paper("/models/Qwen3-8B-Base/")
    assert not reproduces_the_paper("Qwen/Qwen3-0.6B-Base")
    assert not reproduces_the_paper("results/teachers/smollm2-135m")
    config = validate_config(yaml.safe_load((REPO / "config.yaml").read_text()))
    assert TexStyle.from_config(config) == TexStyle()
    other = {**config, "teacher": {**config["teacher"], "name": "meta-llama/Llama-3.2-1B"}}
    assert TexStyle.from_config(other).paper_rows is False
    chosen = {**other, "report": {**config["report"], "tables": {**config["report"]["tables"], "paper_rows": True}}}
    assert TexStyle.from_config(chosen).paper_rows is True


def test_label_prefix_and_captions_are_the_document_s():
    """The label is the prefix and the table's name; a caption set by table name replaces the title (mapped to
    LaTeX); the bare tabular is the float's tabulars, no float, caption or label."""
    table = next(t for t in build_tables(every_table_results())[0] if t.name == "table1")
    style = TexStyle(label_prefix="runB:", captions={"table1": "Our main result, Δ_grow"})
    tex = table.latex(style)
    assert "\\label{runB:table1}" in tex and "\\caption{Our main result, $\\Delta_{\\mathrm{grow}}$}" in tex
    bare = table.tabulars(style)
    assert bare in tex and "\\begin{table}" not in bare and "\\caption" not in bare and "\\label" not in bare
    assert bare.startswith("\\resizebox{\\ifdim\\width>\\linewidth")  # shrinks to the float's line


def test_the_schema_names_every_table_a_caption_may_be_set_for():
    """report.tables.captions takes the table names of the builders, no other (the schema's copy of them)."""
    schema = yaml.safe_load(SCHEMA.read_text())
    captions = schema["properties"]["report"]["properties"]["tables"]["properties"]["captions"]
    assert captions["propertyNames"]["enum"] == [build.__name__ for build in BUILDERS]
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["report"] = {"tables": {"captions": {"Table1": "x"}}}
    with pytest.raises(Exception, match="Table1"):
        validate_config(config)


@pytest.mark.parametrize(("parts", "name"), [
    (("tab:", "table1", "Pre-norm", "Joint"), "TabTableOnePreNormJoint"),
    (("runA:", "table1", "Interaction (Δ_grow − Δ_joint)", "Grow"), "RunATableOneInteractionDeltaGrowDeltaJointGrow"),
    (("x", "tableP1", "Δ mix-ln@12 − pre", "Joint"), "XTablePOneDeltaMixLnOneTwoPreJoint"),
    (("é_1",), "EOne"),
])
def test_macro_names_are_letters_only(parts, name):
    assert macro_name(*parts) == name and re.fullmatch("[A-Za-z]+", name)


def test_two_runs_tables_and_macros_compile_in_one_document(pdflatex, tmp_path):
    """A paper of one's own: two runs' tables without the paper's values (label prefixes runA: and runB:), each
    float and each bare tabular in a table of the document's own, both runs' macros in the preamble and used in
    text and in math, referenced by label: pdflatex runs twice with no error, no undefined reference or
    multiply defined label, no Overfull \\hbox beyond the tolerance, and each run's macro expands to its
    own value."""
    paths = {run: own_paper_tables(tmp_path / run, TexStyle(paper_rows=False, label_prefix=f"{run}:"))
             for run in ("runA", "runB")}
    work = tmp_path / "doc"
    work.mkdir()
    body, preamble = [], []
    for run, files in paths.items():
        for path in files:
            shutil.copyfile(path, work / f"{run}_{path.name}")
        preamble.append(f"\\input{{{run}_{MACROS}}}")
        floats = sorted(p.stem for p in files if p.name != MACROS and not p.stem.endswith("_tabular"))
        body += [f"\\input{{{run}_{stem}}}\\clearpage" for stem in floats]
        body += [f"\\begin{{table}}[t]\\centering\\caption{{Own float}}\\input{{{run}_{stem}_tabular}}\\end{{table}}"
                 "\\clearpage" for stem in floats]
        prefix = macro_name(f"{run}:")
        body.append(f"\\typeout{{macro {run}: \\{prefix}TableOnePreNormJoint}}")
        body.append(f"{run}: pre-norm joint CE \\{prefix}TableOnePreNormJoint "
                    f"(\\{prefix}TableOnePreNormJointInterval), $\\Delta = \\{prefix}TableOneDeltaPostPreGrow$ "
                    f"in Table~\\ref{{{run}:table1}}.\\par")
    packages = "".join(f"\\usepackage{{{p}}}\n" for p in TABLE_PACKAGES)
    (work / "paper.tex").write_text(f"\\documentclass{{article}}\n{packages}" + "\n".join(preamble)
                                    + "\n\\begin{document}\n" + "\n".join(body) + "\n\\end{document}\n")
    for _ in range(2):  # the second run resolves the references
        result = subprocess.run([pdflatex, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape",
                                 "paper.tex"], cwd=work, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout[-3000:]
    log = (work / "paper.log").read_text(errors="replace")
    assert "multiply defined" not in log and "undefined" not in log.lower(), log[-3000:]
    assert [w for w in map(float, OVERFULL.findall(log)) if w > OVERFULL_TOLERANCE_PT] == []
    for run, files in paths.items():
        value = re.search(rf"\\newcommand{{\\{macro_name(run)}TableOnePreNormJoint}}{{(.*)}}", files[-1].read_text())[1]
        assert f"macro {run}: {value}" in log
    assert len(paths["runA"]) == 2 * len(BUILDERS) + 1


def test_no_note_names_the_code():
    """A table's note is for a paper's reader: it names no Python module (normgrow.train.objective and the like)."""
    for t in build_tables(every_table_results())[0]:
        for note in (t.note, t.own_note):
            assert not re.search(r"\bnormgrow\.\w", note or ""), (t.name, note)
