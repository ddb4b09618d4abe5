import { z } from 'zod';
import { doc, nonEmptyText, port, text } from './field-kinds.ts';

/** The platform's fields of Temporal: the embedded dev server or the frontend to connect to, namespace, task queue, TLS. */
export const temporalFields = {
  temporal_address: doc(text().default(''), {
    perReplica: true,
    description: 'Temporal frontend host:port; empty starts an embedded dev server under state_dir.',
    env: 'TEMPORAL_ADDRESS',
  }),
  temporal_namespace: doc(nonEmptyText().default('default'), { description: 'Temporal namespace.' }),
  temporal_task_queue: doc(nonEmptyText().default('control-plane'), { description: 'Temporal task queue.' }),
  temporal_ui_enabled: doc(z.boolean().default(true), {
    perReplica: true,
    description: 'Serve the embedded Temporal dev server\'s web UI (on loopback, without authentication); false starts the dev server without it.',
  }),
  temporal_ui_port: doc(port(1).default(8233), { perReplica: true, description: 'Port of the embedded Temporal dev server UI.' }),
  temporal_dev_server_port: doc(port(1).optional(), {
    perReplica: true,
    description: 'Frontend (gRPC) port of the embedded Temporal dev server; unset: 7233 when free, else a free port. Set it when two installs share a machine.',
  }),
  temporal_tls: doc(z.boolean().default(false), {
    perReplica: true,
    description: 'Connect to temporal_address over TLS, trusting the system CAs unless temporal_tls_server_ca_cert_path names one. Implied by the other temporal_tls_* fields and by temporal_api_key. TEMPORAL_TLS overrides it.',
  }),
  temporal_tls_server_ca_cert_path: doc(text().default(''), {
    perReplica: true,
    description: 'PEM file of the CA that signed the Temporal frontend\'s certificate. TEMPORAL_TLS_SERVER_CA_CERT_PATH overrides it.',
  }),
  temporal_tls_client_cert_path: doc(text().default(''), {
    perReplica: true,
    description: 'PEM file of this control plane\'s client certificate, for a Temporal that requires mTLS; with temporal_tls_client_key_path. TEMPORAL_TLS_CLIENT_CERT_PATH overrides it.',
  }),
  temporal_tls_client_key_path: doc(text().default(''), {
    perReplica: true,
    description: 'PEM file of the client certificate\'s private key. TEMPORAL_TLS_CLIENT_KEY_PATH overrides it.',
  }),
  temporal_tls_server_name: doc(text().default(''), {
    perReplica: true,
    description: 'Server name the Temporal frontend\'s certificate is checked against, when it is not the host of temporal_address. TEMPORAL_TLS_SERVER_NAME overrides it.',
  }),
  temporal_api_key: doc(text().default(''), {
    description: 'API key sent to Temporal (Temporal Cloud, or a server with an authorizer); turns TLS on. TEMPORAL_API_KEY overrides it.',
    secret: true,
  }),
};
