import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Certificates a test makes with the openssl command line: a CA, and leaf certificates it signs for a server
 * (localhost, 127.0.0.1) or a client. Short-lived keys in the test's own folder.
 */

export interface CertificatePair {
  cert: string;
  key: string;
}

const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });

export function makeCa(dir: string, name: string): CertificatePair {
  const pair = { cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) };
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj', `/CN=${name}`, '-keyout', pair.key, '-out', pair.cert]);
  return pair;
}

/** A leaf signed by `ca`: a server's for localhost and 127.0.0.1, or a client's. */
export function makeLeaf(dir: string, name: string, ca: CertificatePair, usage: 'server' | 'client'): CertificatePair {
  const pair = { cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) };
  const request = join(dir, `${name}.csr`);
  const extensions = join(dir, `${name}.ext`);
  openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', `/CN=${usage === 'server' ? 'localhost' : name}`, '-keyout', pair.key, '-out', request]);
  writeFileSync(
    extensions,
    usage === 'server' ? 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' : 'extendedKeyUsage=clientAuth\n',
  );
  openssl(['x509', '-req', '-in', request, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial', '-days', '2', '-extfile', extensions, '-out', pair.cert]);
  return pair;
}
