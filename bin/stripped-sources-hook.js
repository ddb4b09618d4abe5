// The module hook of `npm start` (bin/start.js): a TypeScript source of the service loads from its stripped copy.
import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

let root = '';
let rootUrl = '';
let dir = '';

/** `root`: the repository; `dir`: the stripped copy of its sources, laid out the same way. */
export function initialize(data) {
  root = data.root;
  rootUrl = pathToFileURL(data.root).href;
  dir = data.dir;
}

export function load(url, context, nextLoad) {
  if (url.startsWith(rootUrl) && url.endsWith('.ts')) {
    const stripped = join(dir, relative(root, fileURLToPath(url)));
    if (existsSync(stripped)) return { format: 'module', source: readFileSync(stripped, 'utf8'), shortCircuit: true };
  }
  return nextLoad(url, context);
}
