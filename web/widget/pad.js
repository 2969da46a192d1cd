// pad.js: a drawing pad (white ink on black, like the digits dataset) for mouse, pen and
// finger, through pointer events, and the keyboard (focus it: the arrow keys draw from the
// pen's place, which starts in the middle; Shift+arrow moves the pen without drawing);
// `onchange` fires at most once per frame while drawing.

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
    if (canvas.tabIndex < 0) canvas.tabIndex = 0;
    canvas.addEventListener("keydown", (event) => this.key(event));
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

  key(event) {
    const step = this.canvas.width / 12;
    const moves = {ArrowLeft: [-step, 0], ArrowRight: [step, 0], ArrowUp: [0, -step], ArrowDown: [0, step]};
    if (!moves[event.key]) return;
    event.preventDefault();
    const from = this.pen;
    const [dx, dy] = moves[event.key];
    const inside = (v, size) => Math.min(size - this.lineWidth / 2, Math.max(this.lineWidth / 2, v));
    this.pen = {x: inside(from.x + dx, this.canvas.width), y: inside(from.y + dy, this.canvas.height)};
    if (!event.shiftKey) this.line(from, this.pen);
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
    this.pen = {x: this.canvas.width / 2, y: this.canvas.height / 2};  // where the arrow keys draw from
  }
}
