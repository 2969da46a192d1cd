"""Tiny character-level transformer language model on a short public-domain text
(Shakespeare's sonnets, shipped in the wheel as ``webgrad.datasets.tiny_text()``).

    python demos/char_lm.py                  # 300 steps on the first four sonnets
    python demos/char_lm.py --chars 0 --steps 3000   # all of the text (takes far longer)

The page /demos/char_lm.html runs this same file in the browser worker (fetched from
/demos/py/char_lm.py and imported as a module once) and calls the page's functions at the
end of this file by name (``runtime.call``, never Python source): ``train`` sends the loss
and, every few steps, a sampled continuation as progress events; ``sample`` takes a temperature.

Why four sonnets and a short context: a visitor should watch the model learn within a
minute of the page's CPU time, about 300 steps. On 2.6 KB of text, with 64 windows of 16
characters a step (as costly in the page as 16 windows of 32: there the time goes to
Python, not arithmetic), the samples turn into the sonnets' words and phrases by step
200-300 ("Proving his beauty", training loss about 0.6). On the whole 23 KB text, or
with 16 windows of 32, 300 steps still write mostly gibberish (loss about 2 to 2.5).
"""
from __future__ import annotations

import argparse
import re

import webgrad
from webgrad import nn
from webgrad.web.worker import progress

CORPUS_CHARS = 2600  # the first four sonnets of webgrad.datasets.tiny_text()


def corpus(chars: int = CORPUS_CHARS) -> str:
    """The start of ``tiny_text()``, cut after the last whole sonnet within ``chars`` characters
    (``chars=0``: the whole text)."""
    text = webgrad.datasets.tiny_text()
    if chars <= 0 or chars >= len(text):
        return text
    ends = [m.start() + 1 for m in re.finditer(r"\n\n\n[IVXLC]+\n", text[:chars])]  # before a sonnet's numeral
    return text[:ends[-1]] if len(ends) > 1 else text[:chars]


class TinyGPT(nn.Module):
    """Token + position embeddings, a causal pre-norm transformer encoder, a linear head."""

    def __init__(self, vocab: int, context: int = 32, width: int = 48, layers: int = 2, heads: int = 4):
        super().__init__()
        self.context = context
        self.token = nn.Embedding(vocab, width)
        self.position = nn.Embedding(context, width)
        layer = nn.TransformerEncoderLayer(width, nhead=heads, dim_feedforward=4 * width, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, num_layers=layers)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens):
        length = tokens.shape[1]
        h = self.token(tokens) + self.position(webgrad.arange(length, device=tokens.device))
        mask = nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device)
        return self.head(self.blocks(h, mask=mask, is_causal=True))


class CharLM:
    def __init__(self, text=None, context=16, width=48, layers=2, lr=1e-2, batch_size=64, seed=0, device=None):
        webgrad.manual_seed(seed)
        self.text = corpus() if text is None else text
        if len(self.text) < context + 2:
            raise ValueError(f"CharLM: the text has {len(self.text)} characters; it needs more than the "
                             f"context ({context}) + 1 to cut training windows from")
        self.chars = sorted(set(self.text))
        self.index_of = {c: i for i, c in enumerate(self.chars)}
        self.data = webgrad.tensor([self.index_of[c] for c in self.text], device=device)
        self.context, self.batch_size, self.device = context, batch_size, device
        self.model = TinyGPT(len(self.chars), context, width, layers).to(device)
        self.optimizer = webgrad.optim.AdamW(self.model.parameters(), lr=lr)
        self.step = 0

    def batch(self):
        starts = webgrad.randint(0, len(self.data) - self.context - 1, (self.batch_size,)).tolist()
        x = webgrad.stack([self.data[s:s + self.context] for s in starts])
        y = webgrad.stack([self.data[s + 1:s + self.context + 1] for s in starts])
        return x, y

    def train(self, steps: int, on_progress=None, every: int = 10, sample_every: int = 50,
              temperature: float = 0.8, sample_length: int = 80) -> float:
        """AdamW steps on random windows; ``on_progress`` gets step, total, loss, and every
        ``sample_every`` steps (and at the end) ``sample``: text the model writes now."""
        total = self.step + steps
        loss = None
        for _ in range(steps):
            x, y = self.batch()
            loss = nn.functional.cross_entropy(self.model(x).reshape(-1, len(self.chars)), y.reshape(-1))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.step += 1
            if on_progress is not None and (self.step % every == 0 or self.step == total):
                event = {"step": self.step, "total": total, "loss": loss.item()}
                if self.step % sample_every == 0 or self.step == total:
                    event["sample"] = self.sample(length=sample_length, temperature=temperature)
                on_progress(event)
        return float("nan") if loss is None else loss.item()

    def sample(self, prompt: str = "\n", length: int = 120, temperature: float = 0.8) -> str:
        """Continue ``prompt`` by ``length`` characters; lower temperature = safer, repetitive text."""
        if not temperature > 0:
            raise ValueError(f"CharLM.sample: temperature must be > 0, got {temperature}")
        tokens = [self.index_of[c] for c in prompt if c in self.index_of] or [self.index_of[self.text[0]]]
        start = len(tokens)
        self.model.eval()
        with webgrad.no_grad():
            for _ in range(length):
                window = webgrad.tensor([tokens[-self.context:]], device=self.device)
                logits = self.model(window)[0, -1] / temperature
                tokens.append(webgrad.multinomial(logits.softmax(dim=0), 1).item())
        self.model.train()
        return "".join(self.chars[t] for t in tokens[start:])

    def push(self, name: str, url=None) -> dict:
        """Save the model to the store: its input is token ids (the vocabulary is the characters)."""
        metadata = {"labels": self.chars, "vocab": self.chars, "context": self.context, "demo": "char_lm"}
        return webgrad.store.push(self.model, name, metadata, url=url, input_size=(1, self.context),
                                  dtypes=[webgrad.int64])


# ----------------------------------------------------------------------------- the page's calls
# The page's model lives here, so the page names functions rather than writing Python.

current: CharLM | None = None


def _current() -> CharLM:
    if current is None:
        raise RuntimeError("char_lm: no model yet; call start(...) first")
    return current


def start() -> None:
    """A new, untrained model for the page (``current``)."""
    global current
    current = CharLM()


def train(steps: int, sample_every: int = 50, temperature: float = 0.8, every: int = 10) -> float:
    """``steps`` more steps of the page's model; progress events every ``every`` steps, with a
    sample at ``temperature`` every ``sample_every`` steps."""
    return _current().train(int(steps), progress, every=int(every), sample_every=int(sample_every),
                            temperature=float(temperature))


def sample(prompt: str = "\n", length: int = 120, temperature: float = 0.8) -> str:
    """Text the page's model writes after ``prompt``."""
    return _current().sample(str(prompt), int(length), float(temperature))


def push(name: str) -> dict:
    """Save the page's model to the store (the page's own server) as ``name``."""
    return _current().push(str(name))


def main(argv=None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--chars", type=int, default=CORPUS_CHARS,
                        help="train on the first sonnets within this many characters (0: the whole text)")
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--sample-every", type=int, default=50, help="write a sample every N steps (0: never)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "webgpu"])
    args = parser.parse_args(argv)
    from tqdm import tqdm  # native runs only (pip install tqdm); the page reports through on_progress

    demo = CharLM(corpus(args.chars), lr=args.lr, device=args.device)
    print(f"{len(demo.text)} characters of text, {len(demo.chars)} distinct")
    with tqdm(total=args.steps, desc="char LM") as bar:
        def progress(event):
            bar.update(event["step"] - bar.n)
            bar.set_postfix(loss=f"{event['loss']:.3f}")
            if "sample" in event and event["step"] < args.steps:  # the last one is printed below
                bar.write(f"step {event['step']}, loss {event['loss']:.3f}: {event['sample']!r}")
        loss = demo.train(args.steps, progress, sample_every=args.sample_every or args.steps + 1,
                          temperature=args.temperature)
    print(f"loss {loss:.3f}; a sample at temperature {args.temperature}:\n")
    print(demo.sample("\n", 200, args.temperature))
    return loss


if __name__ == "__main__":
    main()
