import pg from 'pg';

/**
 * How both engines turn column text into values, registered once for each, so every row comes back in the same form
 * whichever engine ran the query and no ledger module converts values itself:
 * - int8 (ids, counts) and numeric (scores, sums) as numbers: they fit comfortably in a double;
 * - timestamptz as an ISO-8601 string in UTC with milliseconds, the form the HTTP answers carry.
 */

const INT8_OID = 20;
const NUMERIC_OID = 1700;
const TIMESTAMPTZ_OID = 1184;

const parseTimestamptz = pg.types.getTypeParser(TIMESTAMPTZ_OID, 'text') as (text: string) => Date;

export const ROW_PARSERS: Readonly<Record<number, (text: string) => unknown>> = {
  [INT8_OID]: Number,
  [NUMERIC_OID]: Number,
  [TIMESTAMPTZ_OID]: (text) => parseTimestamptz(text).toISOString(),
};

/** A timestamptz rendered in SQL in the form ROW_PARSERS gives it, for values built into JSON (which skips them). */
export const isoTimestampSql = (column: string) =>
  `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
