import { tmpdir } from 'node:os';
import type { PaperSettings } from '../../capabilities/papers/paper-settings.ts';
import { ServiceSecrets } from '../../platform/config/service-secrets.ts';

/** Paper settings for a worker whose test drafts no papers, or drafts them with the deterministic writer. */
export const deterministicPaperSettings = (dir: string = tmpdir()): PaperSettings => ({
  stateDir: dir,
  projectRoot: dir,
  writer: { provider: 'deterministic', hosted: null, fallback: true },
  evidenceSync: null,
  secrets: ServiceSecrets.none,
});
