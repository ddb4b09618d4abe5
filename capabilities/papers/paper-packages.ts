import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { secretFindingReason, type SecretFinding } from './domain/evidence-secrets.ts';
import { paperActionRefusal } from './domain/paper-stage.ts';
import { HUMAN_CHECKLIST_ITEM_IDS, type ChecklistStatus } from './domain/paper-status.ts';
import { appendAuditEvent } from '../../platform/store/audit-events.ts';
import { runIdempotent, storedResponse } from '../../platform/store/idempotency-keys.ts';
import { getPaper, insertFinalizationPackage, insertReviewHistory, setReviewStatus, type PaperRow } from './paper-ledger.ts';
import { getProject } from '../runs/projects.ts';
import type { Store } from '../../platform/store/store.ts';
import { CommandRefusedError } from '../../platform/command-errors.ts';
import { evidenceChangeSince, readEvidence, RecordedHashesSchema } from './paper-evidence.ts';
import { recomputePaperRank } from './paper-rerank.ts';
import { holdPaperForSecrets } from './paper-secret-hold.ts';
import { paperWithChecklist } from './paper-reviews.ts';
import type { PaperSettings } from './paper-settings.ts';
import { paperDirOf } from './paper-settings.ts';

/**
 * prepare-finalization-package (docs/papers.md#papers): the files a corpus imports, gathered once the automated checklist
 * has passed. A dry run answers the manifest it would write; a live call, once a person has passed
 * `final_human_approval`, writes the package directory with `manifest.json` and `SHA256SUMS`, records it, and
 * finalizes the review. The manifest is the same for the same draft, checklist and evidence, so its sha256 names it.
 */

export interface PackageRequest {
  idempotency_key: string;
  requested_by: string;
  target_label: string;
  dry_run: boolean;
}

interface PackageFile {
  path: string;
  bytes: Buffer;
}

const PACKAGE_SCOPE = 'paper-review.prepare-finalization-package';

/** The answer of a package written (not a dry run): what a replay of its key answers again. */
interface PreparedPackage {
  ok: true;
  dry_run: false;
  paper_id: string;
  package_dir: string;
  manifest: ReturnType<typeof manifestOf>;
  manifest_sha256: string;
  paper: Awaited<ReturnType<typeof paperWithChecklist>>;
}

/** Checklist statuses that let a package be prepared: none failed, none left for later. */
const SETTLED: readonly ChecklistStatus[] = ['pass', 'accepted_risk', 'not_applicable'];

const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

/** The package's manifest: what a corpus imports, each file with its sha256. */
function manifestOf(paper: PaperRow, targetLabel: string, files: PackageFile[]) {
  return {
    paper_id: paper.paper_id,
    project_id: paper.project_id,
    run_id: paper.run_id,
    title: paper.title,
    target_label: targetLabel,
    files: files.map((file) => ({ path: file.path, sha256: sha256(file.bytes), bytes: file.bytes.length })),
  };
}

async function writeAtomically(path: string, bytes: Buffer | string): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  await writeFile(temporary, bytes, { mode: 0o600 });
  await rename(temporary, path);
}

export function createPaperPackages(store: Store, settings: PaperSettings, clock: () => Date = () => new Date()) {
  /**
   * The evidence files exactly as the draft was written from them: read once each (capabilities/papers/paper-evidence.ts) and
   * compared with the sha256 the draft record holds, so a file edited, added or removed since is a 409 naming it.
   */
  async function reviewedEvidence(paper: PaperRow): Promise<{ files: { path: string; content: Buffer }[]; secrets: SecretFinding[] }> {
    const recorded = RecordedHashesSchema.safeParse(paper.evidence_summary?.file_hashes);
    if (!recorded.success) throw new CommandRefusedError(409, `the draft of '${paper.paper_id}' records no evidence hashes: rewrite the draft`);
    const project = await getProject(store, paper.project_id);
    const read = project ? await readEvidence(settings.projectRoot, project.project_dir, { keepBytes: true, secrets: settings.secrets }) : null;
    // Evidence holding the service's secrets is read whole here, and refused with the rest of the package below.
    if (!read || (!read.complete && read.secrets.length === 0)) throw new CommandRefusedError(409, `the evidence the draft was written from is missing now: ${read?.missing.join('; ') ?? 'the project is gone'}`);
    // Secrets come first: whether or not the files changed since, the paper is held for a person.
    const change = read.secrets.length > 0 ? null : evidenceChangeSince(recorded.data, read.hashes);
    if (change) throw new CommandRefusedError(409, `${change}: rewrite the draft`);
    return { files: read.hashes.map((file) => ({ path: file.path, content: file.content! })), secrets: read.secrets };
  }

  /** The draft's files as recorded, the evidence it was written from, and the checklist as it stands. */
  async function gatherFiles(paper: PaperRow & { checklist: { item_id: string; status: string; note: string | null }[] }): Promise<{ files: PackageFile[]; secrets: SecretFinding[] }> {
    const files: PackageFile[] = [];
    for (const artifact of paper.draft_artifacts) {
      let bytes: Buffer;
      try {
        bytes = await readFile(join(settings.stateDir, artifact.path));
      } catch {
        throw new CommandRefusedError(409, `the draft file ${artifact.path} is missing: rewrite the draft`);
      }
      if (sha256(bytes) !== artifact.sha256) throw new CommandRefusedError(409, `the draft file ${artifact.path} changed since it was recorded: rewrite the draft`);
      files.push({ path: artifact.path.slice(artifact.path.lastIndexOf('/') + 1), bytes });
    }
    const checklist = paper.checklist.map(({ item_id, status, note }) => ({ item_id, status, note }));
    files.push({ path: 'checklist.json', bytes: Buffer.from(`${JSON.stringify(checklist, null, 2)}\n`) });
    // The evidence was searched as it was read; the draft and the checklist are searched here.
    const secrets = secretsIn(files);
    const evidence = await reviewedEvidence(paper);
    for (const file of evidence.files) files.push({ path: `evidence/${file.path}`, bytes: file.content });
    secrets.push(...evidence.secrets.map((finding) => ({ ...finding, file: `evidence/${finding.file}` })));
    return { files: files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)), secrets };
  }

  /** Files searched for the service's secrets as the evidence is (in chunks, with overlap). */
  function secretsIn(files: PackageFile[]): SecretFinding[] {
    return files.flatMap((file) => {
      const found = settings.secrets.find(file.bytes);
      return found.length > 0 ? [{ file: file.path, secrets: found }] : [];
    });
  }

  /** A package that would carry the service's secrets: refused, and (unless a dry run) the paper held for a person. */
  async function refuseSecrets(paper: PaperRow, request: PackageRequest, findings: SecretFinding[], requestId: string | undefined): Promise<never> {
    const message = secretFindingReason('package', findings);
    if (!request.dry_run) {
      await holdPaperForSecrets(store, {
        paper,
        stage: 'package',
        findings,
        requested_by: request.requested_by,
        key: `prepare-finalization-package:${request.idempotency_key}`,
        request_key: request.idempotency_key,
        request_id: requestId ?? null,
      });
    }
    const held = await getPaper(store, paper.paper_id);
    throw new CommandRefusedError(409, { message, paper_id: paper.paper_id, secrets: findings, paper: held ? await paperWithChecklist(store, held) : null });
  }

  return {
    async prepare(paperId: string, request: PackageRequest, context: { request_id?: string | undefined } = {}) {
      const stored = await getPaper(store, paperId);
      if (!stored) throw new CommandRefusedError(404, `paper '${paperId}' does not exist`);
      const { idempotency_key: key, ...payload } = request;
      const keyRequest = { scope: PACKAGE_SCOPE, key, payload: { paper_id: paperId, ...payload } };
      if (!request.dry_run) {
        const replay = await storedResponse<PreparedPackage>(store, keyRequest);
        if (replay) return replay;
      }
      const paper = await paperWithChecklist(store, stored);
      const refused = paperActionRefusal('prepare_finalization_package', paper);
      if (refused) throw new CommandRefusedError(409, refused);
      const human = HUMAN_CHECKLIST_ITEM_IDS as readonly string[];
      const unsettled = paper.checklist.filter((item) => !human.includes(item.item_id) && !SETTLED.includes(item.status));
      if (unsettled.length > 0) {
        throw new CommandRefusedError(409, `the automated checklist has not passed: ${unsettled.map((item) => `${item.item_id} is ${item.status}`).join(', ')}`);
      }
      const approval = paper.checklist.find((item) => item.item_id === 'final_human_approval')!;
      const waitingFor = approval.status === 'pass' ? [] : [`final_human_approval is ${approval.status}: a person passes it with POST …/${paperId}/checklist/final_human_approval`];
      const { files, secrets } = await gatherFiles(paper);
      if (secrets.length > 0) await refuseSecrets(paper, request, secrets, context.request_id);
      const manifest = manifestOf(paper, request.target_label, files);
      const manifestJson = `${JSON.stringify(manifest, null, 2)}\n`;
      const manifestSha256 = sha256(manifestJson);
      const packageDir = join(paperDirOf(paperId), 'packages', manifestSha256.slice(0, 16));
      if (request.dry_run) {
        return { ok: true as const, dry_run: true as const, paper_id: paperId, ready: waitingFor.length === 0, waiting_for: waitingFor, package_dir: packageDir, manifest, manifest_sha256: manifestSha256 };
      }
      if (waitingFor.length > 0) throw new CommandRefusedError(409, `'${paperId}' is not approved for finalization: ${waitingFor.join('; ')}`);
      return store.transaction(async (tx) => {
        const run = async (): Promise<PreparedPackage> => {
          const locked = (await getPaper(tx, paperId, { forUpdate: true }))!;
          const dir = join(settings.stateDir, packageDir);
          for (const file of files) await writeAtomically(join(dir, file.path), file.bytes);
          await writeAtomically(join(dir, 'manifest.json'), manifestJson);
          const sums = [...files.map((file) => `${sha256(file.bytes)}  ${file.path}`), `${manifestSha256}  manifest.json`].join('\n');
          await writeAtomically(join(dir, 'SHA256SUMS'), `${sums}\n`);
          await insertFinalizationPackage(tx, { paper_id: paperId, target_label: request.target_label, package_dir: packageDir, manifest, manifest_sha256: manifestSha256, requested_by: request.requested_by });
          const finalized = locked.review_status !== 'finalized';
          if (finalized) {
            await setReviewStatus(tx, paperId, 'finalized');
            await insertReviewHistory(tx, { paper_id: paperId, from_status: locked.review_status, to_status: 'finalized', note: `finalization package ${manifestSha256}`, blocker: null, requested_by: request.requested_by });
            await recomputePaperRank(tx, paperId, clock());
          }
          await appendAuditEvent(tx, {
            entity_type: 'paper',
            entity_id: paperId,
            event_type: 'paper.finalization_package_prepared',
            payload: { target_label: request.target_label, package_dir: packageDir, manifest_sha256: manifestSha256, files: manifest.files.length, review_status: { from: locked.review_status, to: 'finalized' } },
            idempotency_key: key,
            actor: request.requested_by,
            request_id: context.request_id ?? null,
          });
          return { ok: true as const, dry_run: false as const, paper_id: paperId, package_dir: packageDir, manifest, manifest_sha256: manifestSha256, paper: await paperWithChecklist(tx, (await getPaper(tx, paperId))!) };
        };
        return (await runIdempotent(tx, keyRequest, run)).response;
      });
    },
  };
}

export type PaperPackages = ReturnType<typeof createPaperPackages>;
