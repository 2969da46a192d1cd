// code_store.js: the editor's code across reloads (localStorage) and in share links
// (the URL hash: #code/<base64url of deflate-raw UTF-8>, so links stay short).
const KEY = "webgrad.playground.code";
const PREFIX = "#code/";

export function savedCode() {
  try {
    return localStorage.getItem(KEY);
  } catch {
    return null;  // storage disabled: the code just is not kept
  }
}

export function saveCode(text) {
  try {
    localStorage.setItem(KEY, text);
  } catch { /* full or disabled: nothing to do */ }
}

async function pipe(bytes, stream) {
  return new Uint8Array(await new Response(new Blob([bytes]).stream().pipeThrough(stream)).arrayBuffer());
}

export async function linkFor(text) {
  const packed = await pipe(new TextEncoder().encode(text), new CompressionStream("deflate-raw"));
  let binary = "";
  for (const byte of packed) binary += String.fromCharCode(byte);
  const encoded = btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  return `${location.origin}${location.pathname}${location.search}${PREFIX}${encoded}`;
}

/** The code in the page's hash, or null (also null when the hash is not a code link). */
export async function codeFromHash(hash = location.hash) {
  if (!hash.startsWith(PREFIX)) return null;
  try {
    const base64 = hash.slice(PREFIX.length).replace(/-/g, "+").replace(/_/g, "/");
    const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
    return new TextDecoder().decode(await pipe(bytes, new DecompressionStream("deflate-raw")));
  } catch (err) {
    console.warn("webgrad: the link's code could not be read", err);
    return null;
  }
}
