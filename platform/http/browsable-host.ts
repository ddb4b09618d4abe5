/** The host to print in a URL a person opens: a wildcard listen address is reached on loopback; IPv6 gets brackets. */
export const browsableHost = (host: string) => (host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host);
