"""Polynomial regression, in the shape of pytorch/examples' regression: fit a random degree-4 polynomial
with one nn.Linear layer over the features [x, x^2, x^3, x^4], SGD with momentum, and a learning-rate
schedule (ReduceLROnPlateau on the epoch loss, after a LinearLR warm-up in a SequentialLR).
"""
import argparse

import numpy as np

import webgrad as torch
import webgrad.nn.functional as F

POLY_DEGREE = 4
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=30)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--no-accel", action="store_true")
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device("cpu")
if torch.accelerator.is_available() and not args.no_accel:
    device = torch.accelerator.current_accelerator()
rng = np.random.default_rng(3)
W_target = torch.tensor(rng.standard_normal((POLY_DEGREE, 1)).astype(np.float32) * 5)
b_target = torch.tensor(rng.standard_normal(1).astype(np.float32) * 5)


def make_features(x):
    """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    return x.mm(W_target) + b_target.item()


def poly_desc(W, b):
    result = "y = "
    for i, w in enumerate(W):
        result += f"{w:+.2f} x^{i + 1} "
    result += f"{b[0]:+.2f}"
    return result


xs = torch.tensor(rng.uniform(-1, 1, (20, 32)).astype(np.float32))
fc = torch.nn.Linear(W_target.size(0), 1).to(device)
optimizer = torch.optim.SGD(fc.parameters(), lr=0.05, momentum=0.9)
warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.2, total_iters=3)
constant = torch.optim.lr_scheduler.ConstantLR(optimizer, factor=1.0, total_iters=1)
scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, constant], milestones=[3])
plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=2)
losses = []
for epoch in range(args.epochs):
    epoch_loss = 0.0
    for x in xs:
        batch_x = make_features(x).to(device)
        batch_y = f(make_features(x)).to(device)
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        output.backward()
        optimizer.step()
        epoch_loss += output.item()
    epoch_loss /= len(xs)
    losses.append(epoch_loss)
    if epoch < 3:
        scheduler.step()
    else:
        plateau.step(epoch_loss)

print(f"Loss: {epoch_loss:.6f} after {args.epochs} epochs")
print("==> Learned function:\t" + poly_desc(fc.weight.view(-1).tolist(), fc.bias.tolist()))
print("==> Actual function:\t" + poly_desc(W_target.view(-1).tolist(), b_target.tolist()))
