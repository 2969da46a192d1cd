// output.js: the output pane. Text arrives in bursts (thousands of print() lines), so it is
// buffered and appended once per animation frame; the box keeps a bounded height and
// follows new output unless the user scrolled up; very old output is dropped.
const MAX_CHARS = 2_000_000;

export class Output {
  constructor(element) {
    this.element = element;
    this.pending = [];  // [text, className]
    this.chars = 0;
    this.frame = 0;
  }

  append(text, cls = "") {
    if (!text) return;
    this.pending.push([text, cls]);
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  flush() {
    this.frame = 0;
    const box = this.element;
    const following = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    const fragment = document.createDocumentFragment();
    for (const [text, cls] of this.pending) {
      const last = fragment.lastChild || box.lastChild;
      if (last instanceof HTMLSpanElement && last.className === cls && !last.dataset.block) {
        last.append(text);  // join runs of the same kind: fewer nodes for long outputs
      } else {
        const span = document.createElement("span");
        span.className = cls;
        span.textContent = text;
        fragment.append(span);
      }
      this.chars += text.length;
    }
    this.pending = [];
    box.append(fragment);
    while (this.chars > MAX_CHARS && box.firstChild) {
      this.chars -= box.firstChild.textContent.length;
      box.firstChild.remove();
    }
    if (following) box.scrollTop = box.scrollHeight;
  }

  /** A result's mime bundle: HTML when there is some, else the text (repr). */
  display(bundle) {
    this.flush();
    const block = document.createElement("div");
    block.className = "result";
    block.dataset.block = "1";
    if (bundle["text/html"]) {
      block.classList.add("rich");
      block.innerHTML = bundle["text/html"];
    } else if (bundle["image/png"]) {
      const image = document.createElement("img");
      image.src = `data:image/png;base64,${bundle["image/png"]}`;
      image.alt = bundle["text/plain"] || "image";
      block.append(image);
    } else {
      block.textContent = bundle["text/plain"];
    }
    this.element.append(block);
    this.element.scrollTop = this.element.scrollHeight;
  }

  clear() {
    this.pending = [];
    this.chars = 0;
    this.element.textContent = "";
  }
}
