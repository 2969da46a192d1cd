// bars.js: class-probability bars (one row per label, the most likely one highlighted),
// built with DOM nodes and inline style properties only (allowed under a strict CSP).

export class ProbabilityBars {
  /** @param {HTMLElement} container  @param {string[]} labels */
  constructor(container, labels) {
    // One grid for all rows (rows are display: contents in the widget's CSS), so the bars
    // line up whatever the length of each label.
    this.container = document.createElement("div");
    this.container.className = "bar-grid";
    container.append(this.container);
    this.rows = labels.map((label) => {
      const row = document.createElement("div");
      row.className = "bar-row";
      row.setAttribute("part", "bar-row");
      const name = document.createElement("span");
      name.className = "bar-label";
      name.textContent = String(label);
      const track = document.createElement("span");
      track.className = "bar-track";
      const fill = document.createElement("span");
      fill.className = "bar-fill";
      fill.style.width = "0%";
      track.append(fill);
      const value = document.createElement("span");
      value.className = "bar-value";
      row.append(name, track, value);
      this.container.append(row);
      return {row, fill, value};
    });
  }

  /** @param {ArrayLike<number>} probabilities */
  show(probabilities) {
    let best = 0;
    for (let i = 1; i < probabilities.length; i++) if (probabilities[i] > probabilities[best]) best = i;
    this.rows.forEach(({row, fill, value}, i) => {
      const p = probabilities[i] ?? 0;
      fill.style.width = `${(100 * p).toFixed(1)}%`;
      value.textContent = `${(100 * p).toFixed(1)}%`;
      row.classList.toggle("best", i === best);
    });
  }

  clear() {
    this.rows.forEach(({row, fill, value}) => {
      fill.style.width = "0%";
      value.textContent = "";
      row.classList.remove("best");
    });
  }
}

/** CSS for the bars (adopted by the widget's shadow root; the demo pages link it in demos.css). */
export const BARS_CSS = `
.bar-row { display: grid; grid-template-columns: 4ch 1fr 6ch; align-items: center; gap: 0.4rem;
           font: 13px/1.6 system-ui, sans-serif; }
.bar-grid { display: grid; grid-template-columns: minmax(2ch, max-content) 1fr 6ch; align-items: center;
            gap: 0 0.5rem; }
.bar-grid .bar-row { display: contents; }
.bar-track { background: #eef0f3; border-radius: 3px; height: 0.8rem; overflow: hidden; }
.bar-fill { display: block; height: 100%; background: #8aa4c8; }
.bar-row.best .bar-fill { background: #1f6feb; }
.bar-row.best .bar-label { font-weight: 700; }
.bar-value { text-align: right; color: #5b6472; font-variant-numeric: tabular-nums; }
`;
