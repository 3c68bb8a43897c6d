"""The SLURM pre-flight on `sinfo` outputs whose answers are known."""

from normgrow.cluster.preflight import Node, check_resources, default_partition, parse_sinfo

SINFO = """gpu*|16|128000|gpu:4
gpu*|32|256000|gpu:h100:8(S:0-1)
cpu|64|512000|(null)
"""


def config(**train):
    return {"resources": {"train": {"gpus": 8, "cpus_per_gpu": 8, "mem_mb": 200000, "partition": None, **train},
                          "model": {"gpus": 1, "cpus_per_gpu": 8, "mem_mb": 64000, "partition": None},
                          "data": {"gpus": 0, "cpus_per_gpu": 8, "mem_mb": 16000, "partition": "cpu"}}}


def test_parse_sinfo():
    nodes = parse_sinfo(SINFO)
    assert nodes == [Node("gpu", 16, 128000, 4), Node("gpu", 32, 256000, 8), Node("cpu", 64, 512000, 0)]
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
