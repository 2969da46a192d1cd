// images.js, for worker.js: the images a boot uses (the snapshot, numpy's, webgrad's) are kept
// decoded in the origin private file system, named by their immutable URLs. The HTTP cache
// keeps them gzipped and inflates them on every visit (about 150 ms for the snapshot's 25 MB
// here), and the Cache API hands big bodies over slowly (the snapshot alone 50 ms; it and
// numpy's 16 MB at boot 300 ms); a kept file's bytes take 20 ms. keepImages writes them once
// boot is done; where there is no such storage (plain http, not localhost) or it fails, the
// HTTP cache alone serves.
import {readKeptFile} from "./kept_files.js";

const IMAGE_FOLDER = "webgrad-images";
const images = {used: new Set(), fetched: new Map(), from: {}};

/** Where each image of this boot came from: {snapshot, numpy, webgrad}: "cache" or "network". */
export const imagesFrom = images.from;
const imageFile = (url) => encodeURIComponent(url);

let imageFolderOpened = null;

// The folder, opened once (boot opens it first thing, while the thread is still free).
export function imageFolder() {
  imageFolderOpened = imageFolderOpened || (async () => {
    try {
      return await (await self.navigator.storage.getDirectory()).getDirectoryHandle(IMAGE_FOLDER, {create: true});
    } catch {
      return null;
    }
  })();
  return imageFolderOpened;
}

// An image's bytes, kept by an earlier visit or else fetched (``get``: how); null when not found.
export async function fetchImage(url, name, get = fetch) {
  images.used.add(url);
  const folder = await imageFolder();
  if (folder) {
    try {
      const bytes = await readKeptFile(await folder.getFileHandle(imageFile(url)));
      if (bytes.length) {  // empty: made by a keepImages that did not finish (the page closed)
        images.from[name] = "cache";
        return bytes;
      }
    } catch {
      // not kept yet
    }
  }
  const response = await get(url);
  if (!response.ok) return null;
  const bytes = await imageBytes(response);
  images.from[name] = "network";
  images.fetched.set(url, bytes);
  return bytes;
}

// A kept image that did not install: fetched again next time.
export function forgetImage(url) {
  images.fetched.delete(url);
  return imageFolder().then((folder) => folder && folder.removeEntry(imageFile(url))).catch(() => {});
}

// After boot: keep the images fetched, and drop the ones of this site that it no longer uses.
// A file's bytes land whole or not at all (a writable's close() swaps them in), but the file
// itself exists, empty, from getFileHandle on: fetchImage takes an empty one for none.
export async function keepImages(baseUrl) {
  const folder = await imageFolder();
  if (!folder) return;
  const site = imageFile(new URL(baseUrl).href);
  const used = new Set(Array.from(images.used, imageFile));
  for await (const name of folder.keys()) {
    if (name.startsWith(site) && !used.has(name)) await folder.removeEntry(name);
  }
  for (const [url, bytes] of images.fetched) {
    const writable = await (await folder.getFileHandle(imageFile(url), {create: true})).createWritable();
    await writable.write(bytes);
    await writable.close();
    images.fetched.delete(url);
  }
}

// A gzipped image's bytes. webgrad's server sends them gzip-encoded, so the browser has
// inflated them already, off this thread (a quarter of a second of it for the snapshot);
// from a host that sends the .gz as it is, they are inflated here. Told apart by gzip's magic
// (1f 8b 08), not by the Content-Encoding header, which a cross-origin page cannot read: no
// image starts so (a snapshot starts with memory's zero page; an image with its header's
// length, which would have to exceed 550 KB).
async function imageBytes(response) {
  const bytes = new Uint8Array(await response.arrayBuffer());
  if (!(bytes[0] === 0x1f && bytes[1] === 0x8b && bytes[2] === 0x08)) return bytes;
  const inflated = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Uint8Array(await new Response(inflated).arrayBuffer());
}
