"""A variational autoencoder on the 8x8 digits, in the shape of pytorch/examples' VAE: an encoder to mu and
logvar, the reparameterisation trick with randn_like, binary cross-entropy + KL divergence, Adam, and
samples decoded from the prior under no_grad.
"""
import argparse
import pathlib

import numpy as np

import webgrad as torch
from webgrad import nn, optim
from webgrad.nn import functional as F
from webgrad.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="VAE digits example")
parser.add_argument("--batch-size", type=int, default=128)
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--no-accel", action="store_true")
parser.add_argument("--seed", type=int, default=1)
args = parser.parse_args()

use_accel = not args.no_accel and torch.accelerator.is_available()
torch.manual_seed(args.seed)
device = torch.accelerator.current_accelerator() if use_accel else torch.device("cpu")

data = np.load(pathlib.Path(__file__).resolve().parents[2] / "demos" / "data" / "digits.npz")
images = (data["images"].reshape(-1, 64) / 16.0).astype(np.float32)
train_loader = DataLoader(TensorDataset(torch.from_numpy(images[:1400])), batch_size=args.batch_size, shuffle=True)
test_loader = DataLoader(TensorDataset(torch.from_numpy(images[1400:])), batch_size=args.batch_size)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 48)
        self.fc21 = nn.Linear(48, 8)
        self.fc22 = nn.Linear(48, 8)
        self.fc3 = nn.Linear(8, 48)
        self.fc4 = nn.Linear(48, 64)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 64))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=3e-3)


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 64), reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def train(epoch):
    model.train()
    train_loss = 0
    for (data,) in train_loader:
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
    print(f"====> Epoch: {epoch} Average loss: {train_loss / len(train_loader.dataset):.4f}")


def test(epoch):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for (data,) in test_loader:
            data = data.to(device)
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()
    test_loss /= len(test_loader.dataset)
    print(f"====> Test set loss: {test_loss:.4f}")
    return test_loss


losses = []
for epoch in range(1, args.epochs + 1):
    train(epoch)
    losses.append(test(epoch))
    with torch.no_grad():
        sample = torch.randn(16, 8).to(device)
        sample = model.decode(sample).cpu()
        assert sample.shape == (16, 64)
