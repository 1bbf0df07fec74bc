"""PyTorch reference for train_gpt's learning check: the minGPT-ddp recipe's training loop, single process,
on the same corpus, so that syncgrad's eval loss after the same steps can be compared with PyTorch's.

    build/apps/train_gpt gpt_config.model_type=gpt-mini data_config.truncate=0.005 trainer_config.batch_size=32 \\
        trainer_config.max_epochs=2 trainer_config.use_amp=false trainer_config.data_loader_workers=0 --threads 2
    build/torch-venv/bin/python3 bench/reference/gpt_train_torch.py --model gpt-mini --truncate 0.005 \\
        --batch-size 32 --epochs 2 --threads 2

What is the same as train_gpt: the text (the fortunes corpus built as data::fortunes_corpus builds it: the
files of /usr/share/games/fortunes in name order, no .dat/.u8 files or links, backspace overstrikes
removed), the truncation, CharDataset's windows and vocabulary, the 90/10 random split of the windows, the
model and its GPT-2 init, the optimizer groups, AdamW(lr 3e-4, betas 0.9/0.95, weight decay 0.1), clipping
at 1.0, a shuffled pass per epoch, dropout 0.1, f32, and the eval loss (mean over test windows of the mean
token cross-entropy). What differs: the random numbers (init, split, shuffle, dropout) come from PyTorch's
generator, not syncgrad's, so the two runs see statistically equal, not identical, draws; compare losses to
within the noise of a seed (run --seed 0, 1, 2 to see it).
"""
import argparse
import math
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset, random_split

from gpt_torch import GPT, PRESETS, create_optimizer

FORTUNES = "/usr/share/games/fortunes"


def fortunes_corpus(directory=FORTUNES):
    names = sorted(n for n in os.listdir(directory) if not n.endswith((".dat", ".u8")))
    paths = [os.path.join(directory, n) for n in names]
    text = []
    for path in paths:
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            for c in f.read():
                if c != "\b":
                    text.append(c)
                elif text:
                    text.pop()
    return "".join(text)


class CharDataset(Dataset):
    """The recipe's CharDataset: windows of block_size + 1 characters as (input, shifted target)."""

    def __init__(self, text, block_size, truncate):
        text = text[: int(len(text) * truncate)]
        chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(chars)}
        self.vocab_size = len(chars)
        self.block_size = block_size
        self.data = torch.tensor([self.stoi[c] for c in text], dtype=torch.long)

    def __len__(self):
        return len(self.data) - self.block_size

    def __getitem__(self, i):
        chunk = self.data[i : i + self.block_size + 1]
        return chunk[:-1], chunk[1:]


def evaluate(model, loader):
    model.eval()
    losses = []
    with torch.no_grad():
        for x, y in loader:
            logits, _ = model(x)
            per_token = torch.nn.functional.cross_entropy(logits.transpose(1, 2), y, reduction="none")
            losses.append(per_token.mean(1))
    model.train()
    return torch.cat(losses).mean().item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="gpt-mini", choices=sorted(PRESETS))
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--truncate", type=float, default=0.02)
    parser.add_argument("--train-split", type=float, default=0.9)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    dataset = CharDataset(fortunes_corpus(), args.block_size, args.truncate)
    train_length = int(len(dataset) * args.train_split)
    train_set, test_set = random_split(dataset, [train_length, len(dataset) - train_length])
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=args.batch_size)
    n_layer, n_head, n_embd = PRESETS[args.model]
    model = GPT(n_layer, n_head, n_embd, dataset.vocab_size, args.block_size)
    optimizer = create_optimizer(model, args.lr, args.weight_decay)
    print(f"pytorch {torch.__version__}: {len(dataset)} windows ({train_length} train), vocabulary "
          f"{dataset.vocab_size}, {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
          f"{math.ceil(train_length / args.batch_size)} steps per epoch")
    step = 0
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        for x, y in train_loader:
            optimizer.zero_grad(set_to_none=True)
            _, loss = model(x, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
        seconds = time.perf_counter() - start
        print(f"Epoch {epoch} | step {step} | train loss {loss.item():.5f} (last batch) | eval loss "
              f"{evaluate(model, test_loader):.5f} | {seconds:.0f} s")


if __name__ == "__main__":
    main()
