"""How a training job starts — one phase, or a group of phases on one teacher forward per batch
(normgrow.train.trainer.train_phases) — in the job's own process, or under torchrun.

- one rank on one node: `train_phases` in this process (a world of one; the embedded default, one GPU);
- several ranks on one node: `torchrun --standalone --nproc_per_node R`;
- several nodes (a SLURM allocation with `nodes > 1`): `srun` starts one torchrun per node, which
  meet through a c10d rendezvous on the allocation's first node.

Every rank runs `python -m normgrow.cli train-phase --tasks FILE` with the same tasks (a JSON file
next to the first phase's outputs). SIGTERM to the job (preemption) is forwarded to torchrun, which forwards it to
the ranks; they agree on it, save a resume state, and the job exits with 143.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from normgrow.spec.curriculum import PhaseSpec
from normgrow.spec.execution import TASKS_FILE, Execution
from normgrow.train.attempts import begin_attempt
from normgrow.train.trainer import PhaseTask, Preempted, train_phases

RENDEZVOUS_PORT = 29500


def torchrun_command(ranks_per_node: int, nodes: int, phase_args: list[str]) -> list[str]:
    """The command line that starts `ranks_per_node × nodes` ranks of `normgrow.cli train-phase`."""
    train = ["-m", "normgrow.cli", "train-phase", *phase_args]
    if nodes == 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks_per_node}",
                *train]
    # SLURM_JOB_NODELIST is only set inside srun: the first node's name is read there.
    torchrun = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}",
                f"--nproc_per_node={ranks_per_node}", "--rdzv_backend=c10d"]
    head = 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1'
    per_node = (f'exec {shlex.join(torchrun)} --rdzv_id="$SLURM_JOB_ID" '
                f'--rdzv_endpoint="$({head}):{RENDEZVOUS_PORT}" {shlex.join(train)}')
    return ["srun", f"--nodes={nodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1", "bash", "-c", per_node]


def phase_arguments(spec: PhaseSpec, execution: Execution) -> dict:
    """The phase spec and its execution settings as JSON data (`train-phase --spec`)."""
    return {"spec": spec.to_json(), "execution": asdict(execution)}


def read_phase_arguments(path: Path) -> tuple[PhaseSpec, Execution]:
    data = json.loads(Path(path).read_text())
    return PhaseSpec.from_json(data["spec"]), Execution.from_json(data["execution"])


def launch_phases(tasks: list[PhaseTask], teacher: str, tokens: Path, log, ranks_per_node: int = 1,
                  nodes: int = 1, teacher_revision: str | None = None, attempt: int = 1) -> int:
    """Train one phase, or a group on one teacher forward per batch, with `ranks_per_node × nodes`
    ranks (`teacher` at `teacher_revision`, a hub teacher's teacher.revision); return the exit status
    (143: preempted, resume by rerunning). `attempt`: Snakemake's (1, or a retry's > 1): a retry restores
    the outputs of phases an earlier attempt finished, and fails at once (PreviousAttemptFailed) after one
    that raised a Python exception (normgrow.train.attempts.begin_attempt)."""
    print(f"{ranks_per_node} rank(s) per node on {nodes} node(s); "
          f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}; attempt {attempt}" +
          (f" in SLURM job {os.environ['SLURM_JOB_ID']}" if "SLURM_JOB_ID" in os.environ else ""), file=log, flush=True)
    if begin_attempt([(task.out, task.resume_hash()) for task in tasks], attempt, log):
        return 0
    if ranks_per_node == 1 and nodes == 1:
        try:
            train_phases(tasks, teacher, tokens, log, teacher_revision)
        except Preempted as stop:
            print(stop, file=log, flush=True)
            return Preempted.exit_code
        return 0
    out = tasks[0].out
    out.mkdir(parents=True, exist_ok=True)
    spec_path = out / TASKS_FILE
    spec_path.write_text(json.dumps([task.to_json() for task in tasks]))
    args = ["--tasks", str(spec_path), "--teacher", str(teacher), "--tokens", str(tokens)]
    if teacher_revision is not None:
        args += ["--teacher-revision", teacher_revision]
    command = torchrun_command(ranks_per_node, nodes, args)
    print("launching:", " ".join(command), file=log, flush=True)
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    terminated = []

    def forward(signum, frame):
        terminated.append(signum)
        process.send_signal(signum)

    previous_handler = signal.signal(signal.SIGTERM, forward)
    try:
        status = process.wait()
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
    spec_path.unlink(missing_ok=True)
    return Preempted.exit_code if terminated and status != 0 else status
