# Load a model from the model store and predict. Run the "Digits MLP" example first: it
# pushes "digits-mlp". The store keeps the architecture, so no model code is needed here.
import webgrad

model = webgrad.store.pull("digits-mlp")
x_test, y_test = webgrad.datasets.digits(split="test")
with webgrad.no_grad():
    predicted = model(x_test).argmax(dim=1)
accuracy = (predicted == y_test).float().mean().item()
print("predicted:", predicted[:12].tolist())
print("actual:   ", y_test[:12].tolist())
print(f"test accuracy {accuracy:.3f}")
predicted[:12]
