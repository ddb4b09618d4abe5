/**
 * A process that starts a Temporal dev server, prints its pid, and then ends without stopping it, as argv says:
 *   node --import tsx test/support/dev-server-parent.ts <binary> <log file> <port> exit|throw|hang
 * exit: process.exit(1) (the shutdown deadline, a second signal); throw: an uncaught exception; hang: wait to be killed.
 * The port comes from the test (test/support/ports.ts), which owns the ports of its slot.
 */
import { startTemporalDevServer } from '../../platform/temporal/temporal-dev-server.ts';

const [binaryPath, logFile, portText, ending] = process.argv.slice(2);
const port = Number(portText);
if (!binaryPath || !logFile || !Number.isInteger(port) || !['exit', 'throw', 'hang'].includes(ending ?? '')) {
  throw new Error('usage: dev-server-parent.ts <binary> <log file> <port> exit|throw|hang');
}
const server = await startTemporalDevServer({ binaryPath, logFile, namespace: 'default', headless: true, port });
process.stdout.write(`${server.pid} ${server.address}\n`);
if (ending === 'exit') process.exit(1);
if (ending === 'throw') setTimeout(() => { throw new Error('an uncaught exception'); }, 0);
if (ending === 'hang') setInterval(() => undefined, 1_000);
