"""A convolutional classifier for the 8x8 digits, in the shape of pytorch/examples' MNIST main.

Conv2d, max-pooling, Dropout/Dropout2d, log_softmax with nll_loss, Adadelta and StepLR.
Data: demos/data/digits.npz (1797 scikit-learn digits), read with numpy.
"""
import argparse
import pathlib

import numpy as np

import webgrad as torch
import webgrad.nn as nn
import webgrad.nn.functional as F
import webgrad.optim as optim
from webgrad.optim.lr_scheduler import StepLR
from webgrad.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1, padding=1)
        self.dropout1 = nn.Dropout2d(0.1)
        self.dropout2 = nn.Dropout(0.25)
        self.fc1 = nn.Linear(16 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]"
                  f"\tLoss: {loss.item():.6f}")


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    print(f"\nTest set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{len(test_loader.dataset)} "
          f"({100. * correct / len(test_loader.dataset):.0f}%)\n")
    return test_loss, correct / len(test_loader.dataset)


def main():
    parser = argparse.ArgumentParser(description="digits CNN")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--test-batch-size", type=int, default=500)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--no-accel", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    args = parser.parse_args()

    use_accel = not args.no_accel and torch.accelerator.is_available()
    torch.manual_seed(args.seed)
    device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")

    data = np.load(pathlib.Path(__file__).resolve().parents[2] / "demos" / "data" / "digits.npz")
    images = (data["images"].astype(np.float32) / 16.0 - 0.3) / 0.35
    images = images[:, None]  # (N, 1, 8, 8)
    labels = data["labels"].astype(np.int64)
    dataset1 = TensorDataset(torch.tensor(images[:1400]), torch.tensor(labels[:1400]))
    dataset2 = TensorDataset(torch.tensor(images[1400:]), torch.tensor(labels[1400:]))
    train_loader = DataLoader(dataset1, batch_size=args.batch_size, shuffle=True, num_workers=0)
    test_loader = DataLoader(dataset2, batch_size=args.test_batch_size)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test_loss, accuracy = test(model, device, test_loader)
        losses.append(test_loss)
        scheduler.step()
    return accuracy


losses = []
if __name__ == "__main__":
    final_accuracy = main()
