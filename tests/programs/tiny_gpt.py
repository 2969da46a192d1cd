"""A tiny GPT trained on characters, in the shape of a nanoGPT training script: causal self-attention,
AdamW with weight-decay groups, warm-up + cosine learning rate, clip_grad_norm_, an evaluation loop
under no_grad, a checkpoint dict with iter_num saved and resumed, and sampling with top-k + multinomial.
Data: the first 6000 characters of the text shipped in core/datasets/tiny_text.txt.
"""
import argparse
import math
import os
import pathlib
import tempfile

import numpy as np

import webgrad as torch
import webgrad.nn as nn
from webgrad.nn import functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--max-iters", type=int, default=40)
parser.add_argument("--seed", type=int, default=1337)
parser.add_argument("--no-accel", action="store_true")
parser.add_argument("--out-dir", default=None)
args = parser.parse_args()

# config
block_size, batch_size = 16, 12
n_layer, n_head, n_embd, dropout = 2, 2, 32, 0.0
learning_rate, min_lr, warmup_iters, lr_decay_iters = 1e-2, 1e-3, 10, args.max_iters
weight_decay, beta1, beta2, grad_clip = 0.1, 0.9, 0.95, 1.0
eval_interval, eval_iters = 10, 4
out_dir = args.out_dir or tempfile.mkdtemp()

torch.manual_seed(args.seed)
device = "cpu"
if not args.no_accel and torch.accelerator.is_available():
    device = torch.accelerator.current_accelerator().type

text = (pathlib.Path(__file__).resolve().parents[2] / "core" / "datasets" / "tiny_text.txt").read_text()[:6000]
chars = sorted(set(text))
vocab_size = len(chars)
stoi = {ch: i for i, ch in enumerate(chars)}
data = np.array([stoi[c] for c in text], dtype=np.int64)
n = int(0.9 * len(data))
train_data, val_data = data[:n], data[n:]
batch_rng = np.random.default_rng(0)  # the same batches for every library


def get_batch(split):
    d = train_data if split == "train" else val_data
    ix = batch_rng.integers(0, len(d) - block_size, batch_size)
    x = torch.from_numpy(np.stack([d[i:i + block_size] for i in ix]))
    y = torch.from_numpy(np.stack([d[i + 1:i + 1 + block_size] for i in ix]))
    return x.to(device), y.to(device)


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(n_embd, dim=2)
        k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
        q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
        v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd),
                                 nn.Dropout(dropout))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block() for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [{"params": decay_params, "weight_decay": weight_decay},
                        {"params": nodecay_params, "weight_decay": 0.0}]
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        split_losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            _, loss = model(X, Y)
            split_losses[k] = loss.item()
        out[split] = split_losses.mean()
    model.train()
    return out


model = GPT().to(device)
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2))
print(f"number of parameters: {sum(p.numel() for p in model.parameters()) / 1e3:.1f}K")
losses = []
iter_num, best_val_loss = 0, 1e9
X, Y = get_batch("train")
while True:
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    if iter_num % eval_interval == 0:
        split_losses = estimate_loss()
        print(f"step {iter_num}: train loss {split_losses['train']:.4f}, val loss {split_losses['val']:.4f}")
        losses.append(float(split_losses["val"]))
        if split_losses["val"] < best_val_loss:
            best_val_loss = float(split_losses["val"])
            checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iter_num": iter_num,
                          "best_val_loss": best_val_loss, "config": {"n_layer": n_layer, "n_embd": n_embd}}
            torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
    logits, loss = model(X, Y)
    X, Y = get_batch("train")
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    iter_num += 1
    if iter_num > args.max_iters:
        break

# Resume from the best checkpoint, as a restarted run would.
checkpoint = torch.load(os.path.join(out_dir, "ckpt.pt"), map_location=device)
resumed = GPT().to(device)
resumed.load_state_dict(checkpoint["model"])
resumed_optimizer = resumed.configure_optimizers(weight_decay, learning_rate, (beta1, beta2))
resumed_optimizer.load_state_dict(checkpoint["optimizer"])
resumed_iter = checkpoint["iter_num"]
print(f"resumed from iter {resumed_iter} (best val loss {checkpoint['best_val_loss']:.4f})")
start = torch.tensor([[stoi["T"]]], dtype=torch.long, device=device)
sample = "".join(chars[i] for i in resumed.generate(start, 40, temperature=0.8, top_k=10)[0].tolist())
print(sample)
