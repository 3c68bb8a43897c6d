"""The package's rooms (CONTRIBUTING.md, Layout): each imports only the rooms above it, and the
torch-free ones load without torch or transformers (the paper's analysis: tests/test_document.py)."""

import ast

from conftest import REPO, heavy_imports

PACKAGE = REPO / "src" / "normgrow"
ORDER = ("spec", "model", "train", "cluster", "paper")  # CONTRIBUTING's table, top to bottom


def imported(path) -> set[str]:
    """The normgrow modules (`room.module`, or `room` alone) that `path` imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("normgrow."):
            names.add(node.module.split(".", 1)[1])
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".", 1)[1] for a in node.names if a.name.startswith("normgrow."))
    return names


def test_the_package_is_rooms_and_the_entry_point():
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["cli.py"]
    assert sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(ORDER)


def test_each_room_imports_only_the_rooms_above_it():
    wrong = []
    for rank, room in enumerate(ORDER):
        for path in sorted((PACKAGE / room).glob("*.py")):
            for name in imported(path):
                other = name.split(".")[0]
                if ORDER.index(other) > rank:
                    wrong.append(f"{room}/{path.name} imports normgrow.{name}")
    assert not wrong, wrong


def test_the_torch_free_rooms_import_no_torch():
    """Every module of normgrow.spec (what the DAG imports), the cluster plan and pre-flight, and the
    model room's registry of placements (read by the schematics) load without torch or transformers."""
    spec = sorted(f"normgrow.spec.{p.stem}" for p in (REPO / "src" / "normgrow" / "spec").glob("*.py"))
    assert "normgrow.spec.curriculum" in spec and "normgrow.spec.execution" in spec
    assert heavy_imports(*spec, "normgrow.cluster.plan", "normgrow.cluster.preflight", "normgrow.model.layout",
                         "normgrow.paper.items") == []
