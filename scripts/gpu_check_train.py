"""A small CUDA training loop for scripts/gpu-check.sh: runs until killed, prints "ready"."""
import sys
import time

import torch

if not torch.cuda.is_available():
    sys.exit("gpu-check: torch sees no CUDA device")
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 1024)
print("ready", flush=True)
while True:
    xb = x.cuda(non_blocking=False)  # a host-to-device copy every step
    loss = model(xb).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    loss.item()  # a device-to-host copy and a sync
    time.sleep(0.001)
