# 2-D classifier: two interleaved spirals, an MLP with tanh, and its decision boundary as an image.
import math

import webgrad
from webgrad import nn

webgrad.manual_seed(0)
n = 200
t = webgrad.linspace(0.25, 3 * math.pi, n)
noise = 0.15
arm = webgrad.stack([t * webgrad.cos(t), t * webgrad.sin(t)], dim=1) / (3 * math.pi)
x = webgrad.cat([arm, -arm]) + noise * webgrad.randn(2 * n, 2) / 3
y = webgrad.cat([webgrad.zeros(n, dtype=webgrad.int64), webgrad.ones(n, dtype=webgrad.int64)])

model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 2))
optimizer = webgrad.optim.Adam(model.parameters(), lr=2e-2)
steps = 400
for step in range(1, steps + 1):
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        accuracy = (logits.argmax(dim=1) == y).float().mean().item()
        webgrad_progress({"step": step, "total": steps, "loss": loss.item(), "accuracy": accuracy})
print(f"training accuracy {accuracy:.3f} on {WEBGRAD_DEVICE}")

# The probability of class 1 over a 48x48 grid of the plane, drawn 4x larger.
side = 48
axis = webgrad.linspace(-1.2, 1.2, side)
grid = webgrad.stack([axis.repeat(side), axis.reshape(side, 1).expand(side, side).reshape(-1)], dim=1)
with webgrad.no_grad():
    boundary = model(grid).softmax(dim=1)[:, 1].reshape(side, side).flip(0)
webgrad.display.Image(boundary, scale=4, vmin=0, vmax=1)
