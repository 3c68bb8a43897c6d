"""Pre-flight for a SLURM cluster: do the jobs' requested resources fit a node of the partition?

SLURM refuses a job whose request no node can satisfy ("Requested node configuration is not
available") only after the DAG has been built and submitted. This compares every job group of the
config (`resources.train`, `.model`, `.data`: GPUs, CPUs per GPU, memory) with the nodes `sinfo`
reports, before anything is submitted, and names the key to change.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

SINFO = ["sinfo", "--noheader", "--Node", "--format=%P|%c|%m|%G"]


@dataclass(frozen=True)
class Node:
    partition: str
    cpus: int
    memory_mb: int
    gpus: int


def parse_sinfo(text: str) -> list[Node]:
    """Nodes from `sinfo --noheader --Node --format=%P|%c|%m|%G` (one line per node and partition;
    the default partition carries a `*`; GRES like `gpu:4`, `gpu:h100:8(S:0-1)` or `(null)`)."""
    nodes = []
    for line in text.splitlines():
        if not line.strip():
            continue
        partition, cpus, memory, gres = line.strip().split("|")
        gpus = sum(int(m.group(1)) for m in re.finditer(r"gpu(?::[^:,(]+)?:(\d+)", gres))
        nodes.append(Node(partition.rstrip("*"), int(cpus), int(re.sub(r"\D", "", memory) or 0), gpus))
    return nodes


def default_partition(text: str) -> str | None:
    for line in text.splitlines():
        if line.split("|")[0].endswith("*"):
            return line.split("|")[0].rstrip("*")
    return None


def check_resources(config: dict, nodes: list[Node], default: str | None) -> list[str]:
    """One line per job group whose request fits no node of its partition, naming the key."""
    problems = []
    for group, spec in config["resources"].items():
        partition = spec.get("partition") or default
        candidates = [n for n in nodes if n.partition == partition]
        where = f"resources.{group}"
        if not candidates:
            problems.append(f"{where}.partition: no node in partition {partition!r} "
                            f"(sinfo lists {', '.join(sorted({n.partition for n in nodes}))})")
            continue
        gpus = spec.get("gpus", 0)
        cpus = gpus * spec.get("cpus_per_gpu", 1) if gpus else 1
        fits = [n for n in candidates if n.gpus >= gpus and n.cpus >= cpus and n.memory_mb >= spec["mem_mb"]]
        if fits:
            continue
        most_gpus = max(n.gpus for n in candidates)
        if most_gpus < gpus:
            problems.append(f"{where}.gpus: {gpus} GPUs per node, but the nodes of {partition!r} have at most "
                            f"{most_gpus}")
            continue
        with_gpus = [n for n in candidates if n.gpus >= gpus]
        most_cpus = max(n.cpus for n in with_gpus)
        if most_cpus < cpus:
            problems.append(f"{where}.cpus_per_gpu: {spec['cpus_per_gpu']} CPUs per GPU × {gpus} GPUs = {cpus} CPUs, "
                            f"but the nodes of {partition!r} with {gpus} GPUs have at most {most_cpus}: set "
                            f"{where}.cpus_per_gpu to {most_cpus // gpus} or less")
            continue
        most_memory = max(n.memory_mb for n in with_gpus if n.cpus >= cpus)
        problems.append(f"{where}.mem_mb: {spec['mem_mb']} MB, but the matching nodes of {partition!r} have at most "
                        f"{most_memory} MB: set {where}.mem_mb to {most_memory} or less")
    return problems


def run_sinfo() -> str:
    try:
        return subprocess.run(SINFO, capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        raise SystemExit(f"preflight: cannot run sinfo ({error}); run it on the cluster's login node") from None
