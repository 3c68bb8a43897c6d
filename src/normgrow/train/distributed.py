"""Ranks, devices and sharding of a training phase: torch FSDP2 over however many processes run it.

A phase always runs under a process group — one process (a world of 1: the embedded default, one
GPU) or several started by torchrun — so that every scale takes the same code path:

- device: `cuda:LOCAL_RANK` where CUDA is available (NCCL, with gloo for CPU tensors), else the CPU
  (gloo);
- student: `fully_shard` on every decoder layer and once at the root (embedding, boundary norm,
  head); parameters and optimizer state stay fp32 and sharded; with `precision: bfloat16` layers
  compute in bf16 and gradients are reduced in fp32. One process computing in fp32 has nothing to
  shard or cast, and keeps the plain module: the same computation without FSDP's copies. Each
  rank's loss is its share of the global mean (its sum over loss positions divided by the global
  batch's count); FSDP averages gradients over ranks, so the trainer back-propagates the share
  times the world size;
- teacher: replicated on every rank, frozen, in inference mode (see the README for why);
- data: every rank builds the same global batch and keeps its own contiguous rows (`Ranks.rows`),
  cut to its own longest document, so the sequence of global batches, the token counts and the loss
  do not depend on the number of ranks, and a rank computes no wider rows than its own documents need
  (what the budget prices, normgrow.cluster.budget.per_document).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

from normgrow.train.data import Batch

PRECISIONS = {"float32": None, "bfloat16": torch.bfloat16}
ASKED_GPUS = "NORMGROW_GPUS_PER_NODE"  # set by the launcher (normgrow.cluster.launch): the job's GPUs per node


@dataclass(frozen=True)
class Ranks:
    """This process's place in the phase's process group."""

    rank: int
    world: int
    device: torch.device

    @property
    def main(self) -> bool:
        return self.rank == 0

    def share(self, rows: int) -> slice:
        """This rank's contiguous share of `rows` rows: ⌈rows / world⌉ of them (the last ranks' shares
        run past the end when `rows` is not a multiple of the world size)."""
        per_rank = -(-rows // self.world)
        return slice(self.rank * per_rank, (self.rank + 1) * per_rank)

    def rows(self, batch: Batch, pad_id: int) -> Batch:
        """This rank's contiguous share of a global batch's rows (`share`), as wide as its own longest
        document: the global batch is padded to the longest of all ranks' documents, which this rank's
        matmuls and attention would otherwise pay for (in a world of one the width is the batch's).

        A batch whose row count is not a multiple of the world size (the last validation batch) is
        first completed with one-token rows, which have no loss position."""
        rows, width = batch.input_ids.shape
        part = self.share(rows)
        extra = (part.stop - part.start) * self.world - rows
        ids, mask = batch.input_ids, batch.attention_mask
        if extra:
            filler = torch.zeros((extra, width), dtype=mask.dtype)
            filler[:, 0] = 1
            ids = torch.cat([ids, torch.full((extra, width), pad_id, dtype=ids.dtype)])
            mask = torch.cat([mask, filler])
        ids, mask = ids[part], mask[part]
        longest = int(mask.sum(1).max())
        return Batch(ids[:, :longest].to(self.device), mask[:, :longest].to(self.device))

    def sum(self, *values: float | torch.Tensor) -> list[float]:
        """Each value summed over all ranks (float64)."""
        total = torch.tensor([float(v) for v in values], dtype=torch.float64)
        if self.world > 1:
            dist.all_reduce(total)
        return total.tolist()

    def any(self, flag: bool) -> bool:
        """True on every rank if it is true on any rank (e.g. a SIGTERM seen by one rank)."""
        return self.sum(float(flag))[0] > 0

    def broadcast(self, value):
        """Rank 0's `value` on every rank (any picklable object)."""
        box = [value]
        if self.world > 1:
            dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, value) -> list:
        """Every rank's `value` (any picklable object), in rank order, on every rank."""
        values = [value] * self.world
        if self.world > 1:
            dist.all_gather_object(values, value)
        return values

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()


@contextmanager
def process_group():
    """The phase's process group: torchrun's (environment variables), or a world of one made here.

    Yields `Ranks`; a group made here is destroyed on exit. A job that asked for GPUs (ASKED_GPUS) and sees
    fewer than its node's ranks is refused, rather than trained on the CPU until its time limit."""
    created = not dist.is_initialized()
    cuda = torch.cuda.is_available()
    asked, local_ranks = int(os.environ.get(ASKED_GPUS) or 0), int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    seen = torch.cuda.device_count() if cuda else 0
    if asked and seen < local_ranks:
        raise RuntimeError(f"this job asked for {asked} GPU(s) per node (resources.train.gpus) but sees {seen} for "
                           f"{local_ranks} rank(s) on this node (CUDA_VISIBLE_DEVICES="
                           f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}): refusing to train on the CPU")
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    if created:
        backend = "cpu:gloo,cuda:nccl" if cuda else "gloo"
        if "WORLD_SIZE" in os.environ:
            dist.init_process_group(backend)
        else:
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    try:
        yield Ranks(dist.get_rank(), dist.get_world_size(), device)
    finally:
        if created:
            dist.destroy_process_group()


def shard_student(student: torch.nn.Module, ranks: Ranks, precision: str, mesh: DeviceMesh | None = None) -> None:
    """FSDP2 in place: one unit per decoder layer, one at the root — except in a world of one
    computing in fp32, where sharding and casting change nothing and FSDP would only copy every
    parameter and gradient through its collectives' buffers (its cost: docs/performance.md).

    Call after `set_trainable` and after loading weights; the student moves to `ranks.device` (unless
    it is there already: a fake-tensor trace cannot move modules). `mesh` defaults to one over all
    ranks (the trace passes one made before it enters fake mode)."""
    if any(t.device != ranks.device for t in [*student.parameters(), *student.buffers()]):
        student.to(ranks.device)
    if ranks.world == 1 and PRECISIONS[precision] is None:
        return
    mesh = mesh or init_device_mesh(ranks.device.type, (ranks.world,))
    policy = MixedPrecisionPolicy(param_dtype=PRECISIONS[precision], reduce_dtype=torch.float32)
    for block in student.blocks:
        for layer in block:
            fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(student, mesh=mesh, mp_policy=policy)


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The unsharded weights on the CPU: on rank 0 for a sharded model (a collective — every rank
    calls it; the others get {}), or the plain state dict."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    if isinstance(model, FSDPModule):
        return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def default_device() -> torch.device:
    """Where a one-process job (teacher check, diagnostics) runs its model: the GPU if there is one."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def is_main_process() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0
