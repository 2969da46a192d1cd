// gpu.js: a bundle's steps on WebGPU, the same way core/lite/run.py runs them natively: each
// kernel compiled once, weights uploaded once, the other buffers, params and bind groups made
// once per batch size, one command encoder per predict, outputs read back with mapAsync.
import {LiteError, at, count} from "./bundle.js";

const WORKGROUP = 64;
// GPUBufferUsage / GPUMapMode values (spelled out: the globals do not exist where WebGPU does not).
const MAP_READ = 0x0001;
const COPY_SRC = 0x0004;
const COPY_DST = 0x0008;
const STORAGE = 0x0080;
const READ = 0x0001;
const KEPT_BATCHES = 4;  // batch sizes whose buffers stay made (a page alternating 1 and 17 re-makes none)

/** Workgroups for `total` threads of 64, folded into y past 65535 (kernels.py's layout). */
export function grid(total) {
  const groups = Math.max(1, Math.ceil(total / WORKGROUP));
  const x = Math.min(groups, 65535);
  return [x, Math.ceil(groups / x)];
}

/** Bytes of a buffer of `n` elements of `dtype`: 4 per element (int8: packed 4 to a word), at least 4. */
function byteSize(dtype, n) {
  return Math.max(4, 4 * Math.ceil((n * (dtype === "int8" ? 1 : 4)) / 4));
}

// Software adapters (as core/backend/webgpu/geometry.py names them): they compute on the same CPU
// as lite's JavaScript path, with a shader emulator's cost on every step.
const SOFTWARE = ["llvmpipe", "lavapipe", "softpipe", "swiftshader", "warp", "microsoft basic render driver"];

/** The name of `adapter`'s software renderer ("swiftshader", ...), or null for a hardware GPU. */
export function softwareRenderer(adapter) {
  const info = adapter.info || {};
  const text = [info.vendor, info.architecture, info.device, info.description].join(" ").toLowerCase();
  const name = SOFTWARE.find((n) => text.includes(n));
  return name || (info.isFallbackAdapter || adapter.isFallbackAdapter ? "a fallback adapter" : null);
}

/** navigator.gpu's adapter, or null when the page has none. */
export async function findAdapter() {
  const gpu = /** @type {any} */ (globalThis.navigator)?.gpu;
  if (!gpu) return null;
  try {
    return await gpu.requestAdapter();
  } catch {
    return null;
  }
}

/** Runs a checked bundle's steps on a WebGPU device of its own. */
export class GpuRunner {
  /**
   * @param {any} adapter  a GPUAdapter
   * @param {{meta: any, weights: Record<number, any>, kernels: string[], kernelUrls: string[]}} bundle
   */
  static async create(adapter, bundle) {
    const {meta} = bundle;
    // Ask for what the bundle needs past WebGPU's defaults (many inputs to a fused step, big weights).
    const storage = Math.max(...meta.steps.map((s) => s.inputs.length + 2), 0);
    const largest = Math.max(4, ...Object.entries(bundle.weights).map(([i, w]) => byteSize(meta.buffers[i].dtype,
      w.length)));
    const limits = adapter.limits;
    if (storage > limits.maxStorageBuffersPerShaderStage || largest > limits.maxStorageBufferBindingSize) {
      throw new LiteError("device", `this WebGPU adapter allows ${limits.maxStorageBuffersPerShaderStage} storage `
        + `buffers of ${limits.maxStorageBufferBindingSize} bytes per kernel; the bundle needs ${storage} of up to `
        + `${largest} bytes; use device: 'cpu'`);
    }
    // The adapter's largest buffers (they cost nothing until made): big batches then fit where they can.
    const requiredLimits = {maxStorageBufferBindingSize: limits.maxStorageBufferBindingSize,
      maxBufferSize: limits.maxBufferSize};
    if (storage > 8) requiredLimits.maxStorageBuffersPerShaderStage = storage;  // 8: WebGPU's default
    let device;
    try {
      device = await adapter.requestDevice({requiredLimits, label: `webgrad lite ${meta.name}`});
    } catch (error) {
      throw new LiteError("device", `WebGPU gave no device (${error.message}); use device: 'cpu'`);
    }
    const runner = new GpuRunner(device, bundle);
    try {
      await runner.compile(bundle.kernels, bundle.kernelUrls);
    } catch (error) {
      device.destroy();
      throw error;
    }
    return runner;
  }

  constructor(device, {meta, weights}) {
    this.device = device;
    this.meta = meta;
    this.lost = null;  // why the device was lost, once it is
    device.lost.then((info) => {
      this.lost = info.message || info.reason || "unknown reason";
    });
    this.pipelines = [];
    this.weightBuffers = {};
    meta.buffers.forEach((b, i) => {
      if (b.role !== "weight") return;
      const values = weights[i];
      const buffer = device.createBuffer({label: `lite ${b.weight} ${b.dtype}[${b.shape}]`,
        size: byteSize(b.dtype, values.length), usage: STORAGE | COPY_DST, mappedAtCreation: true});
      new Uint8Array(buffer.getMappedRange()).set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
      buffer.unmap();
      this.weightBuffers[i] = buffer;
    });
    this.plans = new Map();  // batch -> {buffers, groups, staging, outputs}, at most KEPT_BATCHES
    this.queue = Promise.resolve();  // predicts run one at a time (each maps the plan's staging buffer)
  }

  /** Compile each kernel once; a kernel that does not compile is refused by name. */
  async compile(sources, urls) {
    const device = this.device;
    // Error scopes nest per device, so each module is made inside its own before any await.
    const modules = sources.map((code, i) => {
      device.pushErrorScope("validation");
      const module = device.createShaderModule({code, label: urls[i]});
      return {module, scope: device.popErrorScope()};
    });
    for (const [i, {module, scope}] of modules.entries()) {
      const errors = (await module.getCompilationInfo()).messages.filter((m) => m.type === "error");
      const invalid = await scope;
      if (errors.length) {
        throw new LiteError("load", `${urls[i]}: does not compile (line ${errors[0].lineNum}: ${errors[0].message}`
          + `${errors.length > 1 ? `, and ${errors.length - 1} more error(s)` : ""}); the file is damaged`);
      }
      if (invalid) throw new LiteError("load", `${urls[i]}: is not a valid kernel (${invalid.message}); the file is damaged`);
    }
    this.pipelines = await Promise.all(modules.map(({module}, i) => device.createComputePipelineAsync({
      layout: "auto", compute: {module, entryPoint: "main"}, label: urls[i]}).catch((error) => {
      throw new LiteError("load", `${urls[i]}: is not a valid kernel (${error.message}); the file is damaged`);
    })));
  }

  /** Buffers, params and bind groups for batch size `batch` (made once, kept for a few sizes). */
  plan(batch) {
    const known = this.plans.get(batch);
    if (known) return known;
    const device = this.device;
    const sizes = this.meta.buffers.map((b) => byteSize(b.dtype, count(b.shape, batch)));
    const largest = Math.max(...sizes);
    if (largest > device.limits.maxStorageBufferBindingSize) {
      throw new LiteError("input", `a batch of ${batch} needs a buffer of ${largest} bytes, more than this GPU `
        + `allows (${device.limits.maxStorageBufferBindingSize}); predict smaller batches`);
    }
    const buffers = this.meta.buffers.map((b, i) => this.weightBuffers[i] || device.createBuffer({
      label: `lite buffer ${i} ${b.dtype}`, size: sizes[i], usage: STORAGE | COPY_SRC | COPY_DST}));
    const made = buffers.filter((_, i) => !this.weightBuffers[i]);
    const dispatches = [];
    this.meta.steps.forEach((s, i) => {
      const total = at(s.grid, batch);
      if (total === 0) return;
      const params = new Uint32Array(s.params.length ? s.params.map((n) => at(n, batch)) : [0]);
      const P = device.createBuffer({label: `lite params of step ${i}`, size: params.byteLength, usage: STORAGE,
        mappedAtCreation: true});
      new Uint32Array(P.getMappedRange()).set(params);
      P.unmap();
      made.push(P);
      const pipeline = this.pipelines[s.kernel];
      const resources = [P, ...s.inputs.map((k) => buffers[k]), buffers[s.output]];
      const group = device.createBindGroup({layout: pipeline.getBindGroupLayout(0), label: `lite step ${i} (${s.op})`,
        entries: resources.map((buffer, binding) => ({binding, resource: {buffer}}))});
      dispatches.push({pipeline, group, grid: grid(total)});
    });
    const outputs = [];
    let size = 0;
    for (const spec of this.meta.outputs) {
      const bytes = 4 * count(spec.shape, batch);
      outputs.push({spec, offset: size, bytes});
      size += bytes;
    }
    const staging = device.createBuffer({label: "lite outputs", size: Math.max(4, size), usage: MAP_READ | COPY_DST});
    made.push(staging);
    const plan = {buffers, dispatches, staging, outputs, made};
    if (this.plans.size >= KEPT_BATCHES) {  // forget the oldest size's buffers
      const [oldest, old] = this.plans.entries().next().value;
      this.plans.delete(oldest);
      old.made.forEach((b) => b.destroy());
    }
    this.plans.set(batch, plan);
    return plan;
  }

  /** The outputs (typed arrays) for `inputs` (typed arrays in the input buffers' dtypes). */
  run(batch, inputs) {
    const work = this.queue.then(() => this.runNow(batch, inputs));
    this.queue = work.catch(() => {});
    return work;
  }

  async runNow(batch, inputs) {
    this.checkDevice();
    const device = this.device;
    const plan = this.plan(batch);
    this.meta.inputs.forEach((spec, k) => {
      if (inputs[k].length) device.queue.writeBuffer(plan.buffers[spec.buffer], 0, inputs[k]);
    });
    const encoder = device.createCommandEncoder({label: "lite predict"});
    const pass = encoder.beginComputePass();
    for (const {pipeline, group, grid: [x, y]} of plan.dispatches) {
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(x, y);
    }
    pass.end();
    for (const {spec, offset, bytes} of plan.outputs) {
      if (bytes) encoder.copyBufferToBuffer(plan.buffers[spec.buffer], 0, plan.staging, offset, bytes);
    }
    device.pushErrorScope("validation");
    device.queue.submit([encoder.finish()]);
    const invalid = device.popErrorScope();
    try {
      await plan.staging.mapAsync(READ);
    } catch (error) {
      // A lost device fails the map before its `lost` promise settles: give it a moment to say so.
      await Promise.race([this.device.lost, new Promise((resolve) => setTimeout(resolve, 200))]);
      this.checkDevice();
      throw new LiteError("predict", `reading the outputs failed (${error.message})`);
    }
    const scoped = await invalid;
    const copy = plan.staging.getMappedRange().slice(0);
    plan.staging.unmap();
    if (scoped) throw new LiteError("predict", `WebGPU refused the run (${scoped.message})`);
    return plan.outputs.map(({spec, offset, bytes}) => {
      const raw = copy.slice(offset, offset + bytes);
      return spec.dtype === "float32" ? new Float32Array(raw) : spec.dtype === "int32" ? new Int32Array(raw)
        : new Uint32Array(raw);
    });
  }

  checkDevice() {
    if (this.lost !== null) {
      throw new LiteError("device", `the WebGPU device was lost (${this.lost}); load() the model again, `
        + "or use device: 'cpu'");
    }
  }

  dispose() {
    for (const plan of this.plans.values()) plan.made.forEach((b) => b.destroy());
    Object.values(this.weightBuffers).forEach((b) => b.destroy());
    this.plans.clear();
    this.device.destroy();
  }
}
