"""Train a small CNN on the 8x8 digits (natively or in the browser).

    python demos/digits_cnn.py [--device webgpu]
"""
from __future__ import annotations

import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run as a script

import webgrad  # noqa: E402
from webgrad import nn  # noqa: E402

from demos.digits_mlp import train  # noqa: E402


class DigitsCNN(nn.Module):
    """conv(1->16) -> relu -> maxpool -> conv(16->32) -> relu -> avgpool -> linear."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
        )
        self.classifier = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x):
        x = x.reshape(-1, 1, 8, 8)  # the shared loader gives flat 64-pixel rows
        return self.classifier(self.features(x).flatten(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "webgpu"])
    parser.add_argument("--epochs", type=int, default=12)
    args = parser.parse_args()
    webgrad.manual_seed(0)
    _, accuracy = train(DigitsCNN(), args.device, args.epochs)
    print(f"final test accuracy: {accuracy:.3f}")


if __name__ == "__main__":
    main()
