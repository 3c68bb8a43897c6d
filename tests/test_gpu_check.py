"""benchmarks/gpu_check.py, the GPU check kept ready for a lent device: its steps fit the ten minutes of
one device command, their arguments are ones the tools accept, and a step that fails or runs past its
limit is reported as such (the GPU steps themselves run only on a GPU: `--dry` here)."""

import subprocess
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))  # as when run as a script
import gpu_check  # noqa: E402


def test_the_gpu_steps_fit_ten_minutes_and_measure_every_layout():
    steps = gpu_check.steps(dry=False)
    assert sum(step.limit for step in steps) <= 600 - 30  # one device command, with room to start
    tests, bench = steps
    assert tests.command[-1] == "tests/test_gpu.py"
    assert bench.command[bench.command.index("--shapes") + 1] == "paper-docs"
    assert {"ours", "ours-padding-free", "ours-flex"} <= set(bench.command)


def test_the_step_benchmark_accepts_the_gpu_steps_arguments():
    """On a CPU the benchmark refuses the paper shape after parsing its arguments: they are valid."""
    bench = gpu_check.steps(dry=False)[1]
    result = subprocess.run(bench.command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "shape 'paper' needs a GPU" in result.stderr, result.stderr[-2000:]


def test_a_step_that_fails_or_runs_out_of_time_is_reported(tmp_path):
    python = sys.executable
    assert gpu_check.run(gpu_check.Step("ok", [python, "-c", "print('fine')"], 30), tmp_path)[0] == "passed"
    assert (tmp_path / "ok.log").read_text() == "fine\n"
    assert gpu_check.run(gpu_check.Step("fails", [python, "-c", "raise SystemExit(3)"], 30),
                         tmp_path)[0] == "FAILED (exit 3)"
    outcome, seconds = gpu_check.run(gpu_check.Step("hangs", [python, "-c", "import time; time.sleep(60)"], 1),
                                     tmp_path)
    assert outcome == "TIMED OUT" and seconds < 30
