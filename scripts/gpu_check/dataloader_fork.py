#!/usr/bin/env python3
"""A PyTorch training loop fed by a DataLoader whose workers are fork()ed from the CUDA process:
the way most training jobs run, and the hardest case for an injected library's fork handling
(the workers inherit the parent's CUDA state, its injected library and its collector socket, and
must neither use them nor keep the parent's connection open).

usage: dataloader_fork.py [--workers N] [--steps N]

Run it plain and under `cuflight run`: both must exit 0 and print the same checksum; under
cuflight the parent's stream ends with process_end and the workers, which launch nothing, send
nothing (`cuflight run` prints what it recorded).
"""

import argparse
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()

    import torch
    from torch.utils.data import DataLoader, Dataset

    class Samples(Dataset):
        """Deterministic CPU tensors, made in the workers."""

        def __len__(self):
            return args.steps * 64

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return torch.randn(256, generator=g), i % 10

    torch.manual_seed(0)
    device = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Samples(), batch_size=64, num_workers=args.workers,
                        multiprocessing_context="fork" if args.workers > 0 else None)
    start = time.monotonic()
    steps = 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
    torch.cuda.synchronize()
    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    print(f"steps={steps} workers={args.workers} seconds={time.monotonic() - start:.3f} "
          f"checksum={checksum:.6f}")


if __name__ == "__main__":
    main()
