/** Collects positional parameters for a query built from optional parts: `bind(value)` returns its `$n`. */
export interface SqlParams {
  readonly params: unknown[];
  bind(value: unknown): string;
}

export function sqlParams(): SqlParams {
  const params: unknown[] = [];
  return {
    params,
    bind(value) {
      params.push(value);
      return `$${params.length}`;
    },
  };
}

/** A LIKE/ILIKE pattern that matches `text` literally anywhere (`%` and `_` lose their meaning). */
export function containsPattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (char) => `\\${char}`)}%`;
}
