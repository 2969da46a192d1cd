// jax-js (npm @jax-js/jax, pinned in package-lock.json), the benchmark page's second peer beside
// TF.js. The asset step's esbuild bundles it from node_modules into /build/bench/jax.js: one ES
// module, with the WebGPU backend (a chunk the package imports on first use) inlined. bench.html
// imports it when a jax-js runner first runs. Its wasm backend writes its WebAssembly in
// JavaScript as it runs: there is no .wasm file to serve.
export * from "@jax-js/jax";
