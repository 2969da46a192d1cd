# Digits CNN: the 8x8 digits as 1x8x8 images, two convolutions and a linear classifier.
import webgrad
from webgrad import nn

webgrad.manual_seed(0)
x_train, y_train = webgrad.datasets.digits(split="train", flatten=False)
x_test, y_test = webgrad.datasets.digits(split="test", flatten=False)
model = nn.Sequential(
    nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),   # 8 x 4 x 4
    nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),  # 16 x 2 x 2
    nn.Flatten(), nn.Linear(64, 10),
)
optimizer = webgrad.optim.Adam(model.parameters(), lr=1e-2)
epochs, batch = 6, 64
steps = epochs * ((len(x_train) + batch - 1) // batch)
step = 0
for epoch in range(epochs):
    order = webgrad.randperm(len(x_train))
    for start in range(0, len(x_train), batch):
        index = order[start:start + batch]
        loss = nn.functional.cross_entropy(model(x_train[index]), y_train[index])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % 5 == 0:
            webgrad_progress({"step": step, "total": steps, "loss": loss.item()})
    with webgrad.no_grad():
        accuracy = (model(x_test).argmax(dim=1) == y_test).float().mean().item()
    webgrad_progress({"step": step, "total": steps, "accuracy": accuracy})
print(f"test accuracy {accuracy:.3f} on {WEBGRAD_DEVICE}")
webgrad.summary(model, input_size=(1, 1, 8, 8))
