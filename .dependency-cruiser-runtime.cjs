/**
 * Workflow determinism, on runtime imports only (type imports are erased before the workflow bundle is built):
 * workflow code reaches nothing but workflows/, the rooms' pure rules (capabilities/<room>/domain/, the workflow-safe
 * surface of each room), the gate's wire contract, the workflow SDK and what they need (zod).
 * Node built-ins, I/O libraries and activity implementations would make replays diverge.
 */
module.exports = {
  forbidden: [
    {
      name: 'workflows-are-deterministic',
      comment: "workflows/ reaches only workflows/, the rooms' domain/, the gate contract, @temporalio/workflow, @temporalio/common and zod at run time.",
      severity: 'error',
      from: { path: '^workflows/' },
      to: {
        reachable: true,
        pathNot: [
          '^workflows/',
          '^capabilities/[^/]+/domain/',
          '^worker-gate/contract/',
          '^platform/http/(json-value|json-bounds)\\.ts$',
          '(^|/)node_modules/@temporalio/(workflow|common|proto)/',
          '(^|/)node_modules/zod/',
        ],
      },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(node_modules|state|dashboard|coverage)/' },
    tsPreCompilationDeps: false,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'] },
  },
};
