import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

/**
 * A request hook in Fastify's callback form. Fastify awaits an async hook through a promise and a microtask of its
 * own; every request runs through about ten hooks, so the hot ones are registered this way: a hook that finishes at
 * once calls `done` at once, and one that returns a promise (a session read) calls it when that settles. A thrown
 * error or a rejected promise fails the request as it would from an async hook.
 */
export function requestHook(
  run: (request: FastifyRequest, reply: FastifyReply) => void | Promise<void>,
): (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void {
  return (request, reply, done) => {
    let pending: void | Promise<void>;
    try {
      pending = run(request, reply);
    } catch (error) {
      done(error as Error);
      return;
    }
    if (pending === undefined) done();
    else pending.then(() => done(), (error: Error) => done(error));
  };
}

