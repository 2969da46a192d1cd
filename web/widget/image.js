// image.js: turn what a page has (ImageData, <canvas>, <img>, ImageBitmap) into model input:
// float32 pixels in 0..1, channel-major (C, H, W), resized by averaging the source pixels that
// fall into each target pixel (area averaging: a 280 px drawing becomes a faithful 8x8 image,
// like the digits dataset, whose pixels count the inked share of 4x4 blocks).

/** True when `value` is something `toPixels` can read. */
export function isImageLike(value) {
  return (typeof ImageData !== "undefined" && value instanceof ImageData)
    || (typeof HTMLCanvasElement !== "undefined" && value instanceof HTMLCanvasElement)
    || (typeof HTMLImageElement !== "undefined" && value instanceof HTMLImageElement)
    || (typeof OffscreenCanvas !== "undefined" && value instanceof OffscreenCanvas)
    || (typeof ImageBitmap !== "undefined" && value instanceof ImageBitmap);
}

/** The RGBA pixels of an image-like value, as ImageData. */
export function imageDataOf(source) {
  if (source instanceof ImageData) return source;
  if (typeof HTMLImageElement !== "undefined" && source instanceof HTMLImageElement && !source.complete) {
    throw new Error("webgrad widget: the <img> has not finished loading; await img.decode() first");
  }
  const width = source.naturalWidth || source.width;
  const height = source.naturalHeight || source.height;
  if (!width || !height) throw new Error("webgrad widget: the image is empty (0 x 0 pixels)");
  if (typeof HTMLCanvasElement !== "undefined" && source instanceof HTMLCanvasElement) {
    return source.getContext("2d").getImageData(0, 0, width, height);
  }
  const canvas = document.createElement("canvas");
  canvas.width = width;
  canvas.height = height;
  const context = canvas.getContext("2d");
  context.drawImage(source, 0, 0);
  try {
    return context.getImageData(0, 0, width, height);
  } catch (error) {
    throw new Error(`webgrad widget: cannot read the image's pixels (${error.message}); a cross-origin <img> `
      + "needs crossorigin=\"anonymous\" and CORS headers from its server");
  }
}

/** The bounding box {x, y, w, h} of the pixels with some ink (alpha * brightness), or null. */
export function inkBox(data) {
  let x0 = data.width, y0 = data.height, x1 = -1, y1 = -1;
  for (let y = 0; y < data.height; y++) {
    for (let x = 0; x < data.width; x++) {
      const i = 4 * (y * data.width + x);
      if (data.data[i + 3] > 16 && data.data[i] + data.data[i + 1] + data.data[i + 2] > 48) {
        if (x < x0) x0 = x;
        if (x > x1) x1 = x;
        if (y < y0) y0 = y;
        if (y > y1) y1 = y;
      }
    }
  }
  return x1 < 0 ? null : {x: x0, y: y0, w: x1 - x0 + 1, h: y1 - y0 + 1};
}

/**
 * Float32Array (channels * height * width) with values in 0..1.
 * options: {height, width, channels (1 = luminance, 3 = RGB), invert (1 - value: dark ink
 * on a light background), fit: "full" (the whole image) | "ink" (a square around the ink,
 * centred, as handwriting datasets are normalised)}.
 */
export function toPixels(source, {height, width, channels = 1, invert = false, fit = "full"}) {
  const data = imageDataOf(source);
  let box = {x: 0, y: 0, w: data.width, h: data.height};
  if (fit === "ink") {
    const ink = inkBox(data);
    if (ink) {
      const side = Math.max(ink.w, ink.h) * 1.15;
      box = {x: ink.x + ink.w / 2 - side / 2, y: ink.y + ink.h / 2 - side / 2, w: side, h: side};
    }
  }
  const out = new Float32Array(channels * height * width);
  const sums = new Float64Array(channels);
  for (let ty = 0; ty < height; ty++) {
    for (let tx = 0; tx < width; tx++) {
      // The source rectangle of this target pixel (pixels outside the image count as empty).
      const sx0 = box.x + (tx * box.w) / width, sx1 = box.x + ((tx + 1) * box.w) / width;
      const sy0 = box.y + (ty * box.h) / height, sy1 = box.y + ((ty + 1) * box.h) / height;
      sums.fill(0);
      let area = 0;
      for (let sy = Math.floor(sy0); sy < Math.ceil(sy1); sy++) {
        const wy = Math.min(sy + 1, sy1) - Math.max(sy, sy0);
        for (let sx = Math.floor(sx0); sx < Math.ceil(sx1); sx++) {
          const weight = wy * (Math.min(sx + 1, sx1) - Math.max(sx, sx0));
          area += weight;
          if (sx < 0 || sy < 0 || sx >= data.width || sy >= data.height) continue;
          const i = 4 * (sy * data.width + sx);
          const alpha = data.data[i + 3] / 255;
          const rgb = [data.data[i] / 255, data.data[i + 1] / 255, data.data[i + 2] / 255];
          if (channels === 1) sums[0] += weight * alpha * (0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]);
          else for (let c = 0; c < channels; c++) sums[c] += weight * alpha * rgb[c % 3];
        }
      }
      for (let c = 0; c < channels; c++) {
        const value = area > 0 ? sums[c] / area : 0;
        out[(c * height + ty) * width + tx] = invert ? 1 - value : value;
      }
    }
  }
  return out;
}
