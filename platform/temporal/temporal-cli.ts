import { accessSync, constants, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';

/** The only CLI version we build and test against (later tags cannot be `go install`ed). */
export const TEMPORAL_CLI_VERSION = '1.5.1';

type Env = Record<string, string | undefined>;

/** Cache folder shared with scripts/install-temporal-cli.sh; keep the two in step. */
export function cacheRoot(env: Env = process.env): string {
  return (
    nonEmpty(env.RCP_CACHE_DIR) ??
    join(nonEmpty(env.XDG_CACHE_HOME) ?? join(nonEmpty(env.HOME) ?? homedir(), '.cache'), 'research-control-plane')
  );
}

export function temporalCliCachePath(env: Env = process.env): string {
  return join(cacheRoot(env), `temporal-cli-${TEMPORAL_CLI_VERSION}`, 'temporal');
}

/**
 * Finds a `temporal` binary: TEMPORAL_CLI_PATH, then the install script's cache, then PATH.
 * An explicit TEMPORAL_CLI_PATH that is not executable yields undefined rather than silently
 * falling back, so a typo is reported instead of running a different binary.
 */
export function locateTemporalCli(env: Env = process.env): string | undefined {
  const explicit = nonEmpty(env.TEMPORAL_CLI_PATH);
  if (explicit !== undefined) return isExecutableFile(explicit) ? explicit : undefined;

  const cached = temporalCliCachePath(env);
  if (isExecutableFile(cached)) return cached;

  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, 'temporal');
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

export function temporalCliInstallHint(env: Env = process.env): string {
  const explicit = nonEmpty(env.TEMPORAL_CLI_PATH);
  const lines = [
    explicit !== undefined
      ? `TEMPORAL_CLI_PATH=${explicit} is not an executable file.`
      : 'Temporal CLI not found (checked TEMPORAL_CLI_PATH, the cache and PATH).',
    `Install it with: bash scripts/install-temporal-cli.sh  (needs Go; builds temporal v${TEMPORAL_CLI_VERSION} into ${temporalCliCachePath(env)}, a few minutes the first time)`,
    'Or set TEMPORAL_CLI_PATH to an existing temporal binary,',
    'or set TEMPORAL_ADDRESS=host:port to use an already running Temporal server instead of starting a dev server.',
  ];
  return lines.join('\n');
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
