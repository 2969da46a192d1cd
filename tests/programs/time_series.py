"""Sine-wave prediction with two stacked LSTMCells trained by L-BFGS, as in pytorch/examples' time sequence
prediction: the model reads noisy phase-shifted sine waves step by step and learns to predict the next value,
then extrapolates ``future`` steps past the input.
"""
import argparse

import numpy as np

import webgrad as torch
import webgrad.nn as nn
import webgrad.optim as optim


class Sequence(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), self.hidden, dtype=input.dtype, device=input.device)
        c_t = torch.zeros(input.size(0), self.hidden, dtype=input.dtype, device=input.device)
        h_t2 = torch.zeros(input.size(0), self.hidden, dtype=input.dtype, device=input.device)
        c_t2 = torch.zeros(input.size(0), self.hidden, dtype=input.dtype, device=input.device)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):  # feed predictions back in
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--no-accel", action="store_true")
opt = parser.parse_args()

torch.manual_seed(opt.seed)
device = "cpu" if opt.no_accel or not torch.accelerator.is_available() else torch.accelerator.current_accelerator()
rng = np.random.default_rng(2)
T, L, N = 20, 18, 10
x = np.arange(L)[None, :] + rng.integers(-4 * T, 4 * T, N)[:, None]
data = np.sin(x / T).astype(np.float32)
input = torch.from_numpy(data[3:, :-1]).to(device)
target = torch.from_numpy(data[3:, 1:]).to(device)
test_input = torch.from_numpy(data[:3, :-1]).to(device)
test_target = torch.from_numpy(data[:3, 1:]).to(device)

seq = Sequence().to(device)
criterion = nn.MSELoss()
optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=5)
losses = []
for i in range(opt.steps):
    print("STEP: ", i)

    def closure():
        optimizer.zero_grad()
        out = seq(input)
        loss = criterion(out, target)
        print("loss:", loss.item())
        loss.backward()
        return loss
    optimizer.step(closure)
    with torch.no_grad():
        future = 6
        pred = seq(test_input, future=future)
        loss = criterion(pred[:, :-future], test_target)
        print("test loss:", loss.item())
        losses.append(loss.item())
        y = pred.detach().cpu().numpy()
