"""PyTorch + torchvision reference for bench_models --model resnet18|resnet34 and for apps/train_resnet.

    build/torch-venv/bin/python3 bench/reference/resnet_torch.py bench --model resnet34 --image-size 224 --batch 16
    build/torch-venv/bin/python3 bench/reference/resnet_torch.py train --data-path DIR --num-classes 10 ...

bench: one training step of torchvision's ResNet as bench_models times it (5 classes, SGD with momentum 0.9 and
weight decay 0.005, cross-entropy, f32) on random images; prints ms/step (median of --steps timed steps after
warm-up) and the JSON line bench_models prints. Under torchrun it trains through DDP (ddp_torch.py).

train: the recipe train_resnet follows (pytorch_classification/Test5_resnet's train.py): a per-class random
split of an image folder (read_split_data), RandomResizedCrop + flip for training, Resize(size * 256 / 224) +
CenterCrop for validation, ImageNet normalisation, SGD (momentum 0.9, weight decay 0.005), the cosine LambdaLR
stepped per epoch, optional pretrained weights with mismatched tensors dropped and --freeze-layers; prints the
validation accuracy after every epoch in train_resnet's words. Two differences from the recipe, both
train_resnet's too: greyscale images are converted to RGB (the recipe refuses them), and the split is drawn
from --seed (the recipe fixes random.seed(0)), with another generator than syncgrad's, so the two programs
split alike in counts but not in which files.
"""
import argparse
import json
import math
import os
import random
import resource
import statistics
import time

import torch
import torch.nn as nn
import torchvision
from PIL import Image
from torchvision import transforms

import ddp_torch
import training_step

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")


def bench(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    classes = 5
    model = ddp_torch.wrap(getattr(torchvision.models, args.model)(num_classes=classes).to(args.device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9, weight_decay=0.005)
    x = torch.randn(args.batch, 3, args.image_size, args.image_size).to(args.device)
    y = torch.randint(0, classes, (args.batch,)).to(args.device)
    result = training_step.train(model, optimizer, lambda: nn.functional.cross_entropy(model(x), y), args,
                                 warmup=args.warmup, steps=args.steps)
    ms = result.ms_per_step
    processes = ddp_torch.world_size()
    images_per_s = 1000 * args.batch * processes / ms
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if not ddp_torch.is_main_process():
        return
    print(f"pytorch {torch.__version__} {args.model} batch {args.batch} x {processes} process(es) at "
          f"{args.image_size}x{args.image_size} threads {args.threads} on {args.device} (mixed precision {args.amp}): "
          f"{ms:.2f} ms/step, {images_per_s:.1f} images/s, peak RSS {peak_rss_mb:.0f} MB")
    print(json.dumps({"bench": "train_step", "impl": "pytorch", "model": args.model, "batch": args.batch,
                      "image_size": args.image_size, "threads": args.threads, "processes": processes,
                      **result.json_fields(args),
                      "images_per_s": round(images_per_s, 1), "peak_rss_mb": round(peak_rss_mb, 1)}))


def read_split_data(root, val_fraction, seed):
    """The recipe's read_split_data: int(count * val_fraction) random files of each class for validation."""
    rng = random.Random(seed)
    classes = sorted(c for c in os.listdir(root) if os.path.isdir(os.path.join(root, c)) and not c.startswith("."))
    train, val = [], []
    for label, name in enumerate(classes):
        folder = os.path.join(root, name)
        files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.lower().endswith(IMAGE_EXTENSIONS))
        chosen = set(rng.sample(files, k=int(len(files) * val_fraction)))
        for path in files:
            (val if path in chosen else train).append((path, label))
        print(f"class {label} '{name}': {len(files)} images, {len(files) - len(chosen)} for training, "
              f"{len(chosen)} for validation")
    return classes, train, val


class Images(torch.utils.data.Dataset):
    def __init__(self, files, transform):
        self.files, self.transform = files, transform

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        path, label = self.files[index]
        return self.transform(Image.open(path).convert("RGB")), label


def train(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    classes, train_files, val_files = read_split_data(args.data_path, args.val_fraction, args.seed)
    assert len(classes) == args.num_classes, f"{args.data_path} has {len(classes)} classes, not {args.num_classes}"
    size = args.image_size
    normalize = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
    train_transform = transforms.Compose([transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(),
                                          transforms.ToTensor(), normalize])
    val_transform = transforms.Compose([transforms.Resize(size * 256 // 224), transforms.CenterCrop(size),
                                        transforms.ToTensor(), normalize])
    train_loader = torch.utils.data.DataLoader(Images(train_files, train_transform), batch_size=args.batch_size,
                                               shuffle=True, num_workers=args.workers)
    val_loader = torch.utils.data.DataLoader(Images(val_files, val_transform), batch_size=args.batch_size,
                                             num_workers=args.workers)
    model = getattr(torchvision.models, args.model)(num_classes=args.num_classes)
    if args.weights:
        from safetensors.torch import load_file
        weights = load_file(args.weights)
        own = model.state_dict()
        kept = {k: v for k, v in weights.items() if k in own and own[k].shape == v.shape}
        print(model.load_state_dict(kept, strict=False))
    if args.freeze_layers:
        for name, param in model.named_parameters():
            if not name.startswith("fc."):
                param.requires_grad_(False)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(trainable, lr=args.lr, momentum=0.9, weight_decay=args.weight_decay)
    factor = lambda epoch: ((1 + math.cos(epoch * math.pi / args.epochs)) / 2) * (1 - args.lrf) + args.lrf  # noqa: E731
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=factor)
    for epoch in range(args.epochs):
        lr = optimizer.param_groups[0]["lr"]
        model.train()
        start, losses = time.perf_counter(), []
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        seconds = time.perf_counter() - start
        scheduler.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for images, labels in val_loader:
                correct += (model(images).argmax(1) == labels).sum().item()
        print(f"epoch {epoch + 1}/{args.epochs}: train loss {statistics.mean(losses):.4f}, val accuracy "
              f"{100 * correct / len(val_files):.2f}% ({correct}/{len(val_files)}), lr {lr:g} "
              f"({seconds:.1f} s, {len(train_files) / seconds:.1f} img/s)", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    b = commands.add_parser("bench", help="ms per training step on random images")
    b.add_argument("--model", default="resnet34", choices=["resnet18", "resnet34", "resnet50"])
    b.add_argument("--image-size", type=int, default=224)
    b.add_argument("--batch", type=int, default=16)
    b.add_argument("--threads", type=int, default=1)
    b.add_argument("--steps", type=int, default=5)
    b.add_argument("--warmup", type=int, default=2)
    training_step.add_arguments(b)
    t = commands.add_parser("train", help="the learning recipe on an image folder")
    t.add_argument("--data-path", required=True)
    t.add_argument("--model", default="resnet34", choices=["resnet18", "resnet34", "resnet50"])
    t.add_argument("--num-classes", type=int, default=5)
    t.add_argument("--epochs", type=int, default=30)
    t.add_argument("--batch-size", type=int, default=16)
    t.add_argument("--lr", type=float, default=0.001)
    t.add_argument("--lrf", type=float, default=0.1)
    t.add_argument("--weight-decay", type=float, default=0.005)
    t.add_argument("--weights", default="", help="a safetensors state_dict (torchvision names)")
    t.add_argument("--freeze-layers", action="store_true")
    t.add_argument("--image-size", type=int, default=224)
    t.add_argument("--val-fraction", type=float, default=0.2)
    t.add_argument("--workers", type=int, default=0)
    t.add_argument("--threads", type=int, default=1)
    t.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    bench(args) if args.command == "bench" else train(args)


if __name__ == "__main__":
    main()
