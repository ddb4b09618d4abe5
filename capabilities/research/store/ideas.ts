import type { Queryable } from '../../../platform/store/store.ts';

/** The ideas ledger: what Research Facility promotion makes of an admitted candidate, at most one per candidate. */

export interface IdeaInsert {
  idea_id: string;
  candidate_id?: string | null;
  title: string;
  hypothesis?: string | null;
}

export interface IdeaRow {
  idea_id: string;
  candidate_id: string | null;
  title: string;
  hypothesis: string | null;
  created_at: string;
}

const IDEA_COLUMNS = 'idea_id, candidate_id, title, hypothesis, created_at';

/** Inserts an idea; a second idea for the same candidate fails (unique_violation, 23505). */
export async function insertIdea(tx: Queryable, idea: IdeaInsert): Promise<IdeaRow> {
  const result = await tx.query<IdeaRow>(
    `INSERT INTO ideas (idea_id, candidate_id, title, hypothesis) VALUES ($1, $2, $3, $4) RETURNING ${IDEA_COLUMNS}`,
    [idea.idea_id, idea.candidate_id ?? null, idea.title, idea.hypothesis ?? null],
  );
  return result.rows[0]!;
}

export async function getIdea(q: Queryable, ideaId: string): Promise<IdeaRow | undefined> {
  const result = await q.query<IdeaRow>(`SELECT ${IDEA_COLUMNS} FROM ideas WHERE idea_id = $1`, [ideaId]);
  return result.rows[0];
}

/** The idea a candidate was promoted into, if any (at most one per candidate). */
export async function getIdeaByCandidate(q: Queryable, candidateId: string): Promise<IdeaRow | undefined> {
  const result = await q.query<IdeaRow>(`SELECT ${IDEA_COLUMNS} FROM ideas WHERE candidate_id = $1`, [candidateId]);
  return result.rows[0];
}
