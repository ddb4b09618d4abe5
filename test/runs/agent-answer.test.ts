import { describe, expect, it } from 'vitest';
import { answerProblem, permissionEffect, permissionRule, resumeFor } from '../../capabilities/runs/domain/agent-answer.ts';
import type { AgentQuestion } from '../../worker-gate/contract/agent-question.ts';

/** What an operator's answer becomes for the agent's resumed session (docs/runs.md#answering-the-agent). */

const question: AgentQuestion = {
  kind: 'question',
  questions: [{ header: 'Dataset', question: 'Which dataset should I use?', options: [{ label: 'CIFAR-10', description: null }, { label: 'ImageNet-1k', description: 'bigger' }] }],
};
const permission: AgentQuestion = { kind: 'permission', tool_name: 'Bash', tool_input: { command: 'pytest -q', description: 'run the tests' } };

describe('an answer to the agent', () => {
  it('fits its question: a choice among the options or words for a question, a decision for a permission request', () => {
    expect(answerProblem(question, { kind: 'choice', choice: 'CIFAR-10' })).toBeNull();
    expect(answerProblem(question, { kind: 'text', text: 'the test split' })).toBeNull();
    expect(answerProblem(question, { kind: 'choice', choice: 'MNIST' })).toBe('choice must be one of the question\'s options: "CIFAR-10", "ImageNet-1k"');
    expect(answerProblem(question, { kind: 'permission', decision: 'allow_once' })).toMatch(/^the agent asks a question, not for a permission/);
    expect(answerProblem(permission, { kind: 'permission', decision: 'deny' })).toBeNull();
    expect(answerProblem(permission, { kind: 'text', text: 'yes' })).toMatch(/^the agent asks for a permission \(Bash\)/);
    // A question the agent's tool gave no detail of takes words only.
    expect(answerProblem(null, { kind: 'text', text: 'yes' })).toBeNull();
    expect(answerProblem(null, { kind: 'choice', choice: 'Yes' })).toBe('the question offers no choices: answer with answer (text)');
  });

  it('resumes the session with the question and the answer, and allows no tool', () => {
    const resume = resumeFor('Which dataset should I use?', question, { kind: 'choice', choice: 'CIFAR-10', note: 'use its test split' });
    expect(resume.allowed_tools).toEqual([]);
    expect(resume.prompt).toContain('Your question: Which dataset should I use?');
    expect(resume.prompt).toContain('Answer: CIFAR-10\n\nThe operator adds: use its test split');
  });

  it('allows the exact call once, the tool for the rest of the run, or neither, saying what allowing does', () => {
    expect(permissionEffect('Bash', { command: 'pytest -q' })).toBe("runs the shell command `pytest -q` in the run's project, as the agent's user in its sandbox");
    expect(permissionEffect('Write', { file_path: 'results/a.json' })).toBe('writes the file results/a.json');
    expect(permissionEffect('Mystery', { x: 1 })).toBe('calls Mystery with {"x":1}');

    expect(resumeFor(null, permission, { kind: 'permission', decision: 'allow_once' }).allowed_tools).toEqual([{ rule: 'Bash(pytest -q)', scope: 'once' }]);
    expect(resumeFor(null, permission, { kind: 'permission', decision: 'allow_for_run' }).allowed_tools).toEqual([{ rule: 'Bash', scope: 'run' }]);
    const denied = resumeFor(null, permission, { kind: 'permission', decision: 'deny', note: 'no network here' });
    expect(denied.allowed_tools).toEqual([]);
    expect(denied.prompt).toMatch(/^The operator denied your call of Bash \(it runs the shell command `pytest -q`.*Do not try it again.*The operator adds: no network here$/s);
    // A command a rule cannot hold (a newline) is allowed by its tool's name alone.
    expect(permissionRule('Bash', { command: 'echo a\necho b' }, 'allow_once')).toBe('Bash');
  });
});
