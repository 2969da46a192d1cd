"""Character transformer training step against PyTorch CPU, measured in one run, printed as ratios.

The model of bench/amp_train.py: token and position embeddings (width 64, context 32), one
nn.TransformerEncoderLayer (4 heads, feed-forward 256, causal mask, post-norm), a linear head
over tiny_text's characters; batch 16, AdamW, cross-entropy. webgrad cpu (eager and compiled)
and torch CPU run the same model written the same way, alternated, medians of the rounds;
``--webgpu`` adds webgrad on WebGPU (every step reads its loss back, so the time includes the
wait for the GPU). ``--threads 1`` gives both one thread, as bench/cnn_step.py.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/transformer_step.py [--threads 1] [--webgpu]
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import numpy as np

import webgrad

WIDTH, HEADS, CONTEXT, BATCH = 64, 4, 32, 16


def char_model(lib, vocab):
    nn = lib.nn

    class CharModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.position = nn.Embedding(vocab, WIDTH), nn.Embedding(CONTEXT, WIDTH)
            self.block = nn.TransformerEncoderLayer(WIDTH, HEADS, 4 * WIDTH, dropout=0.0, batch_first=True)
            self.head = nn.Linear(WIDTH, vocab)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(CONTEXT))

        def forward(self, ids):
            h = self.embed(ids) + self.position(lib.arange(CONTEXT, device=ids.device))
            return self.head(self.block(h, src_mask=self.mask, is_causal=True))
    return CharModel()


def batches(rounds):
    """The same index batches for every framework: (inputs, targets) as numpy int64."""
    text = webgrad.datasets.tiny_text()
    vocab = sorted(set(text))
    ids = np.array([vocab.index(c) for c in text], dtype=np.int64)
    rng = np.random.default_rng(0)
    starts = rng.integers(0, len(ids) - CONTEXT - 1, (rounds, BATCH))
    return len(vocab), [(np.stack([ids[s:s + CONTEXT] for s in row]),
                         np.stack([ids[s + 1:s + CONTEXT + 1] for s in row])) for row in starts]


def make_step(lib, vocab, device="cpu", compiled=False):
    lib.manual_seed(0)
    model = char_model(lib, vocab).to(device)
    opt = lib.optim.AdamW(model.parameters(), lr=2e-3)
    F = lib.nn.functional

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss
    run = webgrad.compile(step) if compiled else step
    tensor = (lambda a: lib.tensor(a, device=device)) if lib is webgrad else lib.from_numpy
    read = device == "webgpu"

    def one(batch):
        loss = run(tensor(batch[0]), tensor(batch[1]))
        if read:
            loss.item()
    return one


def timed(step, data, repeats) -> list:
    """Seconds per step of each of ``repeats`` passes over ``data`` (after two warm-up passes)."""
    for batch in data[:2 * len(data) // 3]:
        step(batch)
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        for batch in data:
            step(batch)
        out.append((time.perf_counter() - start) / len(data))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="threads for both (default: their own choice)")
    parser.add_argument("--webgpu", action="store_true", help="also webgrad on webgpu")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import torch

    limits = contextlib.nullcontext()
    if args.threads:
        from threadpoolctl import threadpool_limits
        torch.set_num_threads(args.threads)
        limits = threadpool_limits(args.threads)
    vocab, data = batches(30)
    runners = {"torch cpu": make_step(torch, vocab), "webgrad cpu": make_step(webgrad, vocab),
               "webgrad cpu compiled": make_step(webgrad, vocab, compiled=True)}
    if args.webgpu:
        runners["webgrad webgpu"] = make_step(webgrad, vocab, "webgpu")
    times: dict = {name: [] for name in runners}
    with limits:
        for _ in range(args.rounds):  # alternated, so a busy spell hits every runner alike
            for name, step in runners.items():
                times[name] += timed(step, data, 1)
    print(f"char transformer (width {WIDTH}, {HEADS} heads, context {CONTEXT}), batch {BATCH}, AdamW; "
          f"threads: {args.threads or 'default'}; ms per training step, medians of {args.rounds} rounds")
    peer = statistics.median(times["torch cpu"])
    for name, values in times.items():
        ms = statistics.median(values)
        print(f"  {name:24} {ms * 1e3:8.2f}" + ("" if name == "torch cpu" else f"    {ms / peer:.2f}x torch"))


if __name__ == "__main__":
    main()
