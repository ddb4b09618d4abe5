import { runQueueCheck, type QueueCheckDeps } from '../../capabilities/automation/queue-alerts.ts';

/** The scheduled queue check (workflows/automation/queue-check-workflow.ts): the same check as POST /control/api/alerts/queue-check, live. */
export function createAlertActivities(deps: QueueCheckDeps) {
  return {
    queueAlertCheck: async () => {
      const result = await runQueueCheck(deps, { dry_run: false, force_notify: false, trigger: 'schedule' });
      return { findings: result.findings.length, sent: result.sent, suppressed_by_cooldown: result.suppressed_by_cooldown };
    },
  };
}

export type AlertActivities = ReturnType<typeof createAlertActivities>;
