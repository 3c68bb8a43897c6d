"""The SLURM pre-flight on `sinfo` outputs whose answers are known."""

from normgrow.cluster.preflight import (
    Association,
    Node,
    check_accounts,
    check_resources,
    default_partition,
    parse_associations,
    parse_sinfo,
    parse_time_limit,
)

SINFO = """gpu*|16|128000|gpu:4|infinite
gpu*|32|256000|gpu:h100:8(S:0-1)|2-00:00:00
cpu|64|512000|(null)|infinite
"""


def config(**train):
    return {"resources": {"train": {"gpus": 8, "cpus_per_gpu": 8, "mem_mb": 200000, "partition": None, **train},
                          "model": {"gpus": 1, "cpus_per_gpu": 8, "mem_mb": 64000, "partition": None},
                          "data": {"gpus": 0, "cpus_per_gpu": 8, "mem_mb": 16000, "partition": "cpu"}}}


def test_parse_sinfo():
    nodes = parse_sinfo(SINFO)
    assert nodes == [Node("gpu", 16, 128000, 4), Node("gpu", 32, 256000, 8, 2880), Node("cpu", 64, 512000, 0)]
    assert default_partition(SINFO) == "gpu"


def test_cpus_per_gpu_beyond_the_node_names_the_key():
    problems = check_resources(config(), parse_sinfo(SINFO), "gpu")
    assert problems == ["resources.train.cpus_per_gpu: 8 CPUs per GPU × 8 GPUs = 64 CPUs, but the nodes of 'gpu' "
                        "with 8 GPUs have at most 32: set resources.train.cpus_per_gpu to 4 or less"]
    assert check_resources(config(cpus_per_gpu=4), parse_sinfo(SINFO), "gpu") == []


def test_gpus_memory_and_partition():
    nodes = parse_sinfo(SINFO)
    assert check_resources(config(gpus=16), nodes, "gpu")[0].startswith("resources.train.gpus: 16 GPUs per node")
    assert check_resources(config(cpus_per_gpu=4, mem_mb=300000), nodes, "gpu") == [
        "resources.train.mem_mb: 300000 MB, but the matching nodes of 'gpu' have at most 256000 MB: set "
        "resources.train.mem_mb to 256000 or less"]
    assert check_resources(config(cpus_per_gpu=4, partition="big"), nodes, "gpu")[0].startswith(
        "resources.train.partition: no node in partition 'big'")


# ---------------------------------------------------------------- time limits, accounts, QoS; sinfo and sacctmgr faked
def test_time_limits_are_read_in_minutes():
    assert [parse_time_limit(text) for text in ("infinite", "30", "30:00", "4:00:00", "1-00:00:00", "2-12", "7-0:30")] \
        == [None, 30, 30, 240, 1440, 3600, 10110]


def test_a_run_time_beyond_the_partitions_time_limit_names_the_key():
    nodes = [Node("gpu", 32, 256000, 8, 1440), Node("cpu", 64, 512000, 0, None)]
    problems = check_resources(config(cpus_per_gpu=4, runtime=2880), nodes, "gpu")
    assert len(problems) == 1 and problems[0].startswith(
        "resources.train.runtime: 2880 minutes, but partition 'gpu' allows at most 1440: set resources.train.runtime "
        "to 1440 or less")
    assert check_resources(config(cpus_per_gpu=4, runtime=1440), nodes, "gpu") == []


ASSOCIATIONS = """lab-a||normal,long
lab-b|gpu|normal
"""


def test_accounts_and_qos_against_the_users_associations():
    associations = parse_associations(ASSOCIATIONS)
    assert associations[0] == Association("lab-a", "", frozenset({"normal", "long"}))

    def groups(**train):
        return {"resources": {"train": {"partition": "gpu", "account": "lab-a", "qos": "normal", **train}}}

    assert check_accounts(groups(), associations) == []
    assert check_accounts(groups(account="lab-b"), associations) == []
    assert check_accounts(groups(account="lab-b", qos="long"), associations) == [
        "resources.train.qos: 'long' is not a QoS of account lab-b on partition gpu (sacctmgr lists normal)"]
    assert check_accounts(groups(account="lab-c"), associations) == [
        "resources.train.account: 'lab-c' is no account of yours (sacctmgr lists lab-a, lab-b)"]
    assert check_accounts(groups(account="my-project"), associations) == [
        "resources.train.account: 'my-project' is the site template's placeholder: set your SLURM account "
        "(lab-a, lab-b)"]
    assert check_accounts(groups(account="my-project"), None)[0].startswith("resources.train.account: 'my-project'")
    assert check_accounts(groups(account="lab-c"), None) == []  # without accounting: not known


def fake_command(folder, name: str, output: str, status: int = 0) -> None:
    script = folder / name
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}EOF\nexit {status}\n")
    script.chmod(0o755)


def test_preflight_of_the_papers_config_and_the_site_template_on_a_fake_cluster(tmp_path, monkeypatch, capsys):
    from conftest import REPO

    from normgrow.cli import main

    fake_command(tmp_path, "sinfo", "gpu*|64|512000|gpu:h100:8(S:0-1)|1-00:00:00\ncpu|64|512000|(null)|infinite\n")
    fake_command(tmp_path, "sacctmgr", "lab-a||normal\n")
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    site = [str(REPO / "configs" / "paper.yaml"), str(REPO / "configs" / "site-template.yaml")]
    assert main(["preflight", *site]) == 1  # config.yaml not named: the embedded default is read first
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("resources.train.runtime: 2880 minutes, but partition 'gpu' allows at most 1440")
    assert [line.split(":")[0] for line in lines[1:]] == [f"resources.{group}.account" for group in
                                                         ("train", "model", "data")]
    mine = tmp_path / "mine.yaml"
    mine.write_text("resources:\n  train: {account: lab-a, runtime: 1440}\n  model: {account: lab-a}\n"
                    "  data: {account: lab-a}\n")
    assert main(["preflight", *site, str(mine)]) == 0
    assert capsys.readouterr().out.strip() == "every job class fits a node of its partition, within its time limit"
    fake_command(tmp_path, "sacctmgr", "", status=1)  # no accounting database
    assert main(["preflight", *site, str(mine)]) == 0
    assert "accounts and QoS not checked" in capsys.readouterr().out
