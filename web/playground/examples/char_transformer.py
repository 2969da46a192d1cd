# A tiny character-level transformer language model on a short public-domain text
# (shipped in the wheel): it learns to continue the text, then samples from it.
import webgrad
from webgrad import nn

webgrad.manual_seed(0)
text = webgrad.datasets.tiny_text()
chars = sorted(set(text))
index_of = {c: i for i, c in enumerate(chars)}
data = webgrad.tensor([index_of[c] for c in text])
context, width, batch = 24, 32, 16


class TinyGPT(nn.Module):
    def __init__(self, vocab, context, width):
        super().__init__()
        self.token = nn.Embedding(vocab, width)
        self.position = nn.Embedding(context, width)
        layer = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=4 * width, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(width, vocab)
        self.mask = nn.Transformer.generate_square_subsequent_mask(context)

    def forward(self, tokens):
        length = tokens.shape[1]
        h = self.token(tokens) + self.position(webgrad.arange(length))
        h = self.blocks(h, mask=self.mask[:length, :length], is_causal=True)
        return self.head(h)


model = TinyGPT(len(chars), context, width)
optimizer = webgrad.optim.AdamW(model.parameters(), lr=3e-3)
steps = 200
for step in range(1, steps + 1):
    starts = webgrad.randint(0, len(data) - context - 1, (batch,)).tolist()
    x = webgrad.stack([data[s:s + context] for s in starts])
    y = webgrad.stack([data[s + 1:s + context + 1] for s in starts])
    loss = nn.functional.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        webgrad_progress({"step": step, "total": steps, "loss": loss.item()})


def sample(prompt, length=100, temperature=0.8):
    tokens = [index_of[c] for c in prompt if c in index_of]
    with webgrad.no_grad():
        for _ in range(length):
            logits = model(webgrad.tensor([tokens[-context:]]))[0, -1] / temperature
            tokens.append(webgrad.multinomial(logits.softmax(dim=0), 1).item())
    return "".join(chars[t] for t in tokens)


print(f"loss {loss.item():.3f} on {WEBGRAD_DEVICE}; a sample:\n")
print(sample(text[:context]))
