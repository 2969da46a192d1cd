// text.js: a text box that a language model continues (input kind "tokens"): the prompt,
// the temperature, the number of tokens to write, a Generate button and the text written.
// Sampling is model.generate's, one token at a time: in the page on the lite engine (engines.js),
// in the worker on the Python one (core/web/widget.py).

export class TextGenerator {
  /**
   * @param {HTMLElement} box  where the form goes
   * @param {{vocab?: string[] | null, context?: number | null}} record  the model's input record
   * @param {(prompt: string, options: {length: number, temperature: number}) => Promise<{text: string}>} generate
   */
  constructor(box, record, generate) {
    this.generate = generate;
    const characters = Array.isArray(record.vocab) && record.vocab.every((t) => t.length === 1);
    const form = document.createElement("form");
    form.className = "generate";
    form.setAttribute("part", "generator");
    form.noValidate = true;
    const promptLabel = document.createElement("label");
    promptLabel.className = "wide";
    const promptName = document.createElement("span");
    promptName.textContent = record.vocab ? "Prompt" : "Prompt (token ids separated by spaces)";
    this.prompt = document.createElement("textarea");
    this.prompt.rows = 2;
    this.prompt.setAttribute("part", "prompt");
    this.prompt.placeholder = "the start of a text (or nothing)";
    promptLabel.append(promptName, this.prompt);
    this.temperature = this.number("Temperature", "0.8", {min: "0.05", max: "5", step: "0.05"});
    this.length = this.number(characters ? "Characters" : "Tokens", "120", {min: "1", max: "2000", step: "1"});
    const go = document.createElement("button");
    go.type = "submit";
    go.textContent = "Generate";
    go.setAttribute("part", "generate");
    this.button = go;
    form.append(promptLabel, this.temperature.parentElement, this.length.parentElement, go);
    this.output = document.createElement("output");
    this.output.className = "written";
    this.output.setAttribute("part", "output");
    this.output.setAttribute("aria-live", "polite");
    this.echo = document.createElement("span");  // the prompt, dimmed, so the new text reads as its continuation
    this.echo.className = "echo";
    this.written = document.createElement("span");
    this.written.setAttribute("part", "generated");
    this.output.append(this.echo, this.written);
    this.message = document.createElement("div");
    this.message.className = "status";
    form.addEventListener("submit", (event) => { event.preventDefault(); this.run(); });
    // Ctrl/Cmd+Enter in the prompt generates (plain Enter makes a new line).
    this.prompt.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); this.run(); }
    });
    box.append(form, this.message, this.output);
  }

  number(text, value, {min, max, step}) {
    const label = document.createElement("label");
    const name = document.createElement("span");
    name.textContent = text;
    const input = document.createElement("input");
    input.type = "number";
    Object.assign(input, {min, max, step, value});
    input.setAttribute("part", "field");
    label.append(name, input);
    return input;
  }

  async run() {
    const temperature = Number(this.temperature.value), length = Number(this.length.value);
    if (!(temperature > 0)) { this.message.textContent = "the temperature must be a number above 0"; return; }
    if (!Number.isInteger(length) || length < 1) {
      this.message.textContent = "the length must be a whole number above 0";
      return;
    }
    this.button.disabled = true;
    this.message.textContent = `writing ${length}…`;
    try {
      const prompt = this.prompt.value;
      const {text} = await this.generate(prompt, {length, temperature});
      this.echo.textContent = prompt;
      this.written.textContent = text;
      this.message.textContent = "";
    } catch {
      this.message.textContent = "";  // the element shows the error under the widget
    } finally {
      this.button.disabled = false;
    }
  }
}

export const TEXT_CSS = `
.generate { display: flex; flex-wrap: wrap; gap: 0.5rem 0.8rem; align-items: flex-end; width: 100%; }
.generate label { display: flex; flex-direction: column; gap: 0.15rem; font-size: 12px; color: #5b6472; }
.generate label.wide { flex-basis: 100%; }
.generate textarea { font: 14px/1.4 ui-monospace, monospace; width: 100%; box-sizing: border-box; }
.generate input { width: 8ch; font: inherit; padding: 0.2rem 0.3rem; border: 1px solid #d5d9df; border-radius: 5px; }
.written { display: block; white-space: pre-wrap; font: 14px/1.4 ui-monospace, monospace; min-height: 3rem;
           padding: 0.4rem; background: #f6f8fa; border-radius: 5px; width: 100%; box-sizing: border-box; }
.written .echo { color: #5b6472; }
`;
