import type { operations } from 'research-control-plane/client';

/** The agent's waiting question as an operator reads it in a terminal, and the answer `rcp runs answer` sends. */

type RunDetail = operations['getRun']['responses'][200]['content']['application/json'];
type AnswerBody = NonNullable<operations['answerRun']['requestBody']>['content']['application/json'];

/** The run's question with its choices, or the tool call it asks permission for and what allowing it would do. */
export function questionText(detail: RunDetail): string {
  const { run } = detail;
  if (run.state !== 'question_pending') return `${run.run_id} is ${run.state}: its agent waits on no question`;
  const lines = [`${run.run_id} waits on the operator:`];
  const asked = run.question_detail;
  if (asked?.kind === 'permission') {
    lines.push(`  permission for ${asked.tool_name}: ${detail.permission_effect ?? JSON.stringify(asked.tool_input)}`);
    lines.push(`  answer with: rcp runs answer ${run.run_id} --allow-once | --allow-for-run | --deny [--note <text>]`);
    return lines.join('\n');
  }
  if (asked?.kind === 'question') {
    for (const question of asked.questions) {
      lines.push(`  ${question.header ? `${question.header}: ` : ''}${question.question}`);
      for (const option of question.options) lines.push(`    - ${option.label}${option.description ? ` (${option.description})` : ''}`);
    }
  } else {
    lines.push(`  ${run.question ?? '(the agent gave no text)'}`);
  }
  lines.push(`  answer with: rcp runs answer ${run.run_id} --text <answer>${asked?.kind === 'question' ? ' | --choice <label>' : ''}`);
  return lines.join('\n');
}

export interface AnswerOptions {
  text?: string;
  choice?: string;
  allowOnce?: boolean;
  allowForRun?: boolean;
  deny?: boolean;
  note?: string;
}

/** The answer fields of the body, or the usage problem: exactly one kind of answer. */
export function answerFields(options: AnswerOptions): Pick<AnswerBody, 'answer' | 'choice' | 'permission' | 'note'> | string {
  const permissions = ([['allowOnce', 'allow_once'], ['allowForRun', 'allow_for_run'], ['deny', 'deny']] as const).filter(([flag]) => options[flag]);
  const kinds = (options.text !== undefined ? 1 : 0) + (options.choice !== undefined ? 1 : 0) + permissions.length;
  if (kinds !== 1) return 'give exactly one of --text, --choice, --allow-once, --allow-for-run or --deny';
  if (options.text !== undefined) return options.note === undefined ? { answer: options.text } : 'put everything in --text; --note goes with --choice or a permission decision';
  const note = options.note === undefined ? {} : { note: options.note };
  if (options.choice !== undefined) return { choice: options.choice, ...note };
  return { permission: permissions[0]![1], ...note };
}
