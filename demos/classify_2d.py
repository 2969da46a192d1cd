"""2-D classification demo: an MLP learns spirals, circles, XOR or gaussians; its decision
boundary is a heat map over the plane (in the spirit of the TensorFlow Playground).

    python demos/classify_2d.py --dataset spirals --layers 2 --width 16 --activation tanh

The page /demos/classify_2d.html runs this same file in the browser worker (fetched from
/demos/py/classify_2d.py and imported as a module once): it calls the page's functions at the
end of this file by name with its controls' values (``runtime.call``, never Python source):
``start`` builds a ``Classify2D``, ``train`` reports progress events carrying the boundary grid.
"""
from __future__ import annotations

import argparse
import math

import numpy as np

import webgrad
from webgrad import nn
from webgrad.web.worker import progress

DATASETS = ("spirals", "circles", "xor", "gaussians")
ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "sigmoid": nn.Sigmoid, "gelu": nn.GELU}
EXTENT = 1.2  # the plane shown is [-EXTENT, EXTENT]^2


def make_data(name: str, n: int = 200, noise: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points in [-1, 1]^2 (float32, (n, 2)) and their class 0/1 (int64)."""
    rng = np.random.default_rng(seed)
    half = n // 2
    if name == "spirals":
        t = np.sqrt(rng.uniform(0.05, 1, half)) * 3 * math.pi
        arm = np.stack([t * np.cos(t), t * np.sin(t)], 1) / (3 * math.pi)
        x = np.concatenate([arm, -arm])
    elif name == "circles":
        radius = np.concatenate([rng.uniform(0, 0.45, half), rng.uniform(0.65, 1.0, half)])
        angle = rng.uniform(0, 2 * math.pi, 2 * half)
        x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1)
        x = x[np.r_[half:2 * half, 0:half]]  # outer ring is class 0, inner class 1
    elif name == "xor":
        x = rng.uniform(-1, 1, (2 * half, 2))
        x += np.sign(x) * 0.05  # a small gap along the axes
        x = x[np.argsort(x[:, 0] * x[:, 1] > 0, kind="stable")]
    elif name == "gaussians":
        x = np.concatenate([rng.normal((-0.45, -0.35), 0.22, (half, 2)), rng.normal((0.45, 0.35), 0.22, (half, 2))])
    else:
        raise ValueError(f"classify_2d.make_data: dataset must be one of {DATASETS}, got {name!r}")
    x = x + rng.normal(0, noise * 0.3, x.shape)
    y = np.repeat(np.array([0, 1]), half)
    return np.clip(x, -1.1, 1.1).astype(np.float32), y.astype(np.int64)


def make_model(layers: int = 2, width: int = 16, activation: str = "tanh") -> nn.Module:
    """An MLP 2 -> width (x layers) -> 2 with the chosen activation between layers."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"classify_2d.make_model: activation must be one of {sorted(ACTIVATIONS)}, "
                         f"got {activation!r}")
    if not 1 <= layers <= 8 or not 1 <= width <= 256:
        raise ValueError(f"classify_2d.make_model: layers must be 1..8 and width 1..256, got {layers} and {width}")
    parts: list[nn.Module] = []
    size = 2
    for _ in range(layers):
        parts += [nn.Linear(size, width), ACTIVATIONS[activation]()]
        size = width
    return nn.Sequential(*parts, nn.Linear(size, 2))


class Classify2D:
    def __init__(self, dataset="spirals", layers=2, width=16, activation="tanh", lr=0.03, noise=0.1,
                 seed=0, side=40, device=None):
        webgrad.manual_seed(seed)
        points, labels = make_data(dataset, noise=noise, seed=seed)
        self.points, self.labels = points, labels
        self.x = webgrad.tensor(points, device=device)
        self.y = webgrad.tensor(labels, device=device)
        self.model = make_model(layers, width, activation).to(device)
        self.optimizer = webgrad.optim.Adam(self.model.parameters(), lr=lr)
        # Cell centres: the page stretches the side x side grid over the plane, so grid value i
        # is drawn over the i-th slice of [-EXTENT, EXTENT], centred in it.
        half_cell = EXTENT / side
        axis = np.linspace(-EXTENT + half_cell, EXTENT - half_cell, side, dtype=np.float32)
        gx, gy = np.meshgrid(axis, axis[::-1])  # row 0 is the top of the picture (y = +EXTENT)
        self.grid = webgrad.tensor(np.stack([gx.ravel(), gy.ravel()], 1), device=device)
        self.side = side
        self.step = 0

    def boundary(self) -> list[float]:
        """P(class 1) on a side x side grid over the plane, row by row from the top."""
        with webgrad.no_grad():
            return self.model(self.grid).softmax(dim=1)[:, 1].tolist()

    def train(self, steps: int, on_progress=None, every: int = 10) -> float:
        """Full-batch Adam steps; ``on_progress`` gets step, total, loss, accuracy and the boundary."""
        total = self.step + steps
        loss = None
        for _ in range(steps):
            logits = self.model(self.x)
            loss = nn.functional.cross_entropy(logits, self.y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.step += 1
            if on_progress is not None and (self.step % every == 0 or self.step == total):
                accuracy = (logits.argmax(dim=1) == self.y).float().mean().item()
                on_progress({"step": self.step, "total": total, "loss": loss.item(), "accuracy": accuracy,
                             "boundary": self.boundary()})
        return float("nan") if loss is None else loss.item()

    def accuracy(self) -> float:
        with webgrad.no_grad():
            return (self.model(self.x).argmax(dim=1) == self.y).float().mean().item()

    def push(self, name: str, url=None) -> dict:
        """Save the model to the store: its input is a point on the plane shown."""
        metadata = {"labels": ["class 0", "class 1"], "demo": "classify_2d",
                    "x_range": [-EXTENT, EXTENT], "y_range": [-EXTENT, EXTENT]}
        return webgrad.store.push(self.model, name, metadata, url=url, input_size=(1, 2))


def ascii_boundary(values: list[float], side: int, cells: int = 24) -> str:
    """The boundary as text: '#' where class 1 is more likely, '.' elsewhere."""
    rows = []
    for r in range(cells):
        row = int(r * side / cells)
        rows.append("".join("#" if values[row * side + int(c * side / cells)] > 0.5 else "."
                            for c in range(cells)))
    return "\n".join(rows)


# ----------------------------------------------------------------------------- the page's calls
# The page's model lives here, so the page names functions rather than writing Python.

current: Classify2D | None = None


def _current() -> Classify2D:
    if current is None:
        raise RuntimeError("classify_2d: no model yet; call start(...) first")
    return current


def start(dataset: str = "spirals", layers: int = 2, width: int = 16, activation: str = "tanh",
          lr: float = 0.03) -> dict:
    """A new, untrained model from the page's controls; returns its points {xs, labels} and boundary."""
    global current
    current = Classify2D(str(dataset), int(layers), int(width), str(activation), float(lr))
    return {"xs": current.points.tolist(), "labels": current.labels.tolist(), "boundary": current.boundary()}


def train(steps: int, every: int = 10) -> float:
    """``steps`` more steps of the page's model, each ``every``-th reported as a progress event."""
    return _current().train(int(steps), progress, every=int(every))


def push(name: str) -> dict:
    """Save the page's model to the store (the page's own server) as ``name``."""
    return _current().push(str(name))


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="spirals", choices=DATASETS)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--width", type=int, default=24)
    parser.add_argument("--activation", default="tanh", choices=sorted(ACTIVATIONS))
    parser.add_argument("--lr", type=float, default=0.03)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--device", default="cpu", choices=["cpu", "webgpu"])
    args = parser.parse_args(argv)
    from tqdm import tqdm  # native runs only (pip install tqdm); the page reports through on_progress

    demo = Classify2D(args.dataset, args.layers, args.width, args.activation, args.lr, device=args.device)
    with tqdm(total=args.steps, desc=args.dataset) as bar:
        def progress(event):
            bar.update(event["step"] - bar.n)
            bar.set_postfix(loss=f"{event['loss']:.3f}", accuracy=f"{event['accuracy']:.3f}")
        demo.train(args.steps, progress, every=25)
    accuracy = demo.accuracy()
    print(ascii_boundary(demo.boundary(), demo.side))
    print(f"training accuracy: {accuracy:.3f}")
    return accuracy


if __name__ == "__main__":
    main()
