"""Custom autograd Functions, in the shape of the "defining new autograd functions" tutorial: fit sin(x) with
y = a + b * P3(c + d * x), where P3 is the Legendre polynomial of degree 3 written as an autograd.Function
with its own backward (ctx.save_for_backward), plus a straight-through rounding Function, trained by plain
gradient descent on parameters updated by hand under no_grad.
"""
import argparse
import math

import webgrad as torch


class LegendrePolynomial3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)


class RoundStraightThrough(torch.autograd.Function):
    """Rounds to a grid of 1/64 in the forward pass; lets the gradient through unchanged."""

    @staticmethod
    def forward(ctx, input):
        return torch.round(input * 64) / 64

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=400)
parser.add_argument("--no-accel", action="store_true")
args = parser.parse_args()

dtype = torch.float
device = torch.device("cpu")
if torch.accelerator.is_available() and not args.no_accel:
    device = torch.accelerator.current_accelerator()

x = torch.linspace(-math.pi, math.pi, 400, device=device, dtype=dtype)
y = torch.sin(x)

# Weights start close to the answer (as in the tutorial), so the fit converges in a few hundred steps.
a = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
b = torch.full((), -1.0, device=device, dtype=dtype, requires_grad=True)
c = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
d = torch.full((), 0.3, device=device, dtype=dtype, requires_grad=True)

learning_rate = 5e-6
losses = []
for t in range(args.steps):
    P3 = LegendrePolynomial3.apply
    y_pred = a + b * P3(c + d * RoundStraightThrough.apply(x))
    loss = (y_pred - y).pow(2).sum()
    if t % 50 == 49:
        print(t, loss.item())
        losses.append(loss.item())
    loss.backward()
    with torch.no_grad():
        a -= learning_rate * a.grad
        b -= learning_rate * b.grad
        c -= learning_rate * c.grad
        d -= learning_rate * d.grad
        a.grad = None
        b.grad = None
        c.grad = None
        d.grad = None

print(f"Result: y = {a.item()} + {b.item()} * P3({c.item()} + {d.item()} x)")
