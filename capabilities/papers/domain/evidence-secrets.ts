/**
 * Secret values of this service found in a paper's evidence (docs/security.md#security-model). Pure: workflows carry these.
 *
 * A finding names the file and which of the service's secrets it holds, by the config field or environment variable
 * that holds the secret (and the encoding it was found in), never by its value.
 */

export interface SecretFinding {
  /** The evidence file (relative to the project), or the package file, that holds the secrets. */
  file: string;
  /** e.g. `worker_wake_gate_bearer_token`, `control_api_bearer_token (base64)`. */
  secrets: string[];
}

/** The paper step the scan refused. */
export type SecretScanStage = 'draft' | 'rewrite' | 'paper_step' | 'writer_request' | 'package';

const STAGE_WORDS: Readonly<Record<SecretScanStage, string>> = {
  draft: 'the draft',
  rewrite: 'the rewrite',
  paper_step: 'the draft or rewrite',
  writer_request: "the paper writer's request",
  package: 'the finalization package',
};

/** The one-line reason a step was refused: which files hold which secrets, and what a person does next. */
export function secretFindingReason(stage: SecretScanStage, findings: readonly SecretFinding[]): string {
  const files = findings.map((finding) => `${JSON.stringify(finding.file)} (${finding.secrets.join(', ')})`).join('; ');
  return (
    `${STAGE_WORDS[stage]} was refused: the evidence holds secret values of this service: ${files}. ` +
    'The paper is held for human review: remove them from the project, rotate those secrets, then rewrite the draft'
  );
}

/** The audit event of a refusal; its payload names the files and the secrets' fields, never a value. */
export const SECRET_FOUND_EVENT = 'paper.evidence_secret_found';
