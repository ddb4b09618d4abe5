import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { HostedWriterError, writeHostedDraft } from './paper-writer.ts';
import { deterministicDraft, type Draft, type DraftEvidence } from './domain/paper-draft.ts';
import { paperDirOf, type PaperSettings } from './paper-settings.ts';

/**
 * Writing a paper's draft (docs/papers.md#papers): the configured writer, the hosted one falling back to the deterministic
 * one when allowed, and the draft's files under `<state_dir>/papers/<paper_id>/`.
 */

export type WriterName = 'deterministic' | 'hosted';

export interface WrittenDraft {
  draft: Draft;
  writer: WriterName;
  /** Why the hosted writer was not used, when it failed and the deterministic one wrote the draft instead. */
  fallback_reason: string | null;
}

/** The hosted writer failed and fallback is off: the draft is not written. */
export class PaperWriterFailedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PaperWriterFailedError';
  }
}

export async function writePaper(settings: PaperSettings['writer'], evidence: DraftEvidence, signal?: AbortSignal): Promise<WrittenDraft> {
  if (settings.provider === 'deterministic' || settings.hosted === null) {
    return { draft: deterministicDraft(evidence), writer: 'deterministic', fallback_reason: null };
  }
  try {
    return { draft: await writeHostedDraft(settings.hosted, evidence, signal ? { signal } : {}), writer: 'hosted', fallback_reason: null };
  } catch (error) {
    if (!(error instanceof HostedWriterError)) throw error;
    const reason = `hosted writer ${error.kind}: ${error.message}`;
    if (!settings.fallback) throw new PaperWriterFailedError(`${reason} (paper_writer_fallback_enabled is false, so no draft was written)`);
    return { draft: deterministicDraft(evidence), writer: 'deterministic', fallback_reason: reason };
  }
}

export interface DraftArtifact {
  /** Relative to state_dir. */
  path: string;
  sha256: string;
  bytes: number;
}

export const DRAFT_FILES = { paper: 'paper.md', meta: 'draft.json' } as const;

const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

/** Writes the draft's files, each whole or not at all (a temporary file renamed into place), and says what they hold. */
export async function storeDraft(
  stateDir: string,
  paperId: string,
  written: WrittenDraft,
  evidence: { sha256: string; files: string[] },
): Promise<{ draft_dir: string; artifacts: DraftArtifact[] }> {
  const draftDir = paperDirOf(paperId);
  const dir = join(stateDir, draftDir);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const meta = {
    paper_id: paperId,
    title: written.draft.title,
    abstract: written.draft.abstract,
    writer: written.writer,
    writer_fallback_reason: written.fallback_reason,
    evidence,
  };
  const contents: [string, string][] = [
    [DRAFT_FILES.paper, written.draft.markdown],
    [DRAFT_FILES.meta, `${JSON.stringify(meta, null, 2)}\n`],
  ];
  const artifacts: DraftArtifact[] = [];
  for (const [name, text] of contents) {
    const temporary = join(dir, `.${name}.${process.pid}.tmp`);
    await writeFile(temporary, text, { mode: 0o600 });
    await rename(temporary, join(dir, name));
    artifacts.push({ path: join(draftDir, name), sha256: sha256(text), bytes: Buffer.byteLength(text) });
  }
  return { draft_dir: draftDir, artifacts };
}

/** A stored draft file read back, or null when it is missing or no longer what was recorded. */
export async function readDraftArtifact(stateDir: string, artifact: DraftArtifact): Promise<string | null> {
  try {
    const bytes = await readFile(join(stateDir, artifact.path));
    return sha256(bytes) === artifact.sha256 ? bytes.toString('utf8') : null;
  } catch {
    return null;
  }
}
