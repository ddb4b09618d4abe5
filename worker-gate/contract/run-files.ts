import { z } from 'zod';

/**
 * A run's result files as its gate serves them (docs/worker-gate.md#a-runs-result-files): run_notes.md, the decision file
 * and everything under results/, listed with sizes and hashes, and one of them at a time with a preview capped in size.
 * The agent wrote them: every preview is data (text, or an image's bytes), never markup to run.
 */

export const RESULT_FILE_CAPS = {
  /** Bytes of a text preview (text, Markdown, JSON); a longer file is cut there, and says so. */
  previewTextBytes: 256 * 1024,
  /** Bytes of an image previewed whole; a larger one gets no preview. */
  previewImageBytes: 2 * 1024 * 1024,
  /** Bytes hashed of one file; a larger file is listed without its hash. */
  hashFileBytes: 64 * 1024 * 1024,
} as const;

/** The files a run's page lists: the run notes, the decision file, and results/. No other file of the project is served. */
export const RUN_NOTES_FILE = 'run_notes.md';
export const DECISION_FILE = '.research/decision.json';
export const RESULTS_DIR = 'results';

export const isResultPath = (path: string): boolean => path === RUN_NOTES_FILE || path === DECISION_FILE || path.startsWith(`${RESULTS_DIR}/`);

export const PREVIEW_KINDS = ['text', 'markdown', 'json', 'image', 'none'] as const;
export type PreviewKind = (typeof PREVIEW_KINDS)[number];

const MEDIA_TYPES: Record<string, { media_type: string; preview: PreviewKind }> = {
  md: { media_type: 'text/markdown', preview: 'markdown' },
  json: { media_type: 'application/json', preview: 'json' },
  txt: { media_type: 'text/plain', preview: 'text' },
  log: { media_type: 'text/plain', preview: 'text' },
  csv: { media_type: 'text/csv', preview: 'text' },
  tsv: { media_type: 'text/tab-separated-values', preview: 'text' },
  yaml: { media_type: 'text/plain', preview: 'text' },
  yml: { media_type: 'text/plain', preview: 'text' },
  py: { media_type: 'text/plain', preview: 'text' },
  png: { media_type: 'image/png', preview: 'image' },
  jpg: { media_type: 'image/jpeg', preview: 'image' },
  jpeg: { media_type: 'image/jpeg', preview: 'image' },
  svg: { media_type: 'image/svg+xml', preview: 'image' },
};

/** The media type and preview of a file, by its name's extension. */
export function mediaTypeOf(path: string): { media_type: string; preview: PreviewKind } {
  const extension = /\.([a-z0-9]+)$/i.exec(path)?.[1]?.toLowerCase() ?? '';
  return MEDIA_TYPES[extension] ?? { media_type: 'application/octet-stream', preview: 'none' };
}

export const RunFileSchema = z.object({
  path: z.string().describe('Relative to the project directory'),
  size: z.number().int().min(0),
  sha256: z.string().nullable().describe(`Hex SHA-256 of the whole file; null for a file over ${RESULT_FILE_CAPS.hashFileBytes} bytes`),
  media_type: z.string(),
  preview: z.enum(PREVIEW_KINDS).describe('How the file is previewed; none for a type that is not'),
});

export const RunFilesSchema = z.object({
  run_id: z.string(),
  project_dir: z.string(),
  files: z.array(RunFileSchema),
  truncated: z.boolean().describe('More files, or deeper ones, were left out (the bounds of a project\'s evidence)'),
  refused: z.array(z.object({ path: z.string(), reason: z.string() })).describe('Files not listed: a link, a hard link, not a regular file, an unsafe name'),
});

export const RunFileContentSchema = RunFileSchema.extend({
  encoding: z.enum(['utf8', 'base64']).describe('utf8 for text; base64 for an image'),
  content: z.string().nullable().describe('The preview: the text (cut at the cap), or the image\'s bytes; null when the file has no preview'),
  truncated: z.boolean().describe('The text was cut at the cap, or the image is too large to preview'),
});

export const RunFileQuerySchema = z.strictObject({
  path: z.string().min(1).max(1024).describe('A path the file list names'),
});

export type RunFile = z.infer<typeof RunFileSchema>;
export type RunFiles = z.infer<typeof RunFilesSchema>;
export type RunFileContent = z.infer<typeof RunFileContentSchema>;
