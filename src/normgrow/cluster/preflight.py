"""Pre-flight for a SLURM cluster: do the jobs' requests fit the cluster, and may this user make them?

SLURM refuses a job whose request no node can satisfy ("Requested node configuration is not
available"), whose time limit exceeds its partition's, or whose account or QoS the user has no
association with, only after the DAG has been built and submitted. This compares every job class of
the config (`resources.train`, `.model`, `.data`: GPUs, CPUs per GPU, memory, run time) with the nodes
and partitions `sinfo` reports, and its account and QoS with the user's associations `sacctmgr`
lists, before anything is submitted, and names the key to change.
"""

from __future__ import annotations

import getpass
import re
import subprocess
from dataclasses import dataclass

SINFO = ["sinfo", "--noheader", "--Node", "--format=%P|%c|%m|%G|%l"]
# The user's associations: account, partition (empty: every partition), the QoS it may use.
SACCTMGR = ["sacctmgr", "--noheader", "--parsable2", "show", "associations", "format=account,partition,qos"]
# Accounts of configs/site-template.yaml that name no real account: left as they are, every job is refused.
PLACEHOLDER_ACCOUNTS = frozenset({"my-project"})


@dataclass(frozen=True)
class Node:
    partition: str
    cpus: int
    memory_mb: int
    gpus: int
    time_limit_min: int | None = None  # the partition's time limit (None: infinite)


@dataclass(frozen=True)
class Association:
    account: str
    partition: str  # "" for every partition
    qos: frozenset[str]


def parse_time_limit(text: str) -> int | None:
    """Minutes of a SLURM time limit (`infinite`, `MM`, `MM:SS`, `HH:MM:SS`, `D-HH[:MM[:SS]]`), rounded down."""
    if text.strip().lower() in ("infinite", "unlimited", "n/a", ""):
        return None
    days, _, clock = text.strip().rpartition("-")
    parts = [int(part) for part in clock.split(":")]
    if days:  # D-HH, D-HH:MM, D-HH:MM:SS
        hours, minutes = parts[0], parts[1] if len(parts) > 1 else 0
    else:  # MM, MM:SS, HH:MM:SS
        hours, minutes = (parts[0], parts[1]) if len(parts) == 3 else (0, parts[0])
    return int(days or 0) * 1440 + hours * 60 + minutes


def parse_sinfo(text: str) -> list[Node]:
    """Nodes from `sinfo --noheader --Node --format=%P|%c|%m|%G|%l` (one line per node and partition;
    the default partition carries a `*`; GRES like `gpu:4`, `gpu:h100:8(S:0-1)` or `(null)`; the
    partition's time limit like `2-00:00:00` or `infinite`)."""
    nodes = []
    for line in text.splitlines():
        if not line.strip():
            continue
        partition, cpus, memory, gres, limit = line.strip().split("|")
        gpus = sum(int(m.group(1)) for m in re.finditer(r"gpu(?::[^:,(]+)?:(\d+)", gres))
        nodes.append(Node(partition.rstrip("*"), int(cpus), int(re.sub(r"\D", "", memory) or 0), gpus,
                          parse_time_limit(limit)))
    return nodes


def parse_associations(text: str) -> list[Association]:
    """Associations from `sacctmgr --noheader --parsable2 show associations format=account,partition,qos`."""
    rows = [line.strip().split("|") for line in text.splitlines() if line.strip()]
    return [Association(account, partition, frozenset(filter(None, qos.split(","))))
            for account, partition, qos, *_ in rows]


def default_partition(text: str) -> str | None:
    for line in text.splitlines():
        if line.split("|")[0].endswith("*"):
            return line.split("|")[0].rstrip("*")
    return None


def check_resources(config: dict, nodes: list[Node], default: str | None) -> list[str]:
    """One line per job class whose request fits no node of its partition, or whose run time exceeds the
    partition's time limit, naming the key."""
    problems = []
    for job_class, spec in config["resources"].items():
        partition = spec.get("partition") or default
        candidates = [n for n in nodes if n.partition == partition]
        where = f"resources.{job_class}"
        if not candidates:
            problems.append(f"{where}.partition: no node in partition {partition!r} "
                            f"(sinfo lists {', '.join(sorted({n.partition for n in nodes}))})")
            continue
        limits = [n.time_limit_min for n in candidates]
        limit = None if None in limits else max(limits)
        if limit is not None and spec.get("runtime", 0) > limit:
            problems.append(f"{where}.runtime: {spec['runtime']} minutes, but partition {partition!r} allows at most "
                            f"{limit}: set {where}.runtime to {limit} or less (a phase cut by its time limit resumes "
                            "from its last resume state in its next job) or choose another partition")
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


def check_accounts(config: dict, associations: list[Association] | None) -> list[str]:
    """One line per job class whose account is a placeholder, or (with the user's `associations`; None:
    not known) no account of the user's, or whose QoS that account may not use on its partition."""
    problems = []
    for job_class, spec in config["resources"].items():
        where, account, qos = f"resources.{job_class}", spec.get("account"), spec.get("qos")
        known = sorted({a.account for a in associations or []})
        if account in PLACEHOLDER_ACCOUNTS:
            problems.append(f"{where}.account: {account!r} is the site template's placeholder: set your SLURM "
                            f"account" + (f" ({', '.join(known)})" if known else " (sacctmgr show associations)"))
            continue
        if associations is None:
            continue
        mine = [a for a in associations if account is None or a.account == account]
        if account is not None and not mine:
            problems.append(f"{where}.account: {account!r} is no account of yours (sacctmgr lists "
                            f"{', '.join(known) or 'none'})")
            continue
        usable = [a for a in mine if a.partition in ("", spec.get("partition") or "")]
        allowed = sorted(set().union(*(a.qos for a in usable))) if usable else []
        if qos is not None and qos not in allowed:
            problems.append(f"{where}.qos: {qos!r} is not a QoS of account {account or '(default)'!s} on partition "
                            f"{spec.get('partition') or '(default)'!s} (sacctmgr lists {', '.join(allowed) or 'none'})")
    return problems


def run_sacctmgr() -> str | None:
    """The user's associations as sacctmgr lists them; None where it cannot (no accounting database)."""
    try:
        return subprocess.run([*SACCTMGR, f"user={getpass.getuser()}"], capture_output=True, text=True, check=True,
                              timeout=60).stdout
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None


def run_sinfo() -> str:
    try:
        return subprocess.run(SINFO, capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        raise SystemExit(f"preflight: cannot run sinfo ({error}); run it on the cluster's login node") from None
