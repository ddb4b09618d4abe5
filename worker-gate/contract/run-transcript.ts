import { z } from 'zod';
import { RunIdSchema } from './run-id.ts';

/**
 * A run's transcript (docs/runs.md#following-a-run-live): what its agent said and did, as the gate saw it, in order.
 * The gate numbers the entries of a run from 1 and pushes them to the control plane, which keeps them with the run.
 * Every text is the agent's: untrusted, shown as text and never as markup or terminal control.
 */

export const TRANSCRIPT_KINDS = ['message', 'tool_call', 'tool_output', 'usage', 'lifecycle'] as const;
export type TranscriptKind = (typeof TRANSCRIPT_KINDS)[number];

export const TRANSCRIPT_CAPS = {
  /** Characters of one entry's text; a longer one is cut there and says how much was left out. */
  textChars: 4000,
  /** Entries of one run: the gate records one last entry saying the transcript was cut, and no more. */
  entriesPerRun: 5000,
  /** Entries in one push from a gate. */
  entriesPerPush: 200,
  /** Characters of a tool's name. */
  toolChars: 200,
} as const;

export const TranscriptEntrySchema = z.strictObject({
  seq: z.number().int().min(1).max(TRANSCRIPT_CAPS.entriesPerRun + 1).describe("The entry's number within its run, from 1, without gaps"),
  at: z.iso.datetime({ offset: true }).describe('When the gate saw it (or the simulated agent made it)'),
  kind: z.enum(TRANSCRIPT_KINDS).describe('message: what the agent said; tool_call: a command or tool it ran; tool_output: what that gave back; usage: its tokens spent so far; lifecycle: its session started, stopped, asked, ended'),
  tool: z.string().max(TRANSCRIPT_CAPS.toolChars).nullable().describe('The tool of a tool_call or tool_output (Bash, command_execution, …), else null'),
  text: z.string().max(TRANSCRIPT_CAPS.textChars + 100).describe("The agent's text, cut at 4,000 characters, with the gate's secrets replaced by [redacted]. Untrusted: show it as text"),
});
export type TranscriptEntry = z.output<typeof TranscriptEntrySchema>;

/** An entry before the gate numbers it. */
export type TranscriptDraft = Omit<TranscriptEntry, 'seq' | 'at'> & { at?: string };

/** What a gate pushes: new entries of one run, in order. */
export const TranscriptPushSchema = z.strictObject({
  run_id: RunIdSchema,
  entries: z.array(TranscriptEntrySchema).min(1).max(TRANSCRIPT_CAPS.entriesPerPush),
});
export type TranscriptPush = z.output<typeof TranscriptPushSchema>;

export const TranscriptPushAnswerSchema = z.strictObject({
  run_id: z.string(),
  stored_through: z.number().int().min(0).describe('The highest seq the control plane holds of the run: the gate sends only entries after it'),
});

/** What an agent may add to its `progress` event: entries of its own (the simulated agent's steps). */
export const AgentTranscriptDraftSchema = z.strictObject({
  kind: z.enum(['message', 'tool_call', 'tool_output']),
  tool: z.string().max(TRANSCRIPT_CAPS.toolChars).nullish().transform((v) => v ?? null),
  text: z.string().max(20_000),
});

/** `text` cut at the cap, saying how much was left out. */
export function capTranscriptText(text: string): string {
  if (text.length <= TRANSCRIPT_CAPS.textChars) return text;
  return `${text.slice(0, TRANSCRIPT_CAPS.textChars)}… [cut: ${text.length - TRANSCRIPT_CAPS.textChars} more characters]`;
}
