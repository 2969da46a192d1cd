// Types for tsc --checkJs (make lint): CSS imports that esbuild bundles, and the page globals
// the playground sets for the console and the browser tests.
declare module "*.css";
interface Window {
  webgradRuntime: any;
  webgradBootError: any;
  webgradPlayground: any;
}
