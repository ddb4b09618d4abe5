import { z } from 'zod';
import { withinJsonBounds } from '../../platform/http/json-bounds.ts';
import { jsonObject } from '../../platform/http/json-value.ts';

/**
 * What an agent asks a person (docs/runs.md#answering-the-agent), as its hook saw it: a question with its choices
 * (Codex's `request_user_input`), or a permission request for one tool call (Claude Code in `-p` mode, which has no
 * question tool). Bounded in every field: the agent writes it, so it is untrusted text.
 */

export const QUESTION_TEXT_MAX = 4_000;
export const QUESTION_LABEL_MAX = 200;
export const QUESTION_MAX_QUESTIONS = 5;
export const QUESTION_MAX_OPTIONS = 10;
/** The most a permission request's tool arguments may take, as JSON. */
export const TOOL_INPUT_MAX_BYTES = 8 * 1024;

const text = (max: number) => z.string().max(max);

export const QuestionOptionSchema = z.strictObject({
  label: text(QUESTION_LABEL_MAX),
  description: text(QUESTION_TEXT_MAX).nullable(),
});

export const AskedQuestionSchema = z.strictObject({
  header: text(QUESTION_LABEL_MAX).nullable(),
  question: text(QUESTION_TEXT_MAX),
  options: z.array(QuestionOptionSchema).max(QUESTION_MAX_OPTIONS),
});

/** The question schema with `toolInput` for a permission request's arguments. */
const agentQuestion = <T extends z.ZodType<Record<string, unknown>>>(toolInput: T) =>
  z
    .discriminatedUnion('kind', [
      z.strictObject({
        kind: z.literal('question'),
        questions: z.array(AskedQuestionSchema).min(1).max(QUESTION_MAX_QUESTIONS),
      }),
      z.strictObject({
        kind: z.literal('permission'),
        tool_name: text(QUESTION_LABEL_MAX).min(1),
        tool_input: withinJsonBounds(toolInput, 'tool_input', { maxBytes: TOOL_INPUT_MAX_BYTES, maxDepth: 32 }).describe('The arguments of the tool call, as the tool gave them'),
      }),
    ])
    .describe("The agent's question with its choices, or the tool call it asks permission for");

/** In answers: the arguments are JSON values, typed as such in the published document. */
export const AgentQuestionSchema = agentQuestion(jsonObject());
/** In request bodies (a hook's event, a gate's callback): the same, its arguments bounded JSON read as sent. */
export const AgentQuestionInputSchema = agentQuestion(z.record(z.string(), z.unknown()));
export type AgentQuestion = z.infer<typeof AgentQuestionSchema>;

/** How an operator answers a permission request (docs/runs.md#answering-the-agent). */
export const PERMISSION_DECISIONS = ['allow_once', 'allow_for_run', 'deny'] as const;
export type PermissionDecision = (typeof PERMISSION_DECISIONS)[number];

/** A tool the resumed session may use without asking: a rule in Claude Code's `--allowedTools` form, e.g. `Bash(npm test)`. */
export const TOOL_RULE_MAX = 1_000;
export const ToolRuleSchema = z
  .string()
  .min(1)
  .max(TOOL_RULE_MAX)
  .regex(/^[A-Za-z][A-Za-z0-9_.:-]{0,199}(\([^\n\r\0]*\))?$/, 'must be a tool name, optionally with its argument pattern in parentheses, e.g. Bash(npm test)');

/** Where a tool rule holds: the next session only, or every later session of the run. */
export const AllowedToolSchema = z.strictObject({
  rule: ToolRuleSchema,
  scope: z.enum(['once', 'run']),
});
export type AllowedTool = z.infer<typeof AllowedToolSchema>;

/** The longest prompt a resume may carry. */
export const RESUME_PROMPT_MAX = 64 * 1024;
