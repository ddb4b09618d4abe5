// The typed client at work (docs/http.md#typed-client): promote an admitted candidate, dispatch it, and wait for its run.
// Usage: RCP_URL=http://127.0.0.1:8080 RCP_TOKEN=… node scripts/examples/promote-and-wait.ts <candidate_id>
import { ControlApiError, createControlClient } from 'research-control-plane/client';

const [candidateId] = process.argv.slice(2);
if (!candidateId || !process.env.RCP_URL || !process.env.RCP_TOKEN) {
  console.error('usage: RCP_URL=… RCP_TOKEN=… node scripts/examples/promote-and-wait.ts <candidate_id>');
  process.exit(2);
}
const rcp = createControlClient({ baseUrl: process.env.RCP_URL, token: process.env.RCP_TOKEN });
const by = { requested_by: 'promote-and-wait' };

try {
  // A key per command: should this script be run again after a lost answer, the server answers the first result.
  await rcp.data(rcp.api.POST('/control/api/research/promote-candidate', { body: { ...by, candidate_id: candidateId, dry_run: false, idempotency_key: `promote-${candidateId}` } }));
  const dispatched = await rcp.data(rcp.api.POST('/control/dispatch-next', { body: { ...by, dry_run: false, idempotency_key: rcp.idempotencyKey() } }));
  if (dispatched.action !== 'live_dispatch' || !dispatched.run_id) {
    console.error(`not dispatched: ${dispatched.action}${dispatched.reason ? ` (${dispatched.reason})` : ''}`);
    process.exit(1);
  }
  const runId = dispatched.run_id;
  console.log(`dispatched ${dispatched.candidate?.project_id} as run ${runId}`);
  for (;;) {
    const detail = await rcp.data(rcp.api.GET('/control/api/v1/runs/{run_id}', { params: { path: { run_id: runId } } }));
    if (detail.finished) {
      console.log(`run ${runId}: ${detail.run.state}, decision ${detail.run.decision ?? 'none'}`);
      process.exit(detail.run.state === 'reconciled' ? 0 : 1);
    }
    await new Promise((resolve) => setTimeout(resolve, 5_000));
  }
} catch (error) {
  // One line, with the request id the server logged the failed call under.
  console.error(error instanceof ControlApiError ? error.message : String(error));
  process.exit(1);
}
