#!/usr/bin/env python3
"""A small deterministic PyTorch training run for gpu-check: Conv2d, ReLU, Linear, LayerNorm,
softmax (inside cross-entropy) and their backward passes, with an SGD step, for a few steps.

usage: torch_layers.py [--steps N] [--profile OUT.json]

--profile OUT.json: runs the same steps under torch.profiler with CUDA activities and writes the
kernels it saw as {"kernels": {name: launches}, "steps": N, "torch": version}.

Why two runs and not one: torch.profiler (Kineto) uses CUPTI, and so does cuflight's injected
library. Before CUDA 13.3 (and driver r610) CUPTI allows one callback subscriber and one set of
activity-buffer callbacks per process, so in one process either the profiler or cuflight would be
refused (or one would lose records). For a comparison that holds on any stack, gpu-check runs
this script twice (and a third time with both in one process, to check how they share CUPTI):
once with --profile and no injector,
to list the kernels and how often each ran, and once under `cuflight run` without --profile;
the run is deterministic (fixed seeds and shapes, no cuDNN autotuning), so both launch the same
kernels, and compare.py checks that every kernel the profiler saw is among cuflight's events.
"""

import argparse
import collections
import json
import os
import sys
import tempfile


def build(torch):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 16, kernel_size=3, padding=1)
            self.fc1 = nn.Linear(16 * 16 * 16, 256)
            self.norm = nn.LayerNorm(256)
            self.fc2 = nn.Linear(256, 10)

        def forward(self, x):
            x = torch.relu(self.conv(x))
            x = self.norm(self.fc1(x.flatten(1)))
            return self.fc2(torch.relu(x))

    return Net()


def train(torch, steps):
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    device = torch.device("cuda")
    model = build(torch).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(32, 3, 16, 16, device=device)
    labels = torch.randint(0, 10, (32,), device=device)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return float(loss)


def profile(torch, steps, out_path):
    from torch.profiler import ProfilerActivity, profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        loss = train(torch, steps)
    fd, trace_path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(trace_path)
        with open(trace_path, encoding="utf-8") as f:
            trace = json.load(f)
    finally:
        os.unlink(trace_path)
    counts = collections.Counter(
        e["name"] for e in trace.get("traceEvents", [])
        if isinstance(e, dict) and e.get("cat") == "kernel" and e.get("ph") == "X")
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"kernels": dict(sorted(counts.items())), "steps": steps,
                   "torch": torch.__version__}, f, indent=1)
    return loss, counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--profile", metavar="OUT.json")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("torch_layers.py: no PyTorch in " + sys.executable, file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 69
    if args.profile:
        loss, counts = profile(torch, args.steps, args.profile)
        print(f"loss {loss:.4f}; torch.profiler saw {len(counts)} kernels, "
              f"{sum(counts.values())} launches")
    else:
        print(f"loss {train(torch, args.steps):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
