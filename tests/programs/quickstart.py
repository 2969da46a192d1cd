"""Quickstart: an MLP classifier trained with a DataLoader, in the shape of the PyTorch quickstart tutorial.

Data: three interleaved 2-D spirals (made with numpy, so torch and webgrad see the same points).
"""
import argparse
import os
import tempfile

import numpy as np

import webgrad as torch
import webgrad.nn as nn
from webgrad.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--no-accel", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() and not args.no_accel \
    else "cpu"
print(f"Using {device} device")


def spirals(n_per_class, rng):
    xs, ys = [], []
    for label in range(3):
        r = np.linspace(0.1, 1.0, n_per_class)
        theta = label * 2 * np.pi / 3 + r * 4 + rng.normal(0, 0.15, n_per_class)
        xs.append(np.stack([r * np.sin(theta), r * np.cos(theta)], 1))
        ys.append(np.full(n_per_class, label))
    return np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.int64)


rng = np.random.default_rng(0)
x_train, y_train = spirals(200, rng)
x_test, y_test = spirals(50, rng)
training_data = TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train))
test_data = TensorDataset(torch.from_numpy(x_test), torch.from_numpy(y_test))
train_dataloader = DataLoader(training_data, batch_size=32, shuffle=True)
test_dataloader = DataLoader(test_data, batch_size=64)


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(2, 64),
            nn.ReLU(),
            nn.Linear(64, 64),
            nn.ReLU(),
            nn.Linear(64, 3),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


model = NeuralNetwork().to(device)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
losses = []


def train(dataloader, model, loss_fn, optimizer):
    size = len(dataloader.dataset)
    model.train()
    for batch, (X, y) in enumerate(dataloader):
        X, y = X.to(device), y.to(device)
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if batch % 5 == 0:
            loss, current = loss.item(), (batch + 1) * len(X)
            print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")


def test(dataloader, model, loss_fn):
    size = len(dataloader.dataset)
    num_batches = len(dataloader)
    model.eval()
    test_loss, correct = 0, 0
    with torch.no_grad():
        for X, y in dataloader:
            X, y = X.to(device), y.to(device)
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    test_loss /= num_batches
    correct /= size
    print(f"Test Error: \n Accuracy: {(100 * correct):>0.1f}%, Avg loss: {test_loss:>8f} \n")
    return test_loss, correct


for t in range(args.epochs):
    print(f"Epoch {t + 1}\n-------------------------------")
    train(train_dataloader, model, loss_fn, optimizer)
    test_loss, accuracy = test(test_dataloader, model, loss_fn)
    losses.append(test_loss)
print("Done!")

path = os.path.join(tempfile.mkdtemp(), "model.pth")
torch.save(model.state_dict(), path)
model = NeuralNetwork().to(device)
model.load_state_dict(torch.load(path, weights_only=True))
model.eval()
with torch.no_grad():
    pred = model(torch.tensor(x_test[:1]).to(device))
    print(f'Predicted: "{pred[0].argmax(0)}", Actual: "{y_test[0]}"')
final_accuracy = accuracy
