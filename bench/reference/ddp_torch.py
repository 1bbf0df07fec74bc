"""Data-parallel runs of the PyTorch reference benches, measured as bench_models measures its own under sgrun.

    build/torch-venv/bin/torchrun --standalone --nproc-per-node 2 bench/reference/resnet_torch.py bench ...
    build/torch-venv/bin/torchrun --standalone --nproc-per-node 2 bench/reference/cnn_torch.py --threads 1

Started by torchrun (WORLD_SIZE > 1), every process trains its own batch through DistributedDataParallel on Gloo
(PyTorch's defaults: 25 MB buckets, gradients averaged) and only rank 0 prints; the images/s it reports count every
process's batch, as bench_models does. Without torchrun the benches run as before.
"""
import os

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def world_size():
    return int(os.environ.get("WORLD_SIZE", "1"))


def wrap(model):
    """The model itself on one process; under torchrun, the model in DDP over Gloo."""
    if world_size() == 1:
        return model
    dist.init_process_group("gloo")
    return DistributedDataParallel(model)


def is_main_process():
    return int(os.environ.get("RANK", "0")) == 0
