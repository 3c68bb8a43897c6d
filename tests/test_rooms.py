"""The package's rooms (CONTRIBUTING.md, Layout): each imports only the rooms above it, and the
torch-free ones load without torch or transformers."""

import ast
import re

from conftest import REPO, heavy_imports

PACKAGE = REPO / "src" / "normgrow"
CONTRIBUTING = (REPO / "CONTRIBUTING.md").read_text()


def layout_rooms() -> dict[str, str]:
    """CONTRIBUTING's Layout table, top to bottom: room → what its row says lives there, with the bullet
    `src/normgrow/{room}/` where the row points below."""
    rooms = dict(re.findall(r"^  \| `(\w+)/` \| (.*)$", CONTRIBUTING, flags=re.MULTILINE))
    for room in rooms:
        if below := re.search(rf"^- `src/normgrow/{room}/`:(.*?)(?=^- )", CONTRIBUTING, flags=re.MULTILINE | re.DOTALL):
            rooms[room] += below.group(1)
    return rooms


ORDER = tuple(layout_rooms())


def imported(path) -> set[str]:
    """The normgrow modules (`room.module`, or `room` alone) that `path` imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("normgrow."):
            names.add(node.module.split(".", 1)[1])
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".", 1)[1] for a in node.names if a.name.startswith("normgrow."))
    return names


def test_the_package_is_the_rooms_contributing_lists_and_the_entry_point():
    """Each room of the tree is a row of CONTRIBUTING's Layout table (and no row is missing from it), and
    each of its modules is named there."""
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["cli.py"]
    assert sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(ORDER)
    for room, text in layout_rooms().items():
        named = set(re.findall(r"`(\w+)`", text)) | set(re.findall(rf"`{room}/(\w+)\.py`", text))
        modules = {p.stem for p in (PACKAGE / room).glob("*.py") if p.stem != "__init__"}
        assert modules <= named, f"CONTRIBUTING.md's Layout does not name {room}/{sorted(modules - named)}"


def test_each_room_imports_only_the_rooms_above_it():
    wrong = []
    for rank, room in enumerate(ORDER):
        for path in sorted((PACKAGE / room).glob("*.py")):
            for name in imported(path):
                other = name.split(".")[0]
                if ORDER.index(other) > rank:
                    wrong.append(f"{room}/{path.name} imports normgrow.{name}")
    assert not wrong, wrong


def room_modules(room: str) -> list[str]:
    return sorted(f"normgrow.{room}.{p.stem}" for p in (PACKAGE / room).glob("*.py"))


def test_the_torch_free_rooms_import_no_torch():
    """Every module of normgrow.design and normgrow.paper (what the DAG and the analysis import), the cluster
    plan and pre-flight, the model room's registry of placements (read by the schematics), its supported
    families (read by the DAG's teacher check) and the thread settings the Snakefile imports before torch
    load without torch or transformers."""
    design, paper = room_modules("design"), room_modules("paper")
    assert "normgrow.design.curriculum" in design and "normgrow.paper.calibration" in paper
    assert heavy_imports(*design, *paper, "normgrow.cluster.plan", "normgrow.cluster.preflight",
                         "normgrow.model.layout", "normgrow.model.family", "normgrow.train.threads") == []


def test_contributings_map_names_every_module_of_every_room():
    """CONTRIBUTING.md's Layout names each room's modules (as `module` or `room/module.py`) in that room's
    own row of the table (the paper room: in its own paragraph)."""
    text = (REPO / "CONTRIBUTING.md").read_text()
    unnamed = []
    for room in ORDER:
        start = text.index(f"- `src/normgrow/{room}/`:" if room == "paper" else f"  | `{room}/` |")
        entry = text[start:text.index("\n- " if room == "paper" else "\n", start + 1)]
        unnamed += [f"{room}/{p.name}" for p in sorted((PACKAGE / room).glob("*.py"))
                    if p.stem != "__init__" and f"`{p.stem}`" not in entry and f"`{room}/{p.name}`" not in entry]
    assert not unnamed, f"CONTRIBUTING.md's map does not name {unnamed} in their room's entry"
