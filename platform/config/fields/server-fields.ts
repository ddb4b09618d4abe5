import { z } from 'zod';
import { doc, hostEntry, nonEmptyText, port, token } from './field-kinds.ts';

export const ROLES = ['control_plane', 'worker_gate', 'temporal_worker'] as const;
export type Role = (typeof ROLES)[number];

/** The platform's fields of the process itself: the control API's token, the roles it serves, where it listens, its HTTP limits, the session cookie. */
export const serverFields = {
  control_api_bearer_token: doc(token(), {
    description: 'Bearer token for control API calls and incoming worker event posts.',
    secret: true,
  }),
  roles: doc(
    z
      .array(z.enum(ROLES))
      .min(1)
      .refine((roles) => new Set(roles).size === roles.length, 'must not list a role twice')
      .meta({ uniqueItems: true })
      .default(['control_plane']),
    {
      perReplica: true,
      description:
        'Roles served by this process: control_plane (HTTP API, dashboard and Temporal workers) and worker_gate may share one port; temporal_worker alone runs the Temporal workers without an HTTP server, beside control planes on the same Postgres and Temporal.',
    },
  ),
  listen_host: doc(nonEmptyText().default('0.0.0.0'), { perReplica: true, description: 'Address to listen on.' }),
  listen_port: doc(port(0).default(8787), { perReplica: true, description: 'Port to listen on; 0 picks a free port.' }),
  allowed_hosts: doc(z.array(hostEntry()).default([]), {
    perReplica: true,
    description:
      'Host names this server answers to, each alone (any port) or as name:port; a request whose Host header names another gets 421 before authentication (IP addresses always pass). Guards a loopback dashboard against DNS rebinding. Empty: no check.',
  }),
  http_request_timeout_sec: doc(z.number().min(1).max(3600).default(30), {
    perReplica: true,
    description: 'Longest time a client may take to send a whole request (headers and body); a slower one is answered 408 and its connection closed.',
  }),
  http_max_connections: doc(z.number().int().min(1).default(256), {
    perReplica: true,
    description: 'Most client connections open at once; a connection beyond it is closed as soon as it is accepted.',
  }),
  http_max_connections_per_address: doc(z.number().int().min(1).default(128), {
    perReplica: true,
    description:
      'Most connections one client address (IPv6: one /64) may hold open at once, capped at http_max_connections; a connection beyond it is closed as soon as it is accepted. Every local process connects from the same loopback address and shares this limit.',
  }),
  session_cookie_secure: doc(z.boolean().default(false), {
    description: 'Mark the dashboard session cookie Secure (set when served over HTTPS).',
  }),
};
