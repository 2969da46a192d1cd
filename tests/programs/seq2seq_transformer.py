"""A sequence-to-sequence nn.Transformer that learns to reverse short digit strings, in the shape of the
"language translation with nn.Transformer" tutorial: token embeddings plus a positional encoding buffer,
nn.Transformer(batch_first=True) with generate_square_subsequent_mask and key padding masks, teacher
forcing with a shifted target, CrossEntropyLoss(ignore_index=PAD), Adam, and greedy decoding under no_grad.
"""
import argparse
import math

import numpy as np

import webgrad as torch
import webgrad.nn as nn

PAD, BOS, EOS = 0, 1, 2  # digits are tokens 3..12

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--no-accel", action="store_true")
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device("cpu")
if torch.accelerator.is_available() and not args.no_accel:
    device = torch.accelerator.current_accelerator()


def make_batch(rng, size=24, max_len=6):
    """Sources: digit strings of length 2..max_len, padded; targets: BOS + reversed + EOS, padded."""
    lengths = rng.integers(2, max_len + 1, size)
    src = np.full((size, max_len), PAD, np.int64)
    tgt = np.full((size, max_len + 2), PAD, np.int64)
    for row, n in enumerate(lengths):
        digits = rng.integers(3, 13, n)
        src[row, :n] = digits
        tgt[row, :n + 2] = [BOS, *digits[::-1], EOS]
    return torch.from_numpy(src).to(device), torch.from_numpy(tgt).to(device)


class PositionalEncoding(nn.Module):
    def __init__(self, emb_size, maxlen=16):
        super().__init__()
        den = torch.exp(-torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        self.register_buffer("pos_embedding", pos_embedding.unsqueeze(0))

    def forward(self, token_embedding):
        return token_embedding + self.pos_embedding[:, :token_embedding.size(1)]


class Seq2SeqTransformer(nn.Module):
    def __init__(self, vocab=13, emb_size=32, nhead=4, layers=1):
        super().__init__()
        self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead, num_encoder_layers=layers,
                                          num_decoder_layers=layers, dim_feedforward=64, dropout=0.0,
                                          batch_first=True)
        self.generator = nn.Linear(emb_size, vocab)
        self.tok_emb = nn.Embedding(vocab, emb_size)
        self.positional_encoding = PositionalEncoding(emb_size)
        self.emb_size = emb_size

    def embed(self, tokens):
        return self.positional_encoding(self.tok_emb(tokens) * math.sqrt(self.emb_size))

    def forward(self, src, tgt_in):
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=src.device)
        outs = self.transformer(self.embed(src), self.embed(tgt_in), tgt_mask=tgt_mask,
                                src_key_padding_mask=(src == PAD), tgt_key_padding_mask=(tgt_in == PAD),
                                memory_key_padding_mask=(src == PAD))
        return self.generator(outs)


model = Seq2SeqTransformer().to(device)
loss_fn = nn.CrossEntropyLoss(ignore_index=PAD)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
rng = np.random.default_rng(0)
losses = []
for step in range(args.steps):
    model.train()
    src, tgt = make_batch(rng)
    tgt_input, tgt_out = tgt[:, :-1], tgt[:, 1:]
    logits = model(src, tgt_input)
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
    loss.backward()
    optimizer.step()
    if step % 10 == 9:
        losses.append(loss.item())
        print(f"step {step + 1}: loss {loss.item():.4f}")


@torch.no_grad()
def greedy_decode(src, max_len=8):
    model.eval()
    ys = torch.full((src.size(0), 1), BOS, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        next_word = model(src, ys)[:, -1].argmax(dim=-1, keepdim=True)
        ys = torch.cat([ys, next_word], dim=1)
    return ys


src, tgt = make_batch(np.random.default_rng(1), size=8)
decoded = greedy_decode(src)
token_accuracy = float((decoded[:, 1:4] == tgt[:, 1:4]).float().mean().item())
print("decoded:", decoded[:2].tolist(), "target:", tgt[:2].tolist(), "accuracy", token_accuracy)
