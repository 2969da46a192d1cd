// pad.js: a drawing pad (white ink on black, like the digits dataset) for mouse, pen and
// finger, through pointer events; `onchange` fires at most once per frame while drawing.

export class DrawingPad {
  /**
   * @param {HTMLCanvasElement} canvas  drawn at its own width/height (CSS may scale it)
   * @param {{lineWidth?: number, onchange?: Function}} options  lineWidth in canvas pixels
   */
  constructor(canvas, {lineWidth = 0, onchange = null} = {}) {
    this.canvas = canvas;
    this.context = canvas.getContext("2d", {willReadFrequently: true});
    this.lineWidth = lineWidth || Math.round(canvas.width / 11);
    this.onchange = onchange;
    this.drawn = false;
    this.last = null;
    this.pending = false;
    canvas.style.touchAction = "none";  // a finger draws instead of scrolling the page
    canvas.addEventListener("pointerdown", (event) => this.down(event));
    canvas.addEventListener("pointermove", (event) => this.move(event));
    for (const name of ["pointerup", "pointercancel", "pointerleave"]) {
      canvas.addEventListener(name, () => { this.last = null; });
    }
    this.clear();
  }

  point(event) {
    const rect = this.canvas.getBoundingClientRect();
    return {x: ((event.clientX - rect.left) * this.canvas.width) / rect.width,
            y: ((event.clientY - rect.top) * this.canvas.height) / rect.height};
  }

  down(event) {
    event.preventDefault();
    this.canvas.setPointerCapture?.(event.pointerId);
    this.last = this.point(event);
    this.line(this.last, this.last);
  }

  move(event) {
    if (!this.last) return;
    event.preventDefault();
    const next = this.point(event);
    this.line(this.last, next);
    this.last = next;
  }

  line(from, to) {
    const c = this.context;
    c.strokeStyle = "#fff";
    c.lineWidth = this.lineWidth;
    c.lineCap = "round";
    c.lineJoin = "round";
    c.beginPath();
    c.moveTo(from.x, from.y);
    c.lineTo(to.x, to.y);
    c.stroke();
    this.drawn = true;
    this.changed();
  }

  changed() {
    if (this.pending || !this.onchange) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.onchange(this);
    });
  }

  clear() {
    this.context.fillStyle = "#000";
    this.context.fillRect(0, 0, this.canvas.width, this.canvas.height);
    this.drawn = false;
    this.last = null;
  }
}
