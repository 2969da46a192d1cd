"""Train a small MLP on the 8x8 digits — the same code natively and in the browser.

    python demos/digits_mlp.py                  # numpy backend
    python demos/digits_mlp.py --device webgpu  # WebGPU (wgpu-py natively)

It is PyTorch code with ``torch`` replaced by ``webgrad``.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run as a script

import webgrad  # noqa: E402
from webgrad import nn  # noqa: E402
from webgrad.utils.data import DataLoader, TensorDataset  # noqa: E402

from demos.data.digits import load_digits, train_test_split  # noqa: E402


def build_model() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def digits_tensors(device="cpu"):
    x_train, y_train, x_test, y_test = train_test_split(*load_digits())
    return [webgrad.tensor(a, device=device) for a in (x_train, y_train, x_test, y_test)]


def evaluate(model, x, y) -> float:
    model.eval()
    with webgrad.no_grad():
        predicted = model(x).argmax(dim=1)
    model.train()
    return (predicted == y).float().mean().item()


def train(model, device="cpu", epochs=20, batch_size=64, lr=1e-2, seed=0, log=print):
    """Train ``model`` on the digits; returns (per-step losses, test accuracy)."""
    webgrad.manual_seed(seed)
    x_train, y_train, x_test, y_test = digits_tensors(device)
    model.to(device)
    loader = DataLoader(TensorDataset(x_train, y_train), batch_size=batch_size, shuffle=True)
    optimizer = webgrad.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for epoch in range(epochs):
        for images, labels in loader:
            loss = nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if log:
            log(f"epoch {epoch + 1:2d}  loss {losses[-1]:.4f}  test accuracy {evaluate(model, x_test, y_test):.3f}")
    return losses, evaluate(model, x_test, y_test)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "webgpu"])
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()
    webgrad.manual_seed(0)
    _, accuracy = train(build_model(), args.device, args.epochs)
    print(f"final test accuracy: {accuracy:.3f}")


if __name__ == "__main__":
    main()
