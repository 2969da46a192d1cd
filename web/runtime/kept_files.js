// kept_files.js: the worker's working folder (Python's working directory, where open() writes
// and runtime.files reads) kept in the browser's origin private file system, so that files
// written or uploaded survive restart(), a device switch (a new worker) and a reload.
//
// The folder lives in Pyodide's in-memory file system while a worker runs; this module copies
// it in at boot (readKept, then restore) and copies changes out: a file written through
// runtime.files at once (keepFile, forgetFile), files the code wrote after each run (sync),
// by comparing each file's size and modification time with what was kept last, so a run that
// wrote nothing copies nothing, and a 30 MB upload is written once, not after every run.
// Dot files and __pycache__ are left out, as the Files panel leaves them out.
//
// Several workers of one origin (two tabs) share the folder: the last to write a file wins.

/** A kept folder: {root: FileSystemDirectoryHandle, known: Map<path, {size, mtime}>}, or null. */
export async function openKept(name) {
  try {
    const storage = await self.navigator.storage.getDirectory();
    return {root: await storage.getDirectoryHandle(name, {create: true}), known: new Map()};
  } catch {
    return null;  // no origin private file system here (plain http off localhost): files last as long as the worker
  }
}

// Every kept file as [path, its handle, File], depth first.
async function* walk(folder, prefix = "") {
  for await (const [name, handle] of folder.entries()) {
    if (name.endsWith(".crswap")) continue;  // Chromium's swap file of a write that did not finish
    if (handle.kind === "directory") {
      yield* walk(/** @type {FileSystemDirectoryHandle} */ (handle), `${prefix}${name}/`);
    } else {
      const file = /** @type {FileSystemFileHandle} */ (handle);
      yield [`${prefix}${name}`, file, await file.getFile()];
    }
  }
}

/** A file of the origin private file system, read whole. In a worker through a sync access
 * handle: a File's arrayBuffer() streams the bytes from the browser's process, which a busy
 * machine slows much more than reading them here. A file another tab holds open is read as a File. */
export async function readKeptFile(handle) {
  if ("createSyncAccessHandle" in handle) {
    let access = null;
    try {
      access = await handle.createSyncAccessHandle();
      const bytes = new Uint8Array(access.getSize());
      for (let at = 0; at < bytes.length;) {
        const read = access.read(bytes.subarray(at), {at});
        if (read <= 0) throw new Error(`read ${at} of ${bytes.length} bytes`);
        at += read;
      }
      return bytes;
    } catch (err) {
      if (err && err.name === "NotFoundError") throw err;
    } finally {
      if (access) access.close();
    }
  }
  return new Uint8Array(await (await handle.getFile()).arrayBuffer());
}

/** The kept files' bytes, read while Python starts: [{path, bytes, mtime}]. */
export async function readKept(kept) {
  const found = [];
  if (!kept) return found;
  for await (const [path, handle, file] of walk(kept.root)) {
    found.push({path, bytes: await readKeptFile(handle), mtime: file.lastModified});
  }
  return found;
}

/** Write the files readKept found into the working folder `root` of Pyodide's file system. */
export function restore(kept, FS, root, files) {
  for (const {path, bytes, mtime} of files) {
    const full = `${root}/${path}`;
    FS.mkdirTree(full.slice(0, full.lastIndexOf("/")));
    FS.writeFile(full, bytes);
    FS.utime(full, mtime, mtime);  // the time it was kept, rather than this boot's
    kept.known.set(path, stamp(FS, full));
  }
}

function stamp(FS, full) {
  const stat = FS.stat(full);
  return {size: stat.size, mtime: stat.mtime.getTime()};
}

/** Whether the working folder's file `path` is one that is kept (the Files panel lists it). */
export function isKept(path) {
  return !path.split("/").some((part) => part.startsWith(".") || part === "__pycache__");
}

// The files under `root` now: path -> {size, mtime}. Symbolic links are not followed.
function listing(FS, root) {
  const found = new Map();
  const visit = (folder, prefix) => {
    for (const name of FS.readdir(folder)) {
      if (!isKept(name)) continue;  // "." and ".." too
      const full = `${folder}/${name}`;
      const stat = FS.lstat(full);
      if (FS.isDir(stat.mode)) visit(full, `${prefix}${name}/`);
      else if (FS.isFile(stat.mode)) found.set(`${prefix}${name}`, {size: stat.size, mtime: stat.mtime.getTime()});
    }
  };
  visit(root, "");
  return found;
}

async function folderOf(kept, path, create) {
  const parts = path.split("/");
  let folder = kept.root;
  for (const part of parts.slice(0, -1)) folder = await folder.getDirectoryHandle(part, {create});
  return {folder, name: parts[parts.length - 1]};
}

/** Keep the working folder's file `path` (its bytes from Pyodide's file system) as it is now. */
export async function keepFile(kept, FS, root, path) {
  const full = `${root}/${path}`;
  const info = stamp(FS, full);
  const {folder, name} = await folderOf(kept, path, true);
  // createWritable swaps the bytes in whole on close(): a worker stopped mid-write keeps the old file.
  const writable = await (await folder.getFileHandle(name, {create: true})).createWritable();
  await writable.write(FS.readFile(full));
  await writable.close();
  kept.known.set(path, info);
}

/** Forget the kept file `path` (deleted from the working folder). */
export async function forgetFile(kept, path) {
  kept.known.delete(path);
  try {
    const {folder, name} = await folderOf(kept, path, false);
    await folder.removeEntry(name);
  } catch (err) {
    if (!err || err.name !== "NotFoundError") throw err;
  }
}

/** Keep what changed in the working folder since the last sync; returns the paths that could not be kept. */
export async function sync(kept, FS, root) {
  const now = listing(FS, root);
  const failed = [];
  const attempt = async (path, work) => {
    try {
      await work();
    } catch (err) {
      failed.push(`${path} (${err && err.name || err})`);
    }
  };
  for (const [path, info] of now) {
    const before = kept.known.get(path);
    if (before && before.size === info.size && before.mtime === info.mtime) continue;
    await attempt(path, () => keepFile(kept, FS, root, path));
  }
  for (const path of [...kept.known.keys()]) {
    if (!now.has(path)) await attempt(path, () => forgetFile(kept, path));
  }
  return failed;
}
