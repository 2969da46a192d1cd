# Regression: a tiny MLP fits y = x @ w + noise, trained where the runtime chose (WEBGRAD_DEVICE).
# webgrad_progress({...}) sends numbers to the page: the charts plot every numeric field against "step".
import webgrad
from webgrad import nn

webgrad.manual_seed(0)
x = webgrad.randn(256, 8)
y = x @ webgrad.randn(8, 1) + 0.1 * webgrad.randn(256, 1)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
optimizer = webgrad.optim.Adam(model.parameters(), lr=1e-2)
steps = 200
for step in range(steps):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 9:
        webgrad_progress({"step": step + 1, "total": steps, "loss": loss.item()})
print(f"final loss {loss.item():.4f} on {WEBGRAD_DEVICE}")
model(x[:3])
