#!/usr/bin/env python3
"""A small PyTorch training loop that prints its speed as one JSON line:
  {"mode": MODE, "steps": N, "seconds": S, "steps_per_s": R}

usage: torch_train.py [--steps N] [--warmup W] [--profiler]

The model (conv, linear, layer norm, cross-entropy, SGD; batch 64 of 3x32x32) is small on
purpose: its steps are short, so per-launch costs show. The clock runs over N steps after W
warm-up steps, synchronising before it starts and before it stops. --profiler runs the timed steps
inside torch.profiler with CPU and CUDA activities (what the injector is compared with); the
trace is not exported.
"""

import argparse
import json
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--profiler", action="store_true")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 69
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(32 * 32 * 32, 512), nn.LayerNorm(512), nn.ReLU(),
        nn.Linear(512, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(64, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()

    def timed():
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
        return time.perf_counter() - start

    if args.profiler:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            seconds = timed()
    else:
        seconds = timed()
    print(json.dumps({"mode": "profiler" if args.profiler else "plain", "steps": args.steps,
                      "seconds": round(seconds, 6),
                      "steps_per_s": round(args.steps / seconds, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
