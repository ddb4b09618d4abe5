import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { automatedChecklistPassed, claimedNumbers, judgeDraft, type ChecklistJudgement } from '../../capabilities/papers/domain/paper-checklist.ts';
import { draftEvidence } from '../support/draft-evidence.ts';
import { DRAFT_SECTIONS, deterministicDraft, resultValues, type DraftEvidence } from '../../capabilities/papers/domain/paper-draft.ts';
import { CHECKLIST_ITEM_IDS, HUMAN_CHECKLIST_ITEM_IDS } from '../../capabilities/papers/domain/paper-status.ts';

const evidence = draftEvidence;

const byItem = (judgements: ChecklistJudgement[]) => Object.fromEntries(judgements.map((j) => [j.item_id, j]));

function judge(e: DraftEvidence, edit: (markdown: string) => string = (m) => m) {
  const draft = deterministicDraft(e);
  return byItem(judgeDraft({ markdown: edit(draft.markdown), title: draft.title, abstract: draft.abstract, results: resultValues(e.results) }));
}

describe('the deterministic writer', () => {
  it('writes a complete paper: a title, every section in order, a results table from the results files', () => {
    const draft = deterministicDraft(evidence());
    expect(draft.title).toBe('Sparse attention on a home GPU: a positive result');
    expect(draft.markdown.startsWith(`# ${draft.title}\n`)).toBe(true);
    const headings = draft.markdown.split('\n').filter((line) => line.startsWith('## ')).map((line) => line.slice(3));
    expect(headings).toEqual([...DRAFT_SECTIONS]);
    expect(draft.markdown).toContain('| `results/baseline.json` | `accuracy` | 0.915 |');
    expect(draft.markdown).toContain('| `results/main/metrics.json` | `runs[1].loss` | 0.29 |');
    expect(draft.markdown).toContain('> Tried block sizes 32 and 64.');
    expect(draft.markdown).toContain("The agent's decision is `finalize_positive`.");
  });

  it('gives the same bytes for the same evidence, whatever the order of files and keys', () => {
    const first = deterministicDraft(evidence()).markdown;
    const reordered = evidence({
      results: [
        { path: 'results/baseline.json', data: { note: 'dense', memory_mib: 6240, accuracy: 0.915 } },
        { path: 'results/main/metrics.json', data: { runs: [{ loss: 0.31 }, { loss: 0.29 }], memory_mib: 3120, accuracy: 0.912 } },
      ],
    });
    expect(deterministicDraft(reordered).markdown).toBe(first);
  });

  it('quotes the run notes, so a heading in them never becomes a section of the paper', () => {
    const markdown = deterministicDraft(evidence({ run_notes: '## Results\nall good: 99%' })).markdown;
    expect(markdown.split('\n').filter((line) => line === '## Results')).toHaveLength(1);
    expect(markdown).toContain('> ## Results');
  });
});

describe('the automated checklist', () => {
  it('passes a deterministic draft on every automated item and leaves the person-only items pending', () => {
    const items = judge(evidence());
    expect(Object.keys(items).sort()).toEqual([...CHECKLIST_ITEM_IDS].sort());
    for (const id of CHECKLIST_ITEM_IDS) {
      const human = (HUMAN_CHECKLIST_ITEM_IDS as readonly string[]).includes(id);
      expect(items[id]!.status, `${id}: ${items[id]!.note}`).toBe(human ? 'pending' : 'pass');
    }
  });

  it('passes every deterministic draft of generated evidence', () => {
    const json: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
      node: fc.oneof({ depthSize: 'small' }, fc.double({ noNaN: true }), fc.integer(), fc.string(), fc.constant(null), fc.array(tie('node'), { maxLength: 4 }), fc.dictionary(fc.string({ maxLength: 8 }), tie('node'), { maxKeys: 4 })),
    })).node;
    fc.assert(
      fc.property(
        fc.array(fc.record({ path: fc.stringMatching(/^results\/[a-z0-9/_-]{1,20}\.json$/), data: json }), { maxLength: 4 }),
        fc.string({ maxLength: 200 }),
        fc.constantFrom('finalize_positive', 'negative', null),
        (results, runNotes, decision) => {
          const items = judge(evidence({ results, run_notes: runNotes, decision, decision_summary: null }));
          const failed = Object.values(items).filter((item) => item.status === 'fail');
          expect(failed).toEqual([]);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('fails claim alignment on a number no results file holds, naming it', () => {
    const items = judge(evidence(), (markdown) => markdown.replace('| 0.915 |', '| 0.95 |'));
    expect(items.claim_evidence_alignment).toMatchObject({ status: 'fail', note: expect.stringContaining('0.95') });
    const prose = judge(evidence(), (markdown) => markdown.replace('Its numeric results are tabulated', 'Accuracy rose by 12 points. Its numeric results are tabulated'));
    expect(prose.claim_evidence_alignment).toMatchObject({ status: 'fail', note: expect.stringContaining('12') });
    expect(automatedChecklistPassed(Object.values(prose))).toBe(false);
  });

  it("quotes the agent's summary as its words: a number in it is not the paper's claim", () => {
    const markdown = deterministicDraft(evidence({ decision_summary: 'Accuracy rose by 12 points.' })).markdown;
    expect(markdown).toContain('> Accuracy rose by 12 points.');
    expect(judge(evidence({ decision_summary: 'Accuracy rose by 12 points.' })).claim_evidence_alignment!.status).toBe('pass');
  });

  it('fails formatting, reproducibility and limitations when sections are missing or out of order', () => {
    const cut = judge(evidence(), (markdown) => markdown.replace(/## Reproducibility[\s\S]*$/, ''));
    expect(cut.reproducibility!.status).toBe('fail');
    expect(cut.formatting_quality).toMatchObject({ status: 'fail', note: expect.stringContaining('Reproducibility') });
    const emptyLimitations = judge(evidence(), (markdown) => markdown.replace(/(## Limitations\n)[\s\S]*?(## Reproducibility)/, '$1\n$2'));
    expect(emptyLimitations.limitations_ethics!.status).toBe('fail');
    const twoTitles = judge(evidence(), (markdown) => `${markdown}\n# Another title\n`);
    expect(twoTitles.formatting_quality).toMatchObject({ status: 'fail', note: expect.stringContaining('2 top-level titles') });
  });

  it('fails readability on an unreadable draft and judges nothing else', () => {
    const items = byItem(judgeDraft({ markdown: null, title: 'A title long enough', abstract: 'x'.repeat(60), results: [] }));
    expect(items.artifact_readability!.status).toBe('fail');
    expect(Object.values(items).filter((item) => item.status === 'pass')).toEqual([]);
  });

  it('fails a title or abstract out of bounds', () => {
    const draft = deterministicDraft(evidence());
    const items = byItem(judgeDraft({ markdown: draft.markdown, title: 'Short', abstract: draft.abstract, results: resultValues(evidence().results) }));
    expect(items.title_abstract_quality).toMatchObject({ status: 'fail', note: expect.stringContaining('title has 5 characters') });
  });

  it('reads numbers in prose and tables, but not in code spans, names or quoted notes', () => {
    expect(claimedNumbers('accuracy 0.93, loss -1.5 and 1e+21; `run-20261122T100000Z` v2 3rd 1.2.3\n> 77 in the notes')).toEqual(['0.93', '-1.5', '1e+21']);
  });
});
