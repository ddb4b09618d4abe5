/**
 * Layer rules, checked by `npm run lint` (dependency-cruiser). docs/architecture.md#layout says what each folder holds; these
 * rules keep the arrows between them pointing one way. Type-only imports count here: a layer that needs another's
 * types still depends on it. The determinism of workflows is checked on runtime imports alone, in
 * `.dependency-cruiser-runtime.cjs`, since type imports vanish from the workflow bundle.
 */
const SOURCE = '^(api|http|files|services|clients|contracts|activities|workflows|worker-gate|domain|store|config|bin|api-client|cli)/';

/** Reaching `folders` (directly or through any chain of imports) from `from` is an error. */
const mustNotReach = (name, comment, from, folders) => ({
  name,
  comment,
  severity: 'error',
  from: { path: from },
  to: { path: `^(${folders.join('|')})/`, reachable: true },
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Modules form no cycles; a cycle means two modules are one concern or a dependency points the wrong way.',
      severity: 'error',
      from: { path: SOURCE },
      to: { circular: true },
    },
    {
      name: 'domain-is-pure',
      comment: 'domain/ holds pure rules: it imports only domain/ and zod, no Node built-ins and no I/O library.',
      severity: 'error',
      from: { path: '^domain/' },
      to: { pathNot: ['^domain/', '(^|/)node_modules/zod/'] },
    },
    mustNotReach('gate-stands-alone', 'The worker gate runs on worker machines without a database or Temporal.', '^worker-gate/', [
      'store', 'api', 'services', 'activities', 'workflows', 'clients', 'bin',
    ]),
    mustNotReach('store-below-services', 'store/ is the bottom layer above domain/: it never reaches what calls it.', '^store/', [
      'api', 'services', 'activities', 'workflows', 'clients', 'worker-gate', 'bin', 'config',
    ]),
    mustNotReach('http-primitives-stand-alone', 'http/ is shared by the control plane and the gate.', '^http/', [
      'api', 'services', 'activities', 'workflows', 'clients', 'worker-gate', 'store', 'bin', 'config',
    ]),
    mustNotReach('files-stand-alone', 'files/ (descriptor-based file safety) is shared by services, clients and the gate.', '^files/', [
      'api', 'http', 'services', 'activities', 'workflows', 'clients', 'worker-gate', 'store', 'bin', 'config', 'contracts', 'domain',
    ]),
    mustNotReach('contracts-are-wire-types', 'contracts/ are shared by a service and its client.', '^contracts/', [
      'api', 'services', 'activities', 'workflows', 'clients', 'worker-gate', 'store', 'bin', 'config',
    ]),
    mustNotReach('config-stands-alone', 'config/ is read by every process; it depends on no layer that uses it.', '^config/', [
      'api', 'services', 'activities', 'workflows', 'clients', 'worker-gate', 'store', 'bin',
    ]),
    mustNotReach('services-below-routes', 'Services are called by routes and activities, never the reverse.', '^services/', [
      'api', 'activities', 'worker-gate', 'bin',
    ]),
    mustNotReach('activities-below-routes', 'Activities run in the Temporal worker and call services.', '^activities/', [
      'api', 'worker-gate', 'bin',
    ]),
    // The run-workflows client types itself with the workflow function, whose types name the activities: allowed.
    mustNotReach('clients-below-routes', 'Clients talk to other services for the services above them.', '^clients/', [
      'api', 'worker-gate', 'bin',
    ]),
    {
      name: 'api-client-stands-alone',
      comment: 'api-client/ is the package a user imports on another machine: it talks to the control API over HTTP and imports nothing of the service.',
      severity: 'error',
      from: { path: '^api-client/' },
      to: { pathNot: ['^api-client/', '(^|/)node_modules/openapi-fetch/'] },
    },
    mustNotReach('cli-on-the-client', 'rcp talks to the control API through the typed client alone, as any user\'s script could.', '^cli/', [
      'api', 'http', 'files', 'services', 'clients', 'contracts', 'activities', 'workflows', 'worker-gate', 'domain', 'store', 'config', 'bin',
    ]),
    {
      name: 'routes-are-adapters',
      comment: 'api/ turns HTTP into service calls; it never runs activities or starts processes.',
      severity: 'error',
      from: { path: '^api/' },
      to: { path: '^(activities|bin)/' },
    },
    {
      name: 'only-bin-and-tests-use-bin',
      comment: 'bin/ is the process: it wires every layer together and nothing imports it back.',
      severity: 'error',
      from: { path: SOURCE, pathNot: '^bin/' },
      to: { path: '^bin/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // The generated client types: one large file without imports, which would only slow the cruise.
    exclude: { path: ['^(node_modules|state|dashboard|coverage)/', '^api-client/schema\.ts$'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
