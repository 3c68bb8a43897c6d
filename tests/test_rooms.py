"""The package's rooms as import contracts (pyproject.toml, [tool.importlinter]; CONTRIBUTING.md, Layout): each
room imports only the rooms above it, and what the DAG and the analysis import loads without torch or
transformers. `lint-imports` checks them; this test runs it, so the fast tier fails on a broken contract."""

import subprocess
import sys
import tomllib

from conftest import REPO, heavy_imports

PACKAGE = REPO / "src" / "normgrow"
CONTRACTS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_package_is_the_entry_point_and_the_layered_rooms():
    """Every room is a layer of the contract, so that no room escapes it: cli.py and one folder per layer."""
    (layers,) = [c["layers"] for c in CONTRACTS if c["type"] == "layers"]
    rooms = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["cli.py"]
    assert layers[0] == "normgrow.cli" and sorted(layers[1:]) == [f"normgrow.{room}" for room in rooms]


# lint-imports on this checkout's src/ alone: normgrow has no __init__.py, so another checkout on sys.path (an
# editable install of it) would add its files to the package and could be the one read
LINT = """import sys
from pathlib import Path
src = Path(sys.argv[1])
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() == src or not (Path(p or ".") / "normgrow").is_dir()]
sys.path.insert(0, str(src))
from importlinter.cli import lint_imports_command
sys.argv[1:] = ["--no-cache"]
lint_imports_command()
"""


def test_the_import_contracts_are_kept():
    result = subprocess.run([sys.executable, "-c", LINT, str(REPO / "src")], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in result.stdout


def modules_of(name: str) -> list[str]:
    """A room's modules, or the module itself."""
    folder = PACKAGE / name.removeprefix("normgrow.").replace(".", "/")
    return [f"{name}.{p.stem}" for p in sorted(folder.glob("*.py"))] if folder.is_dir() else [name]


def test_the_torch_free_modules_load_without_torch_at_run_time_too():
    """The forbidden contract's modules (every module of a room it names) imported in a fresh interpreter pull in
    neither torch nor transformers: lint-imports reads import statements, and normgrow.model.family imports
    transformers' decoder classes by name (importlib), which only a load shows."""
    (sources,) = [c["source_modules"] for c in CONTRACTS if c["type"] == "forbidden"]
    modules = [module for name in sources for module in modules_of(name)]
    assert "normgrow.paper.calibration" in modules and "normgrow.model.family" in modules
    assert heavy_imports(*modules) == []
