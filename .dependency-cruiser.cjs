/**
 * The house's rules, checked by `npm run lint` (dependency-cruiser); docs/architecture.md#rooms says what each folder
 * holds. The card's layers (api/, workflows/, activities/, worker-gate/) stand on the capability rooms under
 * capabilities/, which stand on platform/; bin/ is the composition root. Type-only imports count here: a file that
 * needs another's types depends on it. The determinism of workflows is checked on runtime imports alone, in
 * `.dependency-cruiser-runtime.cjs`, since type imports vanish from the workflow bundle.
 */
const SOURCE = '^(api|platform|capabilities|activities|workflows|worker-gate|bin|api-client|cli)/';

/** Pure rules: a room's domain/, the gate's own rules and its wire contract. */
const PURE = '^(capabilities/[^/]+/domain|worker-gate/(domain|contract))/';

/** Reaching `folders` (directly or through any chain of imports) from `from` is an error. */
const mustNotReach = (name, comment, from, to) => ({
  name,
  comment,
  severity: 'error',
  from: { path: from },
  to: { path: to, reachable: true },
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
      comment: 'domain/ folders and the gate contract hold pure rules: they import only pure rules and zod, no Node built-ins and no I/O library.',
      severity: 'error',
      from: { path: PURE },
      to: { pathNot: [PURE, '^platform/http/(json-value|json-bounds)\\.ts$', '(^|/)node_modules/zod/'] },
    },
    {
      name: 'rooms-meet-through-their-surface',
      comment: "A room's ledger (its store/) is its own: another room asks the room's services, or reads its domain/ rules.",
      severity: 'error',
      from: { path: '^(capabilities|api|activities|workflows)/([^/]+)/' },
      to: { path: '^capabilities/[^/]+/store/', pathNot: '^capabilities/$2/store/' },
    },
    {
      name: 'api-plumbing-reaches-no-ledger',
      comment: "api/'s own files (the server, auth, answers) serve every room: they read no room's ledger.",
      severity: 'error',
      from: { path: '^api/[^/]+\\.ts$' },
      to: { path: '^capabilities/[^/]+/store/' },
    },
    mustNotReach(
      'platform-is-the-floor',
      'platform/ (HTTP plumbing, the store engines, config, the Temporal runtime, observability) serves every room and imports none, nor the layers above; it may name the gate contract and the request-id interceptor workflows run.',
      '^platform/',
      '^(capabilities|api|activities|bin|cli)/|^worker-gate/(?!contract/)|^workflows/(?!interceptors\\.ts$)',
    ),
    mustNotReach('gate-stands-alone', 'The worker gate runs on worker machines without a database or Temporal: it reaches platform/ and itself alone.', '^worker-gate/', '^(capabilities|api|activities|workflows|bin|cli)/'),
    mustNotReach('rooms-below-the-layers', 'A room serves the routes and activities above it; it never reaches them.', '^capabilities/', '^(api|bin|cli)/'),
    {
      name: 'rooms-start-workflows-not-activities',
      comment: "A room starts workflows (their ids, messages and start options); it never calls an activity. The typed workflow clients reach the activities' types through the workflow functions: that is allowed.",
      severity: 'error',
      from: { path: '^capabilities/' },
      to: { path: '^activities/' },
    },
    mustNotReach('activities-below-routes', 'Activities run in the Temporal worker and call the rooms.', '^activities/', '^(api|bin|cli)/'),
    {
      name: 'api-client-stands-alone',
      comment: 'api-client/ is the package a user imports on another machine: it talks to the control API over HTTP and imports nothing of the service.',
      severity: 'error',
      from: { path: '^api-client/' },
      to: { pathNot: ['^api-client/', '(^|/)node_modules/openapi-fetch/'] },
    },
    mustNotReach('cli-on-the-client', "rcp talks to the control API through the typed client alone, as any user's script could.", '^cli/', '^(api|platform|capabilities|activities|workflows|worker-gate|bin)/'),
    {
      name: 'routes-are-adapters',
      comment: 'api/ turns HTTP into calls of the rooms; it never runs activities or starts processes.',
      severity: 'error',
      from: { path: '^api/' },
      to: { path: '^(activities|bin)/' },
    },
    {
      name: 'only-the-composition-root-composes',
      comment: 'bin/ builds every service, client and worker once and hands them out; nothing imports it back.',
      severity: 'error',
      from: { path: SOURCE, pathNot: '^bin/' },
      to: { path: '^bin/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // The generated client types: one large file without imports, which would only slow the cruise.
    exclude: { path: ['^(node_modules|state|dashboard|coverage)/', '^api-client/schema\\.ts$'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
