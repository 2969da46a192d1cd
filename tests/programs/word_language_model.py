"""A word-level LSTM language model, in the shape of pytorch/examples' word_language_model: batchify the
token stream into columns, truncated back-propagation through time with the hidden state detached between
chunks (repackage_hidden), tied encoder/decoder weights, clip_grad_norm_, plain SGD written with
p.data.add_, and the learning rate divided by 4 when validation loss stops improving.
Data: the words of core/datasets/tiny_text.txt (the 150 most frequent, the rest as <unk>).
"""
import argparse
import math
import pathlib

import webgrad as torch
import webgrad.nn as nn
import webgrad.nn.functional as F

parser = argparse.ArgumentParser(description="LSTM language model")
parser.add_argument("--emsize", type=int, default=32)
parser.add_argument("--nhid", type=int, default=32)
parser.add_argument("--lr", type=float, default=20.0)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--bptt", type=int, default=12)
parser.add_argument("--seed", type=int, default=1111)
parser.add_argument("--no-accel", action="store_true")
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device("cpu")
if torch.accelerator.is_available() and not args.no_accel:
    device = torch.accelerator.current_accelerator()

words = (pathlib.Path(__file__).resolve().parents[2] / "core" / "datasets" / "tiny_text.txt").read_text().lower()
words = words.replace(",", " ").replace(".", " ").split()[:1800]
common = sorted(set(words), key=lambda w: (-words.count(w), w))[:150]
vocab = {w: i for i, w in enumerate(["<unk>"] + sorted(common))}
ids = torch.tensor([vocab.get(w, 0) for w in words], dtype=torch.int64)
split = int(len(ids) * 0.85)
train_ids, val_ids = ids[:split], ids[split:]


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


train_data = batchify(train_ids, 16)
val_data = batchify(val_ids, 8)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers=2, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight  # tied weights (ninp == nhid)
        self.nlayers, self.nhid = nlayers, nhid
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.encoder.num_embeddings)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


model = RNNModel(len(vocab), args.emsize, args.nhid).to(device)
criterion = nn.NLLLoss()


def evaluate(data_source):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(data_source.size(1))
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train(lr):
    model.train()
    hidden = model.init_hidden(train_data.size(1))
    for i in range(0, train_data.size(0) - 1, args.bptt):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)


lr, best_val_loss, losses = args.lr, None, []
for epoch in range(1, args.epochs + 1):
    train(lr)
    val_loss = evaluate(val_data)
    losses.append(val_loss)
    print(f"| end of epoch {epoch:3d} | valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}")
    if not best_val_loss or val_loss < best_val_loss:
        best_val_loss = val_loss
    else:
        lr /= 4.0
