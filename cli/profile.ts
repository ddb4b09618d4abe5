import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

/** Where `rcp` finds the control plane and its token: RCP_URL and RCP_TOKEN, else the profile `rcp login` wrote. */
export interface Profile {
  url: string;
  token: string;
}

/** The profile file: under the user's config folder, readable by its owner alone. */
export function profilePath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME?.trim() || join(homedir(), '.config');
  return join(base, 'research-control-plane', 'rcp.json');
}

export class NotLoggedInError extends Error {}

export function readProfile(env: NodeJS.ProcessEnv = process.env): Profile {
  if (env.RCP_URL && env.RCP_TOKEN) return { url: env.RCP_URL, token: env.RCP_TOKEN };
  let text: string;
  try {
    text = readFileSync(profilePath(env), 'utf8');
  } catch {
    throw new NotLoggedInError(`not logged in: run rcp login, or set RCP_URL and RCP_TOKEN`);
  }
  let profile: Partial<Profile> = {};
  try {
    profile = JSON.parse(text) as Partial<Profile>;
  } catch {
    // Reported below, as a profile without its fields.
  }
  if (typeof profile?.url !== 'string' || typeof profile.token !== 'string') throw new NotLoggedInError(`${profilePath(env)} holds no url and token: run rcp login again`);
  return { url: env.RCP_URL || profile.url, token: env.RCP_TOKEN || profile.token };
}

export function writeProfile(profile: Profile, env: NodeJS.ProcessEnv = process.env): string {
  const path = profilePath(env);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, `${JSON.stringify(profile, null, 2)}\n`, { mode: 0o600 });
  // An older file keeps its mode through writeFileSync: make it the owner's alone either way.
  chmodSync(path, 0o600);
  return path;
}
