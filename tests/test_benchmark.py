"""The benchmark's documented command runs and prints ours/naive ratios measured in the same run."""

import re
import subprocess
import sys

from conftest import REPO


def test_benchmark_prints_ratios_for_the_embedded_shape():
    command = [sys.executable, str(REPO / "benchmarks" / "distill_step.py"), "--shapes", "embedded", "--reps", "1"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True).stdout
    rows = {line.split()[1]: line for line in out.splitlines()[1:]}
    assert set(rows) == {"naive", "ours", "loss-naive", "loss-ours"}
    for variant in ("ours", "loss-ours"):
        speed, memory = re.findall(r"(\d+\.\d+)x", rows[variant])
        assert float(speed) > 0 and float(memory) > 0
    assert float(re.findall(r"(\d+\.\d+)x", rows["loss-ours"])[1]) < 0.5  # no full-vocabulary logits
