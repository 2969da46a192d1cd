"""A small model, as a user's project has one: fits y = 3x - 1 with noise."""
import webgrad
from webgrad import nn


def make_data(n=64, seed=0):
    webgrad.manual_seed(seed)
    x = webgrad.rand(n, 1) * 4 - 2
    y = 3 * x - 1 + 0.05 * webgrad.randn(n, 1)
    return x, y


def make_model():
    return nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))


def fit(model, x, y, steps=100, lr=0.05, on_step=None):
    optimizer = webgrad.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for step in range(steps):
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if on_step is not None:
            on_step(step, losses[-1])
    return losses
