// runner.js: the page behind `python -m webgrad.browser` (core/browser/). It boots the
// runtime with ?device=auto|cpu|webgpu, exposes it as window.webgradRuntime (or the
// failure as window.webgradBootError), and forwards output and progress events to
// window.webgradRunnerOutput(kind, text), a function the Python driver exposes.
import {boot} from "./webgrad.js";

const status = document.getElementById("status");
const device = new URLSearchParams(location.search).get("device") || "auto";

/** @param {string} kind */
function forward(kind) {
  return (/** @type {unknown} */ data) => {
    const send = /** @type {any} */ (window).webgradRunnerOutput;
    if (send) send(kind, typeof data === "string" ? data : JSON.stringify(data));
  };
}

try {
  const runtime = await boot({device});
  runtime.on("stdout", forward("stdout"));
  runtime.on("stderr", forward("stderr"));
  runtime.on("progress", forward("progress"));
  /** @type {any} */ (window).webgradRuntime = runtime;
  status.textContent = `ready on ${runtime.device} (${runtime.deviceReason})`;
} catch (err) {
  const message = err instanceof Error ? err.message : String(err);
  /** @type {any} */ (window).webgradBootError = message;
  status.textContent = `boot failed: ${message}`;
}
