#!/usr/bin/env python3
"""Converts model weights between PyTorch's .pth and the safetensors files syncgrad reads and writes.

    # torchvision's ImageNet weights for resnet34 (torchvision downloads them into its cache):
    python3 scripts/convert-torchvision-weights.py --model resnet34 --weights IMAGENET1K_V1 resnet34.safetensors
    # a state_dict saved with torch.save (also a checkpoint dict holding one under "state_dict" or "model"):
    python3 scripts/convert-torchvision-weights.py resnet34.pth resnet34.safetensors
    # back: weights syncgrad saved, for torchvision's model.load_state_dict(torch.load(...)):
    python3 scripts/convert-torchvision-weights.py resnet34.safetensors resnet34.pth

The names are kept as they are: syncgrad's ResNets use torchvision's (docs/resnet.md). A "module."
prefix, which DistributedDataParallel adds in PyTorch, is removed. Tensors keep their dtypes
(num_batches_tracked stays int64). Needs torch and safetensors (pip install torch torchvision
safetensors); syncgrad itself never downloads anything.
"""
import argparse
import sys

import torch
from safetensors.torch import load_file, save_file


def read_pth(path):
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises several types for a file that is not its own
        sys.exit(f"{path}: torch.load cannot read it as weights ({type(error).__name__}: {str(error).splitlines()[0]})")
    for key in ("state_dict", "model"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        sys.exit(f"{path}: expected a state_dict (a dict of tensors), got {type(state).__name__}")
    return state


def torchvision_weights(model, weights):
    import torchvision

    return torchvision.models.get_model(model, weights=weights).state_dict()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", metavar="PATH", help="INPUT OUTPUT, or OUTPUT with --model/--weights")
    parser.add_argument("--model", help="a torchvision model name, e.g. resnet34")
    parser.add_argument("--weights", help="its weights enum name, e.g. IMAGENET1K_V1 or DEFAULT")
    args = parser.parse_args()
    if args.model:
        if len(args.paths) != 1 or not args.weights:
            parser.error("--model takes --weights and one OUTPUT path")
        state, output = torchvision_weights(args.model, args.weights), args.paths[0]
    elif len(args.paths) == 2:
        source, output = args.paths
        state = load_file(source) if source.endswith(".safetensors") else read_pth(source)
    else:
        parser.error("give INPUT OUTPUT, or --model NAME --weights NAME OUTPUT")

    state = {name.removeprefix("module."): tensor.detach().contiguous() for name, tensor in state.items()}
    if output.endswith(".safetensors"):
        save_file(state, output, metadata={"format": "pt"})
    else:
        torch.save(state, output)
    count = sum(t.numel() for t in state.values() if t.is_floating_point())
    print(f"wrote {output}: {len(state)} tensors, {count:,} floating-point values")


if __name__ == "__main__":
    main()
