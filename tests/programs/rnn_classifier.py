"""A sequence classifier: each 8x8 digit read row by row (8 steps of 8 features) by a 2-layer LSTM.

In the shape of pytorch/examples' MNIST RNN: nn.LSTM(batch_first=True), the last step's output
through a Linear layer, Adam with a StepLR schedule, gradient clipping.
"""
import argparse
import pathlib

import numpy as np

import webgrad as torch
import webgrad.nn as nn
import webgrad.nn.functional as F
import webgrad.optim as optim
from webgrad.optim.lr_scheduler import StepLR
from webgrad.utils.data import DataLoader, TensorDataset, random_split


class Net(nn.Module):
    def __init__(self, input_size=8, hidden_size=32, num_classes=10):
        super().__init__()
        self.rnn = nn.LSTM(input_size=input_size, hidden_size=hidden_size, num_layers=2, batch_first=True,
                           dropout=0.1)
        self.batchnorm = nn.BatchNorm1d(hidden_size)
        self.dropout = nn.Dropout(0.1)
        self.fc = nn.Linear(hidden_size, num_classes)

    def forward(self, input):
        output, (h_n, c_n) = self.rnn(input)
        output = output[:, -1, :]  # the last step
        output = self.batchnorm(output)
        output = self.dropout(output)
        output = self.fc(output)
        return F.log_softmax(output, dim=1)


parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--no-accel", action="store_true")
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device("cpu")
if not args.no_accel and torch.accelerator.is_available():
    device = torch.accelerator.current_accelerator()

data = np.load(pathlib.Path(__file__).resolve().parents[2] / "demos" / "data" / "digits.npz")
images = torch.tensor(data["images"].astype(np.float32) / 16.0)  # (N, 8 steps, 8 features)
labels = torch.tensor(data["labels"].astype(np.int64))
full = TensorDataset(images[:1000], labels[:1000])
train_set, _ = random_split(full, [0.8, 0.2])
test_set = TensorDataset(images[1500:], labels[1500:])
train_loader = DataLoader(train_set, batch_size=100, shuffle=True, drop_last=True)
test_loader = DataLoader(test_set, batch_size=300)

model = Net().to(device)
optimizer = optim.Adam(model.parameters(), lr=0.02)
scheduler = StepLR(optimizer, step_size=1, gamma=0.8)
losses = []
for epoch in range(1, args.epochs + 1):
    model.train()
    for data, target in train_loader:
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = F.nll_loss(model(data), target)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
    scheduler.step()

    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            correct += output.argmax(dim=1).eq(target).sum().item()
    test_loss /= len(test_loader.dataset)
    losses.append(test_loss)
    print(f"Epoch {epoch}: test loss {test_loss:.4f}, accuracy {correct}/{len(test_loader.dataset)}, "
          f"lr {scheduler.get_last_lr()[0]:.4f}")
