"""How a training job starts — one phase, or a group of phases on one teacher forward per batch
(normgrow.train.trainer.train_phases) — in the job's own process, or under torchrun.

- one rank on one node: `train_phases` in this process (a world of one; the embedded default, one GPU);
- several ranks on one node: `torchrun --standalone --nproc_per_node R`;
- several nodes (a SLURM allocation with `nodes > 1`): `srun` starts one torchrun per node, which
  meet through a c10d rendezvous on the allocation's first node.

Every rank runs `python -m normgrow.cli train-phase --job FILE`: the same job (normgrow.train.trainer.TrainingJob
as JSON, next to the first phase's outputs). SIGTERM to the job (preemption) is forwarded to torchrun, which
forwards it to the ranks; they agree on it, save a resume state, and the job exits with 143.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from contextlib import contextmanager

from normgrow.design.execution import JOB_FILE
from normgrow.train.attempts import begin_attempt
from normgrow.train.distributed import ASKED_GPUS
from normgrow.train.trainer import Preempted, TrainingJob, train_phases

# The rendezvous port on the allocation's first node, per job (bash arithmetic on SLURM_JOB_ID), so that two
# multi-node jobs that share a first node do not meet on one port.
RENDEZVOUS_PORT = "$((29500 + SLURM_JOB_ID % 10000))"


def job_environment(gpus_per_node: int) -> dict[str, str]:
    """What a training job adds to its ranks' environment: the GPUs per node it asked for (ASKED_GPUS); on
    GPUs, the CUDA caching allocator's expandable segments (less fragmentation as the packed rows' widths
    change from batch to batch), unless the user configured the allocator."""
    environment = {ASKED_GPUS: str(gpus_per_node)}
    if gpus_per_node and not {"PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"} & set(os.environ):
        environment["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    return environment


def torchrun_command(ranks_per_node: int, nodes: int, phase_args: list[str], shutdown_timeout: int,
                     gpus_per_node: int = 0, cpus_per_gpu: int = 0) -> list[str]:
    """The command line that starts `ranks_per_node × nodes` ranks of `normgrow.cli train-phase`.

    After a SIGTERM, torchrun gives its ranks `shutdown_timeout` seconds (resources.train.shutdown_timeout;
    torch's own default is 30) to save a resume state and exit before it kills them with SIGKILL. On several
    nodes, the srun task of each node is given the node's `gpus_per_node` GPUs and their CPUs (0: a CPU job)."""
    train = ["-m", "normgrow.cli", "train-phase", *phase_args]
    grace = f"--shutdown-timeout={shutdown_timeout}"
    if nodes == 1:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks_per_node}",
                grace, *train]
    # SLURM_JOB_NODELIST is only set inside srun: the first node's name is read there.
    torchrun = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes}",
                f"--nproc_per_node={ranks_per_node}", "--rdzv_backend=c10d", grace]
    head = 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1'
    per_node = (f'exec {shlex.join(torchrun)} --rdzv_id="$SLURM_JOB_ID" '
                f'--rdzv_endpoint="$({head}):{RENDEZVOUS_PORT}" {shlex.join(train)}')
    binding = ([f"--gpus-per-node={gpus_per_node}", f"--cpus-per-task={cpus_per_gpu * gpus_per_node}"]
               if gpus_per_node else [])
    return ["srun", f"--nodes={nodes}", "--ntasks-per-node=1", *binding, "--kill-on-bad-exit=1", "bash", "-c", per_node]


def launch_phases(job: TrainingJob, log, ranks_per_node: int = 1, nodes: int = 1, attempt: int = 1, *,
                  shutdown_timeout: int, gpus_per_node: int = 0, cpus_per_gpu: int = 0, name: str = "") -> int:
    """Train the job (one phase, or a group on one teacher forward per batch) with `ranks_per_node × nodes`
    ranks; return the exit status (143: preempted, resume by rerunning). `attempt`: Snakemake's (1, or a
    retry's > 1): a retry restores the outputs of phases an earlier attempt finished, and fails at once
    (PreviousAttemptFailed) after one that raised a Python exception (normgrow.train.attempts.begin_attempt).
    `shutdown_timeout`: torchrun's grace for the ranks after a SIGTERM (torchrun_command). `gpus_per_node`: what
    the job asked for (resources.train.gpus), told to every rank (job_environment; a rank refuses to train on
    fewer GPUs than its node's ranks); with `cpus_per_gpu`, the multi-node srun's binding. `name`: what the job
    trains (its rule and run phases, set by workflow/scripts/train_phase.py), a note on a Python exception and
    a line in `log` after ranks that failed."""
    with naming_errors(name):
        os.environ.update(job_environment(gpus_per_node))  # before CUDA is initialised, here and in the ranks
        print(f"{ranks_per_node} rank(s) per node on {nodes} node(s); "
              f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}; attempt {attempt}" +
              (f" in SLURM job {os.environ['SLURM_JOB_ID']}" if "SLURM_JOB_ID" in os.environ else ""),
              file=log, flush=True)
        if begin_attempt([(task.out, task.resume_hash()) for task in job.tasks], attempt, log):
            return 0
        if ranks_per_node == 1 and nodes == 1:
            try:
                train_phases(job, log)
            except Preempted as stop:
                print(stop, file=log, flush=True)
                return Preempted.exit_code
            return 0
        out = job.tasks[0].out
        out.mkdir(parents=True, exist_ok=True)
        job_path = out / JOB_FILE
        job_path.write_text(json.dumps(job.to_json()))
        args = ["--job", str(job_path)]
        command = torchrun_command(ranks_per_node, nodes, args, shutdown_timeout, gpus_per_node, cpus_per_gpu)
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
        job_path.unlink(missing_ok=True)
        status = Preempted.exit_code if terminated and status != 0 else status
    if name and status not in (0, Preempted.exit_code):
        print(f"the {name} failed: its ranks exited with status {status} (their tracebacks are above)", file=log)
    return status


@contextmanager
def naming_errors(name: str):
    """A Python exception raised inside carries the note "in the `name`" (none without a name)."""
    try:
        yield
    except Exception as error:
        if name:
            error.add_note(f"in the {name}")
        raise
