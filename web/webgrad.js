// /webgrad.js: the URL pages (and other sites) import the runtime from. The runtime lives in
// runtime/webgrad.js; its header comment documents boot(), run(), events, files and input().
export * from "./runtime/webgrad.js";
