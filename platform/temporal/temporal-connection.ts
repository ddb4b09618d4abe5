import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadClientConfigProfile, type ClientConfigProfile, type ConfigDataSource } from '@temporalio/envconfig';
import type { NativeConnectionOptions } from '@temporalio/worker';
import type { Config } from '../config/schema.ts';

/**
 * How this process reaches Temporal (docs/getting-started.md#connecting-to-a-temporal-of-your-own): the config's temporal_* fields, overridden by the standard
 * TEMPORAL_* environment variables and, when TEMPORAL_CONFIG_FILE or TEMPORAL_PROFILE names one, a Temporal CLI profile
 * (read by @temporalio/envconfig, as the Temporal CLI and the other SDKs read them). Certificates and keys are read and
 * checked here, so a missing or malformed one fails the start with a line naming the setting that pointed at it.
 */

export type TemporalConnectionFields = Pick<
  Config,
  | 'temporal_address'
  | 'temporal_namespace'
  | 'temporal_tls'
  | 'temporal_tls_server_ca_cert_path'
  | 'temporal_tls_client_cert_path'
  | 'temporal_tls_client_key_path'
  | 'temporal_tls_server_name'
  | 'temporal_api_key'
>;

/** A Temporal setting that cannot work; the message names the setting (a config field or an environment variable). */
export class TemporalSettingError extends Error {}

export interface TemporalConnectionPlan {
  /** Empty: start the embedded dev server. */
  address: string;
  namespace: string;
  /** Everything NativeConnection.connect needs but the address. */
  options: Omit<NativeConnectionOptions, 'address'>;
  /** For the start-up line and for errors: plaintext, TLS, mTLS, with or without an API key. */
  security: string;
  /** The settings the TLS material came from, to name in an error the server's answer points at. */
  sources: { serverCa: string | null; clientCert: string | null };
}

/** A value and the setting it came from. */
interface Sourced<T> {
  value: T;
  setting: string;
}

export function planTemporalConnection(fields: TemporalConnectionFields, env: NodeJS.ProcessEnv): TemporalConnectionPlan {
  // An empty variable is unset (the test harness blanks TEMPORAL_ADDRESS so that the config's address holds).
  const temporalEnv = Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[0].startsWith('TEMPORAL_') && !!entry[1]));
  const profileFile = temporalEnv.TEMPORAL_CONFIG_FILE || temporalEnv.TEMPORAL_PROFILE ? `the Temporal profile ${temporalEnv.TEMPORAL_PROFILE ?? 'default'} of ${temporalEnv.TEMPORAL_CONFIG_FILE ?? 'the default config file'}` : null;
  let profile: ClientConfigProfile;
  try {
    profile = loadClientConfigProfile({ overrideEnvVars: temporalEnv, disableFile: profileFile === null });
  } catch (error) {
    throw new TemporalSettingError(`TEMPORAL_CONFIG_FILE/TEMPORAL_PROFILE: ${(error as Error).message}`);
  }
  /** The profile's value (from `variable`, else the profile file) over the config field's. */
  const pick = <T>(fromProfile: T | undefined, variable: string, fromConfig: T, field: keyof TemporalConnectionFields): Sourced<T> =>
    fromProfile !== undefined && fromProfile !== ''
      ? { value: fromProfile, setting: temporalEnv[variable] ? variable : (profileFile ?? variable) }
      : { value: fromConfig, setting: field };
  const source = (data: ConfigDataSource | undefined, pathVariable: string, field: keyof TemporalConnectionFields): Sourced<ConfigDataSource | null> => {
    if (data) return { value: data, setting: temporalEnv[pathVariable] ? pathVariable : 'path' in data ? (profileFile ?? pathVariable) : pathVariable.replace(/_PATH$/, '_DATA') };
    const path = fields[field] as string;
    return { value: path ? { path } : null, setting: field };
  };

  const address = pick(profile.address, 'TEMPORAL_ADDRESS', fields.temporal_address, 'temporal_address');
  const namespace = pick(profile.namespace, 'TEMPORAL_NAMESPACE', fields.temporal_namespace, 'temporal_namespace');
  const apiKey = pick(profile.apiKey, 'TEMPORAL_API_KEY', fields.temporal_api_key, 'temporal_api_key');
  const tls = profile.tls;
  const serverCa = source(tls?.serverCACert, 'TEMPORAL_TLS_SERVER_CA_CERT_PATH', 'temporal_tls_server_ca_cert_path');
  const clientCert = source(tls?.clientCert, 'TEMPORAL_TLS_CLIENT_CERT_PATH', 'temporal_tls_client_cert_path');
  const clientKey = source(tls?.clientKey, 'TEMPORAL_TLS_CLIENT_KEY_PATH', 'temporal_tls_client_key_path');
  const serverName = pick(tls?.serverName, 'TEMPORAL_TLS_SERVER_NAME', fields.temporal_tls_server_name, 'temporal_tls_server_name');
  const tlsOn =
    tls?.disabled === false ||
    (tls?.disabled !== true &&
      (fields.temporal_tls || apiKey.value !== '' || serverCa.value !== null || clientCert.value !== null || clientKey.value !== null || serverName.value !== ''));

  const metadata = profile.grpcMeta && Object.keys(profile.grpcMeta).length > 0 ? { metadata: profile.grpcMeta } : {};
  const withKey = apiKey.value ? { apiKey: apiKey.value } : {};
  if (!address.value) return { address: '', namespace: namespace.value, options: {}, security: 'embedded dev server', sources: { serverCa: null, clientCert: null } };
  if (!tlsOn) {
    return { address: address.value, namespace: namespace.value, options: { ...withKey, ...metadata }, security: apiKey.value ? 'plaintext, with an API key' : 'plaintext', sources: { serverCa: null, clientCert: null } };
  }
  if ((clientCert.value === null) !== (clientKey.value === null)) {
    const missing = clientCert.value === null ? clientCert : clientKey;
    throw new TemporalSettingError(`${missing.setting}: is required with ${(clientCert.value === null ? clientKey : clientCert).setting} (a client certificate needs its key)`);
  }
  const ca = serverCa.value ? readPem(serverCa, 'certificate') : undefined;
  const pair = clientCert.value && clientKey.value ? { crt: readPem(clientCert as Sourced<ConfigDataSource>, 'certificate'), key: readPem(clientKey as Sourced<ConfigDataSource>, 'key') } : undefined;
  if (pair && !new X509Certificate(pair.crt).checkPrivateKey(createPrivateKey(pair.key))) {
    throw new TemporalSettingError(`${clientKey.setting}: is not the key of the certificate in ${clientCert.setting}`);
  }
  return {
    address: address.value,
    namespace: namespace.value,
    options: {
      tls: {
        ...(serverName.value ? { serverNameOverride: serverName.value } : {}),
        ...(ca ? { serverRootCACertificate: ca } : {}),
        ...(pair ? { clientCertPair: pair } : {}),
      },
      ...withKey,
      ...metadata,
    },
    security: `${pair ? 'mTLS' : 'TLS'}${ca ? ` (server CA from ${serverCa.setting})` : ''}${apiKey.value ? ', with an API key' : ''}`,
    sources: { serverCa: ca ? serverCa.setting : null, clientCert: pair ? clientCert.setting : null },
  };
}

/** The PEM a setting points at, checked to be what it should be; the error names the setting. */
function readPem(source: Sourced<ConfigDataSource | null>, kind: 'certificate' | 'key'): Buffer {
  const data = source.value!;
  let pem: Buffer;
  try {
    pem = 'path' in data ? readFileSync(data.path) : Buffer.from(data.data);
  } catch (error) {
    throw new TemporalSettingError(`${source.setting}: cannot read ${(data as { path: string }).path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  try {
    if (kind === 'certificate') new X509Certificate(pem);
    else createPrivateKey(pem);
  } catch (error) {
    throw new TemporalSettingError(`${source.setting}: ${'path' in data ? data.path : 'the value'} is not a PEM ${kind === 'certificate' ? 'certificate' : 'private key'} (${(error as Error).message})`);
  }
  return pem;
}

/**
 * The one line a failed connection is reported with: a TLS failure names the setting to look at (the server's CA when
 * this side refused the server's certificate, the client certificate when the server refused this side's).
 */
export function connectionFailure(plan: TemporalConnectionPlan, error: unknown): TemporalSettingError {
  const message = (error as Error).message ?? String(error);
  const tls = 'tls' in plan.options;
  const line = (setting: string, why: string) => new TemporalSettingError(`${setting}: ${why} connecting to Temporal at ${plan.address} (${message.split('\n')[0]})`);
  if (tls && /UnknownIssuer|invalid peer certificate|certificate verify failed|self[- ]signed|NotValidForName/i.test(message)) {
    return line(plan.sources.serverCa ?? 'temporal_tls_server_ca_cert_path', `the server's certificate is not trusted (${plan.sources.serverCa ? 'is it the CA that signed it?' : 'set the CA that signed it'})`);
  }
  // Under TLS 1.3 the server judges the client's certificate after the handshake: a refused one shows as the
  // connection closed on the first call, not as an alert.
  if (tls && /certificate required|bad certificate|unknown ca|CertificateRequired|BadCertificate|UnknownCA|connection closed|broken pipe|Canceled/i.test(message)) {
    return plan.sources.clientCert
      ? line(plan.sources.clientCert, "the server refused this client's certificate (is it signed by a CA the server trusts?)")
      : line('temporal_tls_client_cert_path', 'the server closed the connection (does it require a client certificate?)');
  }
  return line('temporal_address', 'could not connect');
}
