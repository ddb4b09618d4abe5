/**
 * The worker machine an evidence sync reaches over ssh: its `ssh_host` setting parsed and checked (never starting
 * with '-', no whitespace or control characters, nothing a shell could read), shown without secrets, and the
 * known_hosts option as rsync's `-e` string needs it.
 */

export interface SshTarget {
  user: string | undefined;
  host: string;
  port: number | undefined;
}

export const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;
const USER = /^[A-Za-z0-9._][A-Za-z0-9._-]*$/;
// A DNS name, an IPv4 address, or an ssh-config alias; never starting with '-' (ssh would read an option).
const HOST = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
const IPV6 = /^[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?$/;

function parsePort(text: string): number | undefined {
  if (!/^\d{1,5}$/.test(text)) return undefined;
  const port = Number(text);
  return port >= 1 && port <= 65535 ? port : undefined;
}

/** Parses ssh_host; a string naming an error when it is not one of the accepted forms. */
export function parseSshHost(text: string): SshTarget | string {
  let rest = text.trim();
  if (rest === '' || CONTROL_CHARS.test(rest) || /\s/.test(rest)) return 'ssh_host is empty or holds whitespace';
  if (rest.startsWith('ssh://')) rest = rest.slice('ssh://'.length).replace(/\/$/, '');
  let user: string | undefined;
  const at = rest.lastIndexOf('@');
  if (at >= 0) {
    user = rest.slice(0, at);
    rest = rest.slice(at + 1);
    // Not echoed: a 'user:password@' here would otherwise land in logs.
    if (!USER.test(user)) return 'ssh_host has an unusable user name (letters, digits, ".", "_" and "-" only)';
  }
  let host = rest;
  let port: number | undefined;
  const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(rest);
  if (bracketed) {
    host = bracketed[1] ?? '';
    if (!IPV6.test(host)) return `ssh_host has an unusable address: ${JSON.stringify(host)}`;
    if (bracketed[2] !== undefined) {
      port = parsePort(bracketed[2]);
      if (port === undefined) return `ssh_host has an unusable port: ${JSON.stringify(bracketed[2])}`;
    }
    return { user, host, port };
  }
  const colons = rest.split(':').length - 1;
  if (colons === 1) {
    const [name, portText] = rest.split(':') as [string, string];
    host = name;
    port = parsePort(portText);
    if (port === undefined) return `ssh_host has an unusable port: ${JSON.stringify(portText)}`;
  } else if (colons > 1) {
    if (!IPV6.test(rest)) return `ssh_host has an unusable address: ${JSON.stringify(rest)}`;
    return { user, host: rest, port: undefined };
  }
  if (!HOST.test(host)) return `ssh_host has an unusable host name: ${JSON.stringify(host)}`;
  return { user, host, port };
}

export const describeTarget = (target: SshTarget) => {
  const host = target.host.includes(':') ? `[${target.host}]` : target.host;
  return `${target.user ? `${target.user}@` : ''}${host}${target.port ? `:${target.port}` : ''}`;
};

/**
 * One argument of rsync's `-e` string. rsync splits that string on spaces, honouring single quotes; ssh reads
 * UserKnownHostsFile as a space-separated list with %-tokens, hence the double quotes and '%%' inside.
 */
export function knownHostsOption(file: string): string | undefined {
  if (CONTROL_CHARS.test(file) || /['"\\]/.test(file)) return undefined;
  const value = file.replace(/%/g, '%%');
  return /\s/.test(value) ? `'UserKnownHostsFile="${value}"'` : `UserKnownHostsFile=${value}`;
}
