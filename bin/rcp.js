#!/usr/bin/env node
// `rcp`, the command line (docs/http.md#rcp-the-command-line). Plain JavaScript: Node 24 runs the TypeScript sources as they are; older
// Node loads them through tsx, a development dependency of a checkout.
import * as nodeModule from 'node:module';

if (!process.features.typescript || typeof nodeModule.registerHooks !== 'function') {
  const { register } = await import('tsx/esm/api');
  register();
}
const { main } = await import('../cli/rcp.ts');
process.exitCode = await main(process.argv.slice(2), {
  output: { json: false, out: process.stdout, err: process.stderr },
  env: process.env,
  stdin: process.stdin,
});
