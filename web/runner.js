// runner.js: the page behind `python -m webgrad.browser` (core/browser/). It boots the
// runtime with ?device=auto|cpu|webgpu, exposes it as window.webgradRuntime (or the
// failure as window.webgradBootError), and forwards output and progress events to
// window.webgradRunnerOutput(kind, text), a function the Python driver exposes. The driver
// runs Python through window.webgradRunner (below), which bounds each run or call in time.
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

/**
 * `running` (a run's or a call's promise) as {result}, {error: {message, traceback, pythonType}}
 * for a Python exception, or {timed_out: true} once `ms` passed (the run is interrupted first).
 * @param {any} runtime  @param {Promise<any>} running  @param {number | null} ms
 */
async function bounded(runtime, running, ms) {
  const settled = running.then((result) => ({result}), (err) => ({error: {message: err.message,
    traceback: err.traceback || null, pythonType: err.pythonType || null}}));
  if (ms === null) return await settled;
  let timer;
  const late = new Promise((resolve) => { timer = setTimeout(() => resolve(null), ms); });
  const first = await Promise.race([settled, late]);
  clearTimeout(timer);
  if (first !== null) return first;
  await runtime.interrupt();
  await settled;
  return {timed_out: true};
}

try {
  const runtime = await boot({device});
  /** @type {any} */ (window).webgradRunner = {
    /** @param {[string, number | null]} args */
    run: ([code, ms]) => bounded(runtime, runtime.run(code).then((out) => out.result), ms),
    /** @param {[string, string, any[], number | null]} args */
    call: ([module, fn, args, ms]) => bounded(runtime, runtime.call(module, fn, args), ms),
  };
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
