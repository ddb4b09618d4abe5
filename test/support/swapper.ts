import { spawn } from 'node:child_process';

/**
 * An agent's process left in its project, swapping a path between what it really is and a symbolic link in a loop
 * (each swap an atomic rename over the name), so that a reader that checks a path and then opens it again by name
 * reads through the link in some requests. It stops by itself after `durationMs`; `stop` ends it sooner.
 */
export interface Swapper {
  stop(): Promise<void>;
}

const SCRIPT = `
const fs = require('node:fs');
const [target, kind, linkTo, content, durationMs] = process.argv.slice(1);
const deadline = Date.now() + Number(durationMs);
const real = target + '.swap-real';
const link = target + '.swap-link';
for (let i = 0; Date.now() < deadline; i++) {
  if (kind === 'relink') {
    try {
      fs.rmSync(link, { force: true });
      fs.symlinkSync(i % 2 === 0 ? content : linkTo, link);
      fs.renameSync(link, target);
    } catch {}
    continue;
  }
  try {
    if (kind === 'dir') {
      fs.rmSync(real, { recursive: true, force: true });
      fs.mkdirSync(real);
    } else fs.writeFileSync(real, content);
    fs.rmSync(link, { force: true });
    fs.symlinkSync(linkTo, link);
    fs.rmSync(target, { recursive: kind === 'dir', force: true });
    fs.renameSync(real, target);
    if (kind === 'dir') fs.rmSync(target, { recursive: true, force: true });
    fs.renameSync(link, target);
  } catch {}
}
fs.rmSync(target, { recursive: kind === 'dir', force: true });
if (kind === 'dir') fs.mkdirSync(target); else if (kind === 'relink') fs.symlinkSync(content, target); else fs.writeFileSync(target, content);
`;

/**
 * `kind` 'file': `target` alternates between a file holding `content` and a link to `linkTo`; 'dir': a directory and the
 * link; 'relink': always a link, to `content` (a path) and to `linkTo` in turn, each swap one atomic rename.
 */
export function startSwapper(target: string, options: { kind: 'file' | 'dir' | 'relink'; linkTo: string; content?: string; durationMs: number }): Swapper {
  const child = spawn(process.execPath, ['-e', SCRIPT, target, options.kind, options.linkTo, options.content ?? '', String(options.durationMs)], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
