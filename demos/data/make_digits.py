"""Write ``digits.npz``: scikit-learn's 8x8 handwritten digits, for the demos.

Run once (needs scikit-learn; the result is committed so demos and tests don't):

    python demos/data/make_digits.py

The file holds ``images`` (uint8 in 0..16, shape (1797, 8, 8)) and ``labels``
(uint8 0..9, shape (1797,)), about 45 KB compressed.
"""
from __future__ import annotations

import pathlib

import numpy as np

OUTPUT = pathlib.Path(__file__).with_name("digits.npz")


def main() -> None:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = digits.images.astype(np.uint8)  # already whole numbers 0..16
    labels = digits.target.astype(np.uint8)
    if not np.array_equal(images, digits.images) or images.shape != (1797, 8, 8):
        raise RuntimeError("scikit-learn's digits changed; expected integers 0..16 in (1797, 8, 8)")
    np.savez_compressed(OUTPUT, images=images, labels=labels)
    print(f"wrote {OUTPUT} ({OUTPUT.stat().st_size} bytes, {len(labels)} images)")


if __name__ == "__main__":
    main()
