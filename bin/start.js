// `npm start`'s entry point. Node 24 runs the TypeScript sources as they are (type stripping), which keeps a
// compiler out of the service's memory; older Node versions load them through the tsx loader instead.
if (!process.features.typescript) {
  const { register } = await import('tsx/esm/api');
  register();
}
await import('./control-plane.ts');
