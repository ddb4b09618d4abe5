// `npm start`'s entry point. Node 24 runs the TypeScript sources as they are (type stripping), which keeps a
// compiler out of the service's memory; older Node versions load them through the tsx loader instead.
const SUPPORTED_MAJOR = 24;
if (Number(process.versions.node.split('.')[0]) < SUPPORTED_MAJOR) {
  console.error(
    `warning: Node ${process.version} is not the supported runtime; research-control-plane supports Node ${SUPPORTED_MAJOR} LTS (README "Runtime"). Starting anyway.`,
  );
}
if (!process.features.typescript) {
  const { register } = await import('tsx/esm/api');
  register();
}
await import('./control-plane.ts');
