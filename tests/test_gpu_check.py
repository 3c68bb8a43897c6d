"""tools/gpu_check.py, the GPU check kept ready for a lent device: its steps fit 9 minutes of one
device command, their arguments are ones the tools accept, a step that fails or runs past its limit is
reported as such, and its CPU half (`--dry`) passes here (the GPU steps themselves run only on a GPU)."""

import subprocess
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "tools"))  # as when run as a script
import gpu_check  # noqa: E402


def test_the_gpu_steps_fit_nine_minutes_and_measure_every_layout(tmp_path):
    steps = {step.name: step for step in gpu_check.steps(dry=False, out=tmp_path)}
    assert list(steps) == list(gpu_check.STEPS)
    assert sum(step.limit for step in steps.values()) <= 9 * 60
    assert steps["tests"].command[-1] == "tests/test_gpu.py" and "-x" not in steps["tests"].command
    bench = steps["step"].command
    assert bench[bench.index("--shapes") + 1] == "paper-docs-1block" and "--vary-batch" in bench
    assert {"ours-padding-free", "ours-flex"} <= set(bench)
    big = {step.name: step for step in gpu_check.steps(dry=False, out=tmp_path, gpu_gb=141)}["step"].command
    assert big[big.index("--shapes") + 1] == "paper-docs"  # an H200 holds the paper's 3-block student


def test_the_step_benchmark_accepts_the_gpu_steps_arguments(tmp_path):
    """On a CPU the benchmark refuses the paper shape after parsing its arguments: they are valid."""
    bench = {step.name: step for step in gpu_check.steps(dry=False, out=tmp_path)}["step"]
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


def test_the_dry_run_passes_and_summarises_every_step(tmp_path):
    """`--dry` (the CPU half at tiny shapes) runs every step to a pass and writes the summary with each
    part's figures: the fused loss before and after, the step's graphs, the save's rates and the repeat's
    max |Δ loss| (0 on the CPU: its fp32 path is bit-identical)."""
    result = subprocess.run([sys.executable, str(REPO / "tools" / "gpu_check.py"), "--dry", "--out",
                             str(tmp_path)], capture_output=True, text=True, timeout=600,
                            env={"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stdout[-3000:]
    summary = (tmp_path / "summary.md").read_text()
    for name in gpu_check.STEPS:
        assert f"| {name} | passed |" in summary
    assert "Fused KD + CE, N = 512" in summary and "| tiny | ours-padding-free |" in summary
    assert "Resume state:" in summary and "max |Δ loss| = 0 " in summary
