import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { runWorkerPreflight } from '../../capabilities/runs/worker-preflight.ts';
import type { WorkerRouting, WorkerTarget } from '../../capabilities/runs/domain/worker-lanes.ts';
import { PREFLIGHT_DEFAULTS } from '../../capabilities/runs/domain/preflight-checks.ts';
import type { AppDeps } from '../deps.ts';
import { HttpError } from '../../platform/http/errors.ts';
import { errorResponses } from '../../platform/http/responses.ts';
import { PreflightCheckSchema } from './run-answers.ts';

/** What a worker preflight checks and against which target; every field is optional. */
const PreflightBody = z
  .strictObject({
    wake_gate_url: z.url({ protocol: /^https?$/ }).optional(),
    bearer_token: z.string().min(1).max(4096).optional(),
    require_paused: z.boolean().default(PREFLIGHT_DEFAULTS.require_paused),
    strict: z.boolean().default(PREFLIGHT_DEFAULTS.strict),
    max_gpu_pct: z.number().min(0).max(100).default(PREFLIGHT_DEFAULTS.max_gpu_pct),
    min_memory_available_mib: z.number().int().min(0).optional(),
    machine_target: z.string().min(1).max(200).optional(),
  })
  // A POST without a body asks for the defaults.
  .prefault({});
type PreflightRequest = z.output<typeof PreflightBody>;

const withoutTrailingSlash = (url: string) => url.replace(/\/+$/, '');

function targetByUrl(routing: WorkerRouting, url: string): WorkerTarget | undefined {
  const wanted = withoutTrailingSlash(url);
  const matches = [...routing.targets.values()].filter((target) => withoutTrailingSlash(target.wake_gate_url) === wanted);
  return matches.find((target) => target.name === routing.defaultTarget) ?? matches[0];
}

/** The configured target the request names: a URL in a body must be a configured worker URL. */
function resolveTarget(routing: WorkerRouting, body: PreflightRequest): WorkerTarget {
  if (body.machine_target !== undefined) {
    const target = routing.targets.get(body.machine_target);
    if (!target) throw new HttpError(404, `unknown machine_target '${body.machine_target}'`);
    if (body.wake_gate_url !== undefined && withoutTrailingSlash(body.wake_gate_url) !== withoutTrailingSlash(target.wake_gate_url)) {
      throw new HttpError(400, `wake_gate_url is not the URL of machine_target '${body.machine_target}'`);
    }
    return target;
  }
  if (body.wake_gate_url !== undefined) {
    const target = targetByUrl(routing, body.wake_gate_url);
    if (!target) throw new HttpError(400, 'wake_gate_url is not a configured worker URL');
    return target;
  }
  const fallback = routing.defaultTarget === null ? undefined : routing.targets.get(routing.defaultTarget);
  if (!fallback) throw new HttpError(400, 'wake_gate_url is not configured');
  return fallback;
}

/** POST /control/api/preflight: checks one worker without dispatching; 200 whether or not it is ready. */
export const PreflightResultSchema = z.object({
  ok: z.boolean(),
  target: z.string().describe('The worker target name, or the URL when the request named no configured target'),
  summary: z.string(),
  checks: z.array(PreflightCheckSchema),
});

export async function preflightRoutes(instance: FastifyInstance, deps: Pick<AppDeps, 'store' | 'dispatch'>): Promise<void> {
  const app = instance.withTypeProvider<ZodTypeProvider>();
  const schema = {
    tags: ['dispatch'],
    summary: 'Check one worker gate without dispatching; 200 whether or not it is ready',
    body: PreflightBody,
    response: { 200: PreflightResultSchema, ...errorResponses(400, 401, 403, 404, 422) },
  };
  app.post('/control/api/preflight', { config: { auth: 'control' }, schema }, async (request) => {
    const body = request.body;
    const configured = resolveTarget(deps.dispatch.routing, body);
    // A token in the body is tried for this check only; it is never stored or echoed.
    const target = body.bearer_token === undefined ? configured : { ...configured, bearer_token: body.bearer_token };
    return runWorkerPreflight(
      { store: deps.store, settings: deps.dispatch },
      {
        target,
        require_paused: body.require_paused,
        strict: body.strict,
        max_gpu_pct: body.max_gpu_pct,
        min_memory_available_mib:
          body.min_memory_available_mib ?? configured.min_memory_available_mib ?? PREFLIGHT_DEFAULTS.min_memory_available_mib,
        capacity: { slots: configured.slots, gpus: configured.gpus },
      },
    );
  });
}
