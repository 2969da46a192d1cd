# Digits MLP: the 8x8 handwritten digits (they ship inside the wheel), a two-layer MLP, Adam.
# At the end the model goes to the model store (the Models panel), as "digits-mlp".
import webgrad
from webgrad import nn

webgrad.manual_seed(0)
x_train, y_train = webgrad.datasets.digits(split="train")
x_test, y_test = webgrad.datasets.digits(split="test")
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
optimizer = webgrad.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
epochs, batch = 20, 64
steps = epochs * ((len(x_train) + batch - 1) // batch)
step = 0
for epoch in range(epochs):
    order = webgrad.randperm(len(x_train))
    for start in range(0, len(x_train), batch):
        index = order[start:start + batch]
        loss = loss_fn(model(x_train[index]), y_train[index])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % 5 == 0:
            webgrad_progress({"step": step, "total": steps, "loss": loss.item()})
    with webgrad.no_grad():
        accuracy = (model(x_test).argmax(dim=1) == y_test).float().mean().item()
    webgrad_progress({"step": step, "total": steps, "accuracy": accuracy})
print(f"test accuracy {accuracy:.3f} after {epochs} epochs on {WEBGRAD_DEVICE}")

webgrad.store.push(model, "digits-mlp", metadata={"labels": list("0123456789"), "accuracy": accuracy},
                   input_size=(1, 64))
print("pushed to the store as digits-mlp")
webgrad.summary(model, input_size=(1, 64))
