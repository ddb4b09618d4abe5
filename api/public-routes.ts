/** Routes served without credentials (interface.md "Authentication" rule 2, plus the session login itself). */
export const PUBLIC_ROUTES: ReadonlySet<string> = new Set([
  'GET /healthz',
  'GET /dashboard',
  'GET /control/dashboard',
  'GET /control/dashboard-v2',
  'GET /favicon.ico',
  'POST /control/api/session',
]);

export function isPublicRoute(method: string, path: string): boolean {
  const asGet = method === 'HEAD' ? 'GET' : method;
  return PUBLIC_ROUTES.has(`${asGet} ${path}`);
}
