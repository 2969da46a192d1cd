"""A character-level GRU that learns a list of names and generates new ones, in the shape of the
"generating names with a character-level RNN" tutorial: nn.Embedding, nn.GRU, cross-entropy over
next characters, Adam with clip_grad_norm_, then sampling with multinomial (temperature) and topk.
"""
import argparse

import numpy as np

import webgrad as torch
import webgrad.nn as nn
import webgrad.nn.functional as F

NAMES = """anna ada alan alice amelia arthur beatrice benedict carla cecilia clara daniel dora edith elena emil
felix flora frida george greta hans hannah ida irene isaac jonas julia karl klara lena leon lotte lucas marta max
mila nora oskar otto paula peter rosa ruth sara simon sofia theo tilda ulla vera viktor walter wilma""".split()

parser = argparse.ArgumentParser()
parser.add_argument("--iters", type=int, default=100)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--no-accel", action="store_true")
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device("cpu")
if torch.accelerator.is_available() and not args.no_accel:
    device = torch.accelerator.current_accelerator()

chars = ["."] + sorted(set("".join(NAMES)))  # "." starts and ends every name
stoi = {c: i for i, c in enumerate(chars)}
itos = {i: c for c, i in stoi.items()}
vocab_size = len(chars)
max_len = max(len(n) for n in NAMES) + 1
# Every name as an input row (".name") and a target row ("name."), padded with -100 (ignored by the loss).
inputs = np.zeros((len(NAMES), max_len), np.int64)
targets = np.full((len(NAMES), max_len), -100, np.int64)
for row, name in enumerate(NAMES):
    ids = [stoi[c] for c in "." + name + "."]
    inputs[row, :len(ids) - 1] = ids[:-1]
    targets[row, :len(ids) - 1] = ids[1:]
X = torch.tensor(inputs, device=device)
Y = torch.tensor(targets, device=device)


class CharGRU(nn.Module):
    def __init__(self, vocab_size, embed=16, hidden=48):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed)
        self.gru = nn.GRU(embed, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab_size)

    def forward(self, idx, h=None):
        out, h = self.gru(self.embedding(idx), h)
        return self.head(out), h


model = CharGRU(vocab_size).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
losses = []
rng = np.random.default_rng(0)
for it in range(args.iters):
    batch = torch.tensor(rng.choice(len(NAMES), 16, replace=False), device=device)
    logits, _ = model(X[batch])
    loss = F.cross_entropy(logits.view(-1, vocab_size), Y[batch].view(-1), ignore_index=-100)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if it % 10 == 0 or it == args.iters - 1:
        print(f"iter {it}: loss {loss.item():.4f}")
        losses.append(loss.item())


@torch.no_grad()
def sample(start="", temperature=0.8, top_k=None, max_new=12):
    model.eval()
    idx = torch.tensor([[stoi[c] for c in "." + start]], device=device)
    logits, h = model(idx)
    name = start
    for _ in range(max_new):
        logits_last = logits[:, -1, :] / temperature
        if top_k is not None:
            v, _ = torch.topk(logits_last, top_k)
            logits_last[logits_last < v[:, [-1]]] = -float("inf")
        probs = F.softmax(logits_last, dim=-1)
        next_id = torch.multinomial(probs, num_samples=1)
        if next_id.item() == stoi["."]:
            break
        name += itos[next_id.item()]
        logits, h = model(next_id, h)
    return name


generated = [sample(start=c, top_k=5) for c in "abcdeklmst"]
print("samples:", generated)
