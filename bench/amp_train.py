"""Training under ``webgrad.autocast`` against float32, in one run: the digits MLP (accuracy on
the test split) and a small character transformer on tiny_text (final loss), each trained
twice from the same initial weights and batches, with seconds per step.

    python bench/amp_train.py [--device webgpu] [--dtype float16|bfloat16]

Autocast follows torch's lists (webgrad/ops/autocasting.py): products in the reduced dtype,
softmax, layer_norm, losses in float32, GradScaler scaling the loss. Each step is torch's AMP
recipe: zero_grad, the forward under autocast, scaled backward, scaler.step, scaler.update
(zeroing first frees the last step's gradients before the forward, not after it).
Measure with OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset (see bench/mlp_step.py).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import webgrad
from webgrad import nn


def digits_mlp(device, dtype, amp: bool, epochs=15, batch=64):
    webgrad.manual_seed(0)
    x, y = webgrad.datasets.digits(split="train", device=device)
    tx, ty = webgrad.datasets.digits(split="test", device=device)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    opt = webgrad.optim.Adam(model.parameters(), lr=3e-3)
    scaler = webgrad.amp.GradScaler(device, enabled=amp and dtype is webgrad.float16)
    order = np.random.default_rng(0)
    steps, start = 0, time.perf_counter()
    for _ in range(epochs):
        for idx in np.array_split(order.permutation(len(y)), len(y) // batch):
            index = webgrad.tensor(idx, device=device)
            opt.zero_grad()
            with webgrad.autocast(device, dtype=dtype, enabled=amp):
                loss = nn.functional.cross_entropy(model(x[index]), y[index])
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            steps += 1
    loss.item()
    seconds = (time.perf_counter() - start) / steps
    with webgrad.no_grad(), webgrad.autocast(device, dtype=dtype, enabled=amp):
        accuracy = (model(tx).argmax(-1) == ty).float().mean().item()
    return accuracy, loss.item(), seconds


class CharModel(nn.Module):
    def __init__(self, vocab, width=64, context=32):
        super().__init__()
        self.embed, self.position = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.block = nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True)
        self.head = nn.Linear(width, vocab)
        self.mask = nn.Transformer.generate_square_subsequent_mask(context)

    def forward(self, ids):
        positions = webgrad.arange(ids.shape[1], device=ids.device)
        h = self.embed(ids) + self.position(positions)
        return self.head(self.block(h, src_mask=self.mask.to(ids.device), is_causal=True))


def char_transformer(device, dtype, amp: bool, steps=150, batch=16, context=32):
    webgrad.manual_seed(0)
    text = webgrad.datasets.tiny_text()
    vocab = sorted(set(text))
    ids = np.array([vocab.index(c) for c in text], dtype=np.int64)
    model = CharModel(len(vocab), context=context).to(device)
    opt = webgrad.optim.AdamW(model.parameters(), lr=2e-3)
    scaler = webgrad.amp.GradScaler(device, enabled=amp and dtype is webgrad.float16)
    rng = np.random.default_rng(0)

    def step():
        starts = rng.integers(0, len(ids) - context - 1, batch)
        xb = webgrad.tensor(np.stack([ids[s:s + context] for s in starts]), device=device)
        yb = webgrad.tensor(np.stack([ids[s + 1:s + context + 1] for s in starts]), device=device)
        opt.zero_grad()
        with webgrad.autocast(device, dtype=dtype, enabled=amp):
            logits = model(xb)
            loss = nn.functional.cross_entropy(logits.reshape(-1, len(vocab)), yb.reshape(-1))
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    losses, start = [], time.perf_counter()
    for _ in range(steps):
        losses.append(step())
    final = float(np.mean([v.item() for v in losses[-20:]]))
    seconds = (time.perf_counter() - start) / steps
    with webgrad.profiler.profile(profile_memory=True) as prof:  # one more step: the profiler's peak bytes
        step().item()
    return final, seconds, prof.memory_stats().get(device, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default=None, help="float16 or bfloat16 (default: autocast's for the device)")
    args = parser.parse_args()
    dtype = getattr(webgrad, args.dtype) if args.dtype else webgrad.amp.get_autocast_dtype(args.device)
    print(f"device {args.device}, autocast dtype {dtype.name}")
    full = digits_mlp(args.device, dtype, amp=False)
    mixed = digits_mlp(args.device, dtype, amp=True)
    print(f"digits MLP   float32: accuracy {full[0]:.4f} loss {full[1]:.4f} {full[2] * 1e3:.2f} ms/step")
    print(f"digits MLP  autocast: accuracy {mixed[0]:.4f} loss {mixed[1]:.4f} {mixed[2] * 1e3:.2f} ms/step  "
          f"(accuracy {100 * (mixed[0] - full[0]):+.2f} points, time {mixed[2] / full[2]:.2f}x)")
    full = char_transformer(args.device, dtype, amp=False)
    mixed = char_transformer(args.device, dtype, amp=True)
    print(f"char transformer  float32: final loss {full[0]:.4f} {full[1] * 1e3:.1f} ms/step  "
          f"peak {full[2] / 2 ** 20:.2f} MiB")
    print(f"char transformer autocast: final loss {mixed[0]:.4f} {mixed[1] * 1e3:.1f} ms/step  "
          f"peak {mixed[2] / 2 ** 20:.2f} MiB  (loss {100 * (mixed[0] / full[0] - 1):+.2f}%, "
          f"time {mixed[1] / full[1]:.2f}x, peak memory {mixed[2] / max(full[2], 1):.2f}x)")


if __name__ == "__main__":
    main()
