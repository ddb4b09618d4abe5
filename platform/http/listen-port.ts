import { createServer } from 'node:net';

/**
 * Whether another program already listens on host:port. Asked before the slow part of the start (store, Temporal), so
 * a taken port is said at once; other bind errors (a host that is not this machine's) are left to the real listen.
 */
export function portTaken(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'EADDRINUSE'));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(false)));
  });
}

/** What a person reads when the port is taken: which port, and the one setting that moves the service. */
export function portTakenMessage(host: string, port: number, configPath: string): string {
  const next = port < 65535 ? port + 1 : 8788;
  return (
    `research-control-plane: port ${port} on ${host} is taken by another program, so the service cannot listen there.\n` +
    `  Start on another port:  RCP_LISTEN_PORT=${next} npm start\n` +
    `  or set "listen_port" in ${configPath} (this process's own gate and callback URLs follow it when the file leaves them out).\n` +
    `  See which program holds it:  ss -ltnp 'sport = :${port}'\n`
  );
}
