"""A small training loop for scripts/gpu-check.sh: runs until killed, prints "ready". A DataLoader
feeds it (enumerate(DataLoader) ranges), AdamW steps it (Optimizer.step / zero_grad ranges), each
batch is copied to the device (host-to-device copies) and loss.item() reads the loss back
(device-to-host copy and a sync). --device cpu: the same loop without a GPU (a smoke test)."""
import argparse
import sys
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
args = ap.parse_args()
if args.device == "cuda" and not torch.cuda.is_available():
    sys.exit("gpu-check: torch sees no CUDA device")
width = 1024 if args.device == "cuda" else 64
model = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.ReLU(), torch.nn.Linear(4 * width, width))
model = model.to(args.device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.utils.data.TensorDataset(torch.randn(64 * 256, width))
loader = torch.utils.data.DataLoader(data, batch_size=256, shuffle=True)
print("ready", flush=True)
while True:
    for (x,) in loader:
        xb = x.to(args.device)
        loss = model(xb).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        time.sleep(0.001)
