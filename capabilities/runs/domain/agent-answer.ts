import type { AgentQuestion, AllowedTool, PermissionDecision } from '../../../worker-gate/contract/agent-question.ts';

/**
 * An operator's answer to the agent (docs/runs.md#answering-the-agent) and what it becomes: the prompt its resumed
 * session starts with, and the tools that session may use without asking. Pure.
 */

export type AgentAnswer =
  | { kind: 'text'; text: string }
  | { kind: 'choice'; choice: string; note?: string | undefined }
  | { kind: 'permission'; decision: PermissionDecision; note?: string | undefined };

export interface AnswerResume {
  prompt: string;
  allowed_tools: AllowedTool[];
}

/** The longest a tool call's arguments are quoted in a prompt or an effect. */
const QUOTED_MAX = 2_000;

const quoted = (text: string) => (text.length > QUOTED_MAX ? `${text.slice(0, QUOTED_MAX)}…` : text);

function stringArg(input: Record<string, unknown>, name: string): string | null {
  const value = input[name];
  return typeof value === 'string' && value.length > 0 ? value : null;
}

/** What allowing a tool call would do, in words, for the operator deciding it. */
export function permissionEffect(toolName: string, toolInput: Record<string, unknown>): string {
  const command = stringArg(toolInput, 'command');
  const path = stringArg(toolInput, 'file_path') ?? stringArg(toolInput, 'path') ?? stringArg(toolInput, 'notebook_path');
  const url = stringArg(toolInput, 'url');
  if (toolName === 'Bash' && command) return `runs the shell command \`${quoted(command)}\` in the run's project, as the agent's user in its sandbox`;
  if (['Write', 'Edit', 'MultiEdit', 'NotebookEdit'].includes(toolName) && path) return `writes the file ${quoted(path)}`;
  if (toolName === 'WebFetch' && url) return `fetches ${quoted(url)}`;
  return `calls ${toolName} with ${quoted(JSON.stringify(toolInput))}`;
}

/**
 * The rule that lets the resumed session make exactly this call (Claude Code's `--allowedTools` form), or, for the
 * rest of the run, every call of the tool.
 */
export function permissionRule(toolName: string, toolInput: Record<string, unknown>, decision: PermissionDecision): string {
  if (decision === 'allow_for_run') return toolName;
  const command = stringArg(toolInput, 'command');
  const path = stringArg(toolInput, 'file_path');
  const argument = toolName === 'Bash' ? command : path;
  // A rule's pattern cannot hold a newline or a closing parenthesis at its end: such a call is allowed by its tool's name.
  if (argument && !/[\n\r\0]/.test(argument) && argument.length <= 900) return `${toolName}(${argument})`;
  return toolName;
}

/** Why the answer does not fit the question (a 422), or null when it does. */
export function answerProblem(question: AgentQuestion | null, answer: AgentAnswer): string | null {
  if (question?.kind === 'permission') {
    return answer.kind === 'permission' ? null : `the agent asks for a permission (${question.tool_name}): answer with permission allow_once, allow_for_run or deny`;
  }
  if (answer.kind === 'permission') return 'the agent asks a question, not for a permission: answer with answer (text) or choice';
  if (answer.kind === 'choice') {
    const labels = (question?.questions ?? []).flatMap((asked) => asked.options.map((option) => option.label));
    if (labels.length === 0) return 'the question offers no choices: answer with answer (text)';
    if (!labels.includes(answer.choice)) return `choice must be one of the question's options: ${labels.map((label) => JSON.stringify(label)).join(', ')}`;
  }
  return null;
}

/** The prompt and tools the agent's session resumes with. `questionText` is the question as the run recorded it. */
export function resumeFor(questionText: string | null, question: AgentQuestion | null, answer: AgentAnswer): AnswerResume {
  const note = (text: string | undefined) => (text ? `\n\nThe operator adds: ${text}` : '');
  if (answer.kind === 'permission' && question?.kind === 'permission') {
    const effect = permissionEffect(question.tool_name, question.tool_input);
    if (answer.decision === 'deny') {
      return {
        prompt: `The operator denied your call of ${question.tool_name} (it ${effect}). Do not try it again; go on with the run without it.${note(answer.note)}`,
        allowed_tools: [],
      };
    }
    const scope = answer.decision === 'allow_once' ? 'once' : 'run';
    const allowedFor = scope === 'once' ? 'this call' : `every call of ${question.tool_name} for the rest of the run`;
    return {
      prompt: `The operator allowed ${allowedFor}: ${question.tool_name}, which ${effect}. Make the call again now; it will be permitted. Then go on with the run.${note(answer.note)}`,
      allowed_tools: [{ rule: permissionRule(question.tool_name, question.tool_input, answer.decision), scope }],
    };
  }
  const asked = questionText ?? (question?.kind === 'question' ? question.questions.map((q) => q.question).join('\n') : null);
  const given = answer.kind === 'choice' ? `${answer.choice}${note(answer.note)}` : answer.kind === 'text' ? answer.text : '';
  return {
    prompt: `The operator answered your question.\n\nYour question: ${quoted(asked ?? '(not recorded)')}\n\nAnswer: ${given}\n\nGo on with the run using this answer.`,
    allowed_tools: [],
  };
}
