"""Digits demo: train an MLP or a CNN on the 8x8 handwritten digits, then classify drawings.

    python demos/digits.py                       # MLP, numpy backend, tqdm progress
    python demos/digits.py --model cnn --device webgpu --steps 400

The page /demos/digits.html runs this same file in the browser worker: it fetches it from
/demos/py/digits.py, imports it as a module once and then calls the page's functions at the
end of this file by name (``runtime.call``, data as arguments, never Python source): ``start``
makes the model, ``train`` reports through the page's progress events, ``predict`` takes the
pad's pixels as a Float32Array. The file imports only webgrad (the data ships in the wheel),
so it runs in both places.
"""
from __future__ import annotations

import argparse

import numpy as np

import webgrad
from webgrad import nn
from webgrad.web.worker import progress

LABELS = list("0123456789")


class DigitsCNN(nn.Module):
    """Two 3x3 convolutions with pooling, then a linear classifier: (N, 1, 8, 8) -> (N, 10)."""

    def __init__(self, channels: int = 16):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),          # 8x8 -> 4x4
            nn.Conv2d(channels, 2 * channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))  # -> 2x2
        self.classifier = nn.Linear(2 * channels * 4, 10)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def make_model(kind: str = "mlp") -> nn.Module:
    """``"mlp"``: 64 -> 128 -> 10 on flat images; ``"cnn"``: ``DigitsCNN`` on (N, 1, 8, 8)."""
    if kind == "mlp":
        return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    if kind == "cnn":
        return DigitsCNN()
    raise ValueError(f"digits.make_model: kind must be 'mlp' or 'cnn', got {kind!r}")


class DigitsDemo:
    """The model, its optimizer and the data; ``train`` may be called again to continue."""

    def __init__(self, kind: str = "mlp", lr: float = 1e-2, batch_size: int = 64, seed: int = 0, device=None):
        webgrad.manual_seed(seed)
        self.kind = kind
        self.model = make_model(kind).to(device)
        flat = kind == "mlp"
        self.x_train, self.y_train = webgrad.datasets.digits("train", flatten=flat, device=device)
        self.x_test, self.y_test = webgrad.datasets.digits("test", flatten=flat, device=device)
        self.optimizer = webgrad.optim.Adam(self.model.parameters(), lr=lr)
        self.batch_size = batch_size
        self.step = 0
        self.accuracy = None

    def input_shape(self) -> list[int]:
        return [1, 64] if self.kind == "mlp" else [1, 1, 8, 8]

    def evaluate(self) -> float:
        self.model.eval()
        with webgrad.no_grad():
            predicted = self.model(self.x_test).argmax(dim=1)
        self.model.train()
        self.accuracy = (predicted == self.y_test).float().mean().item()
        return self.accuracy

    def train(self, steps: int, on_progress=None, every: int = 10) -> float:
        """``steps`` Adam steps on random mini-batches; ``on_progress(dict)`` every ``every`` steps
        with step, total, loss and (test) accuracy. Returns the test accuracy."""
        total = self.step + steps
        for _ in range(steps):
            index = webgrad.randint(0, len(self.y_train), (self.batch_size,))
            loss = nn.functional.cross_entropy(self.model(self.x_train[index]), self.y_train[index])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.step += 1
            if on_progress is not None and (self.step % every == 0 or self.step == total):
                on_progress({"step": self.step, "total": total, "loss": loss.item(), "accuracy": self.evaluate()})
        return self.evaluate()

    def predict(self, pixels) -> list[float]:
        """Class probabilities for one image: 64 values in 0..1 (row by row, 1 = ink)."""
        x = webgrad.tensor(np.asarray(pixels, dtype=np.float32)).reshape(self.input_shape())
        self.model.eval()
        with webgrad.no_grad():
            probabilities = self.model(x.to(self.x_test.device)).softmax(dim=1)[0]
        self.model.train()
        return probabilities.tolist()

    def push(self, name: str, url=None) -> dict:
        """Save the trained model to the store (with labels and the image layout the widget needs)."""
        metadata = {"labels": LABELS, "image": {"height": 8, "width": 8, "channels": 1},
                    "demo": "digits", "kind": self.kind, "test_accuracy": self.accuracy}
        return webgrad.store.push(self.model, name, metadata, url=url, input_size=tuple(self.input_shape()))


# ----------------------------------------------------------------------------- the page's calls
# The page's model lives here, so the page names functions rather than writing Python.

current: DigitsDemo | None = None


def start(kind: str = "mlp", lr: float = 1e-2) -> None:
    """A new, untrained model for the page (``current``)."""
    global current
    current = DigitsDemo(kind, lr=lr)


def _current() -> DigitsDemo:
    if current is None:
        raise RuntimeError("digits: no model yet; call start(kind, lr) first")
    return current


def train(steps: int, every: int = 10) -> float:
    """``steps`` more steps of the page's model, each ``every``-th reported as a progress event."""
    return _current().train(int(steps), progress, every=int(every))


def predict(pixels) -> np.ndarray:
    """Class probabilities (float32) for the pad's 64 pixels (a Float32Array reaches here as a memoryview)."""
    return np.asarray(_current().predict(pixels), dtype=np.float32)


def push(name: str) -> dict:
    """Save the page's model to the store (the page's own server) as ``name``."""
    return _current().push(str(name))


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "webgpu"])
    parser.add_argument("--steps", type=int, default=600)
    args = parser.parse_args(argv)
    from tqdm import tqdm  # native runs only (pip install tqdm); the page reports through on_progress

    demo = DigitsDemo(args.model, device=args.device)
    with tqdm(total=args.steps, desc=f"digits {args.model}") as bar:
        def progress(event):
            bar.update(event["step"] - bar.n)
            bar.set_postfix(loss=f"{event['loss']:.3f}", accuracy=f"{event['accuracy']:.3f}")
        accuracy = demo.train(args.steps, progress, every=50)
    print(f"test accuracy: {accuracy:.3f}")
    print("the first test image is a", LABELS[int(demo.y_test[0].item())], "- predicted",
          LABELS[max(range(10), key=demo.predict(demo.x_test[0].reshape(-1).tolist()).__getitem__)])
    return accuracy


if __name__ == "__main__":
    main()
