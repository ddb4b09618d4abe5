import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncEvidence, type EvidenceSyncSettings } from '../../capabilities/papers/evidence-sync.ts';
import { parseSshHost } from '../../capabilities/papers/evidence-ssh-host.ts';
import { startSshd, type TestSshd } from '../support/sshd.ts';

/**
 * Evidence sync (capabilities/papers/evidence-sync.ts) against a real OpenSSH server on a loopback port (test/support/sshd.ts):
 * rsync over ssh copies exactly a run's paper evidence and nothing else, and every failure is reported, not thrown.
 */

const EVIDENCE = {
  'run_notes.md': '# Run notes\nThe loss went down.\n',
  '.research/decision.json': '{"decision":"positive","confidence":0.8}\n',
  'results/a/metrics.json': '{"accuracy":0.91}\n',
  'results/b/deep/table.json': '{"rows":[1,2,3]}\n',
  'results/b/plot.csv': 'x,y\n1,2\n',
};
const NOT_EVIDENCE = {
  'train.py': 'print("agent code")\n',
  'secrets.txt': 'API_KEY=do-not-copy\n',
  '.research/project.json': '{"name":"p1"}\n',
  '.research/prompt.md': 'do research\n',
  'src/model.py': 'class Model: ...\n',
  'results.json': '{"not":"under results/"}\n',
  'notes/run_notes.md': 'not the top-level notes\n',
};

async function writeTree(dir: string, files: Record<string, string>): Promise<void> {
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), text);
  }
}

/** Every file, directory and link under dir, relative ('d ' for directories, 'l ' for links, 'f ' for files). */
function listTree(dir: string, prefix = ''): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const rel = `${prefix}${entry.name}`;
    if (entry.isSymbolicLink()) return [`l ${rel}`];
    if (entry.isDirectory()) return [`d ${rel}`, ...listTree(join(dir, entry.name), `${rel}/`)];
    return [`f ${rel}`];
  }).sort();
}

let sshd: TestSshd;
let work: string;
let settings: EvidenceSyncSettings;
let knownHosts: string;

beforeAll(async () => {
  const started = performance.now();
  sshd = await startSshd();
  console.log(`sshd and ssh-agent up in ${Math.round(performance.now() - started)} ms at ${sshd.host}`);
  work = await mkdtemp(join(tmpdir(), 'rcp-evidence-sync-'));
  // A state dir with a space in its path: the known_hosts option must survive rsync's and ssh's word splitting.
  knownHosts = join(work, 'state dir', 'evidence-sync', 'known_hosts');
  settings = { ssh_host: sshd.host, remote_root: sshd.remoteRoot, timeout_ms: 15_000, known_hosts_file: knownHosts, env: sshd.env };
});

afterAll(async () => {
  await sshd?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

const freshRoot = () => mkdtemp(join(work, 'project-root-'));

describe('evidence sync over ssh', () => {
  it('copies exactly run_notes.md, .research/decision.json and results/, with their content', async () => {
    const remote = join(sshd.remoteRoot, 'p1');
    await writeTree(remote, { ...EVIDENCE, ...NOT_EVIDENCE });
    // A link among the results could point the paper at a file of the control plane's: links are not copied.
    await symlink('/etc/hostname', join(remote, 'results/a/link.json'));
    await mkdir(join(remote, 'results/empty'), { recursive: true });
    const projectRoot = await freshRoot();

    const report = await syncEvidence(settings, { project_root: projectRoot, project_dir: 'p1' });

    expect(report).toMatchObject({ ok: true, exit_code: 0, timed_out: false, over_cap: false, error: null });
    expect(report.copied).toEqual(Object.keys(EVIDENCE).sort());
    expect(report.source).toBe(`${sshd.host}:${remote}`);
    expect(report.destination).toBe(join(projectRoot, 'p1'));
    expect(report.command).toMatch(/^rsync -a --prune-empty-dirs .* --checksum .*--max-size=5242880 /);
    expect(report.command).toContain('BatchMode=yes');
    expect(report.duration_ms).toBeGreaterThan(0);

    const local = join(projectRoot, 'p1');
    expect(listTree(projectRoot)).toEqual(
      ['d p1', 'd p1/.research', 'd p1/results', 'd p1/results/a', 'd p1/results/b', 'd p1/results/b/deep', ...Object.keys(EVIDENCE).map((f) => `f p1/${f}`)].sort(),
    );
    for (const [path, text] of Object.entries(EVIDENCE)) expect(await readFile(join(local, path), 'utf8')).toBe(text);

    // The host key was accepted on first use into the control plane's own known_hosts, in a 0700 directory.
    // (ssh may hash the names it writes, as Debian's ssh_config asks: ssh-keygen -F finds them either way.)
    expect(execFileSync('ssh-keygen', ['-F', `[127.0.0.1]:${sshd.port}`, '-f', knownHosts], { encoding: 'utf8' })).toContain('ssh-ed25519');
    expect(statSync(dirname(knownHosts)).mode & 0o777).toBe(0o700);

    // A second sync (host key now known) brings changes and keeps what is there.
    await writeFile(join(remote, 'results/a/metrics.json'), '{"accuracy":0.93}\n');
    const again = await syncEvidence(settings, { project_root: projectRoot, project_dir: 'p1' });
    expect(again).toMatchObject({ ok: true, exit_code: 0 });
    expect(await readFile(join(local, 'results/a/metrics.json'), 'utf8')).toBe('{"accuracy":0.93}\n');
  });

  it('is ok for a run without results: the two files arrive, in a nested project dir whose parents are created', async () => {
    await writeTree(join(sshd.remoteRoot, 'team/p2'), {
      'run_notes.md': EVIDENCE['run_notes.md'],
      '.research/decision.json': EVIDENCE['.research/decision.json'],
      'train.py': NOT_EVIDENCE['train.py'],
    });
    const projectRoot = await freshRoot();

    const report = await syncEvidence(settings, { project_root: projectRoot, project_dir: 'team/p2' });

    expect(report).toMatchObject({ ok: true, exit_code: 0, error: null });
    expect(report.copied).toEqual(['.research/decision.json', 'run_notes.md']);
    expect(listTree(projectRoot)).toEqual(['d team', 'd team/p2', 'd team/p2/.research', 'f team/p2/.research/decision.json', 'f team/p2/run_notes.md']);
  });

  it('replaces links planted in the local project instead of writing through them', async () => {
    await writeTree(join(sshd.remoteRoot, 'p3'), EVIDENCE);
    const projectRoot = await freshRoot();
    const outside = await mkdtemp(join(work, 'outside-'));
    const local = join(projectRoot, 'p3');
    await mkdir(local);
    await symlink(outside, join(local, '.research'));
    await symlink(outside, join(local, 'results'));
    await symlink(join(outside, 'notes.md'), join(local, 'run_notes.md'));

    const report = await syncEvidence(settings, { project_root: projectRoot, project_dir: 'p3' });

    expect(report.ok).toBe(true);
    expect(report.copied).toEqual(Object.keys(EVIDENCE).sort());
    expect(await readdir(outside)).toEqual([]);
    expect(listTree(local).filter((entry) => entry.startsWith('l '))).toEqual([]);
  });

  it('fails for a remote project directory that does not exist, leaving nothing behind', async () => {
    const projectRoot = await freshRoot();

    const report = await syncEvidence(settings, { project_root: projectRoot, project_dir: 'nested/missing' });

    expect(report.ok).toBe(false);
    expect(report.exit_code).toBe(23);
    expect(report.error).toMatch(/remote project directory .*nested\/missing does not exist/);
    expect(report.copied).toEqual([]);
    expect(listTree(projectRoot)).toEqual([]);
  });

  it.each([
    ['201 results files', 'cap-files', (dir: string) => writeTree(dir, Object.fromEntries(Array.from({ length: 201 }, (_, i) => [`results/r${i}.json`, '{"a":1}']))), /more than 200 files/],
    ['a results file over 5 MiB', 'cap-file-size', (dir: string) => writeTree(dir, { 'results/big.json': 'x'.repeat(5 * 1024 * 1024 + 1) }), /a file of 5242881 bytes/],
    ['more than 32 MiB in all', 'cap-total', (dir: string) => writeTree(dir, Object.fromEntries(Array.from({ length: 7 }, (_, i) => [`results/r${i}.json`, 'x'.repeat(5 * 1024 * 1024)]))), /more than 33554432 bytes/],
  ])('over its caps on the worker (%s): counted first, nothing is copied, over_cap', async (_label, projectDir, plant, reason) => {
    const remote = join(sshd.remoteRoot, projectDir);
    await writeTree(remote, EVIDENCE);
    await plant(remote);
    const projectRoot = await freshRoot();

    const report = await syncEvidence(settings, { project_root: projectRoot, project_dir: projectDir });

    expect(report).toMatchObject({ ok: false, over_cap: true, copied: [] });
    expect(report.command).toContain('--list-only');
    expect(report.error).toMatch(reason);
    expect(report.error).toContain('counts as missing');
    expect(listTree(projectRoot)).toEqual([]);
  });

  it.each([
    ['files', 'grow-files', 'for i in $(seq 1 2000); do echo "{\\"a\\":$i}" > "$GROW_DIR/results/late-$i.json"; done', /more than 200 files/],
    ['bytes', 'grow-bytes', 'for i in $(seq 1 12); do head -c 4194304 /dev/zero > "$GROW_DIR/results/late-$i.json"; done', /more than 33554432 bytes/],
  ])('stops the copy at its caps when the evidence grows in %s between the listing and the copy', async (_label, projectDir, grow, reason) => {
    const remote = join(sshd.remoteRoot, projectDir);
    await writeTree(remote, EVIDENCE);
    // ssh as rsync starts it: the second connection (the copy, after the listing) first grows the worker's evidence.
    const bin = join(work, `${projectDir}-bin`);
    await mkdir(bin);
    const wrapper = ['#!/bin/sh', 'n=$(($(cat "$GROW_COUNT" 2>/dev/null || echo 0) + 1))', 'echo "$n" > "$GROW_COUNT"', `if [ "$n" = 2 ]; then ${grow}; fi`, `exec ${execFileSync('sh', ['-c', 'command -v ssh'], { encoding: 'utf8' }).trim()} "$@"`];
    await writeFile(join(bin, 'ssh'), `${wrapper.join('\n')}\n`, { mode: 0o755 });
    const env = { ...sshd.env, PATH: `${bin}:${process.env.PATH}`, GROW_COUNT: join(bin, 'count'), GROW_DIR: remote };
    const projectRoot = await freshRoot();

    // The growing, the checksums of the grown files and the copy all run inside timeout_ms: on a loaded two-core
    // machine that takes well over the 15 s the other cases get.
    const report = await syncEvidence({ ...settings, env, timeout_ms: 90_000 }, { project_root: projectRoot, project_dir: projectDir });

    expect(readFileSync(join(bin, 'count'), 'utf8').trim()).toBe('2');
    expect(report.error).toMatch(reason);
    expect(report.error).toContain('during the copy');
    expect(report).toMatchObject({ ok: false, over_cap: true });
    // Stopped, not finished: the grown evidence (2,000 files, or 48 MiB) never arrives whole.
    const local = listTree(join(projectRoot, projectDir, 'results')).filter((entry) => entry.startsWith('f '));
    const localBytes = local.reduce((sum, entry) => sum + statSync(join(projectRoot, projectDir, 'results', entry.slice(2))).size, 0);
    expect(local.length).toBeLessThan(2000);
    expect(localBytes).toBeLessThan(12 * 4 * 1024 * 1024);
  }, 120_000);

  it.each([
    ['../escape', /'\.\.' segments/],
    ['p1/../../escape', /'\.\.' segments/],
    ['/abs', /must be relative/],
    ['', /empty/],
    ['.', /project_root itself/],
  ])('refuses project_dir %j without running anything', async (projectDir, reason) => {
    const projectRoot = await freshRoot();
    // Were rsync started, it could not be found on this PATH and the error would say so.
    const report = await syncEvidence({ ...settings, env: { ...sshd.env, PATH: '/nonexistent' } }, { project_root: projectRoot, project_dir: projectDir });

    expect(report).toMatchObject({ ok: false, command: '', exit_code: null, timed_out: false, copied: [] });
    expect(report.error).toMatch(reason);
    expect(listTree(projectRoot)).toEqual([]);
    expect(existsSync(join(work, 'escape'))).toBe(false);
  });

  it('refuses a project dir that leaves project_root through a symbolic link', async () => {
    await writeTree(join(sshd.remoteRoot, 'linked'), EVIDENCE);
    const projectRoot = await freshRoot();
    const outside = await mkdtemp(join(work, 'outside-'));
    await symlink(outside, join(projectRoot, 'linked'));

    const report = await syncEvidence(settings, { project_root: projectRoot, project_dir: 'linked' });

    expect(report).toMatchObject({ ok: false, command: '', exit_code: null });
    expect(report.error).toMatch(/symbolic link/);
    expect(await readdir(outside)).toEqual([]);
  });

  it.each(['-oProxyCommand=touch /tmp/pwned', '-p22 host', 'user@', 'host:99999', 'us er@host', 'host;id'])(
    'refuses ssh_host %j without running anything',
    async (sshHost) => {
      const projectRoot = await freshRoot();
      const report = await syncEvidence({ ...settings, ssh_host: sshHost }, { project_root: projectRoot, project_dir: 'p1' });
      expect(report).toMatchObject({ ok: false, command: '', exit_code: null });
      expect(report.error).toMatch(/ssh_host/);
      expect(listTree(projectRoot)).toEqual([]);
    },
  );

  it('keeps a password written into ssh_host out of the report', async () => {
    const projectRoot = await freshRoot();
    const report = await syncEvidence({ ...settings, ssh_host: 'ssh://me:hunter2@worker:22' }, { project_root: projectRoot, project_dir: 'p1' });
    expect(report).toMatchObject({ ok: false, command: '', source: `ssh://…@worker:22:${sshd.remoteRoot}/p1` });
    expect(JSON.stringify(report)).not.toContain('hunter2');
  });

  it('reads every accepted form of ssh_host', () => {
    expect(parseSshHost('root@127.0.0.1:2222')).toEqual({ user: 'root', host: '127.0.0.1', port: 2222 });
    expect(parseSshHost('ssh://deploy@gpu-1.lab:2200')).toEqual({ user: 'deploy', host: 'gpu-1.lab', port: 2200 });
    expect(parseSshHost('ssh://gpu-1')).toEqual({ user: undefined, host: 'gpu-1', port: undefined });
    expect(parseSshHost('worker_alias')).toEqual({ user: undefined, host: 'worker_alias', port: undefined });
    expect(parseSshHost('me@[::1]:22')).toEqual({ user: 'me', host: '::1', port: 22 });
    expect(parseSshHost('fe80::1')).toEqual({ user: undefined, host: 'fe80::1', port: undefined });
  });
});

describe('evidence sync failures', () => {
  it('reports a worker whose sshd is down as a connection failure, writing nothing locally', async () => {
    const down = await startSshd();
    try {
      await writeTree(join(down.remoteRoot, 'p1'), EVIDENCE);
      await down.kill();
      const projectRoot = await freshRoot();

      const report = await syncEvidence(
        { ssh_host: down.host, remote_root: down.remoteRoot, timeout_ms: 10_000, known_hosts_file: join(down.scratchDir, 'known_hosts'), env: down.env },
        { project_root: projectRoot, project_dir: 'team/p1' },
      );

      expect(report.ok).toBe(false);
      expect(report.timed_out).toBe(false);
      // rsync answers 255 (ssh's code) or 12 (protocol stream closed), whichever it notices first.
      expect([12, 255]).toContain(report.exit_code);
      expect(report.error).toMatch(/could not connect to .*127\.0\.0\.1/);
      expect(report.error).toMatch(/Connection refused/);
      expect(report.command).toContain(`-p ${down.port}`);
      expect(report.copied).toEqual([]);
      expect(listTree(projectRoot)).toEqual([]);
    } finally {
      await down.stop();
    }
  });

  it('kills the whole command after timeout_ms when the host accepts and never speaks', async () => {
    const sockets = new Set<Socket>();
    const silent: Server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()));
    const port = (silent.address() as { port: number }).port;
    try {
      const projectRoot = await freshRoot();
      const started = Date.now();

      const report = await syncEvidence(
        { ssh_host: `root@127.0.0.1:${port}`, remote_root: '/srv/projects', timeout_ms: 1500, known_hosts_file: join(work, 'silent', 'known_hosts'), env: sshd.env },
        { project_root: projectRoot, project_dir: 'p1' },
      );

      const elapsed = Date.now() - started;
      expect(report).toMatchObject({ ok: false, timed_out: true, exit_code: null, copied: [] });
      expect(report.error).toMatch(/timed out after 1500 ms/);
      expect(elapsed).toBeGreaterThanOrEqual(1400);
      expect(elapsed).toBeLessThan(3000);
      expect(listTree(projectRoot)).toEqual([]);
      // Neither rsync nor the ssh it started is left running.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const leftovers = readdirSync('/proc')
        .filter((pid) => /^\d+$/.test(pid))
        .map((pid) => {
          try {
            return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
          } catch {
            return '';
          }
        })
        .filter((cmdline) => /^(\S*\/)?(rsync|ssh) /.test(cmdline) && cmdline.includes(`-p ${port}`));
      expect(leftovers).toEqual([]);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
