/**
 * Workflow determinism, on runtime imports only (type imports are erased before the workflow bundle is built):
 * workflow code reaches nothing but workflows/, domain/, the workflow SDK and what they need (zod, through domain/).
 * Node built-ins, I/O libraries and activity implementations would make replays diverge.
 */
module.exports = {
  forbidden: [
    {
      name: 'workflows-are-deterministic',
      comment: 'workflows/ reaches only workflows/, domain/, @temporalio/workflow, @temporalio/common and zod at run time.',
      severity: 'error',
      from: { path: '^workflows/' },
      to: {
        reachable: true,
        pathNot: ['^workflows/', '^domain/', '(^|/)node_modules/@temporalio/(workflow|common|proto)/', '(^|/)node_modules/zod/'],
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
