/**
 * The model's rate or usage limit as the agent tools word it (docs/worker-gate.md#waiting-out-a-usage-limit): a run whose
 * session ended on one waits until the limit resets and resumes the same session. Neither tool passes the model's
 * headers on, so the reset time is read from its words where it gives one. Pure.
 */

/** A usage limit a run waits out. */
export interface UsageLimitWait {
  /** When the limit resets, as the tool said; null when it said nothing readable. */
  resets_at: string | null;
  /** When the run's session resumes by itself. */
  resumes_at: string;
  /**
   * Whether the run keeps its slot (its lane, GPUs and CPUs) while it waits; false for a wait longer than the gate's
   * usage_limit_hold_sec, whose slot other runs may take meanwhile. Absent from older records: it keeps it.
   */
  holds_slot?: boolean;
}

/** The prefix of a usage limit's resume ids: `limit-1`, `limit-2`, … */
export const LIMIT_RESUME_PREFIX = 'limit-';

/** The prompt a session resumes with once its usage limit has reset. */
export const USAGE_LIMIT_RESUME_PROMPT =
  "The model's usage limit that stopped your session has reset. Continue the task where you stopped; the run is still judged on the files its prompt asks for.";

/** The furthest reset a run waits for: the longest limit window the tools know is a week. */
export const USAGE_LIMIT_MAX_WAIT_SEC = 7 * 24 * 3600;

/**
 * Words that say the model refused for a limit, not for a fault: Codex's "You've hit your usage limit", "exceeded retry
 * limit, last status: 429 Too Many Requests"; Claude Code's "API Error: Request rejected (429)", "rate_limit_error",
 * "Claude AI usage limit reached|<epoch>", "5-hour limit reached ∙ resets 3pm".
 */
const LIMIT_WORDS = [
  /usage limit/i,
  /rate.?limit(?:ed|_error| exceeded| reached)/i,
  /\(429\)|status:? 429\b/i,
  /too many requests/i,
  /\b(?:5-hour|weekly|daily|session) limit\b/i,
  /you(?:'|’)ve hit your limit/i,
];

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];

/** Whether a tool's error text says the model refused for a rate or usage limit. */
export const isUsageLimit = (text: string | null | undefined): boolean => !!text && LIMIT_WORDS.some((pattern) => pattern.test(text));

/** Hours of a 12-hour clock reading (`3pm`, `4:44 AM`) on a 24-hour clock. */
function hours24(hour: number, meridiem: string | undefined): number {
  if (!meridiem) return hour;
  const pm = meridiem.toLowerCase().startsWith('p');
  return (hour % 12) + (pm ? 12 : 0);
}

/**
 * A clock time the tool wrote, as the next such moment from `now` in the tool's time zone (this process's, or UTC
 * where the text says so). A time just past, within the minute the tool rounded to, is the reset that is now.
 */
function nextClockTime(now: Date, hour: number, minute: number, utc: boolean): Date {
  const at = new Date(now);
  if (utc) at.setUTCHours(hour, minute, 0, 0);
  else at.setHours(hour, minute, 0, 0);
  if (at.getTime() < now.getTime() - 60_000) at.setTime(at.getTime() + 24 * 3600_000);
  return at;
}

/** "in 4 days 3 hours", "in 12 minutes", "in 30s": the sum of the units named. */
function relativeSeconds(text: string): number | null {
  const phrase = /\b(?:try again|resets?|available again)\s+in\s+((?:\d+\s*(?:days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b[\s,]*(?:and\s+)?)+)/i.exec(text);
  if (!phrase) return null;
  let seconds = 0;
  for (const [, amount, unit] of phrase[1]!.matchAll(/(\d+)\s*([a-z]+)/gi)) {
    const u = unit!.toLowerCase();
    const factor = u.startsWith('d') ? 86_400 : u.startsWith('h') ? 3_600 : u.startsWith('m') ? 60 : 1;
    seconds += Number(amount) * factor;
  }
  return seconds;
}

/**
 * When the limit resets, as the tool's text says it; null when it says nothing the gate can read. Read, in order: an
 * epoch after a bar (`usage limit reached|1760000000`), a relative wait (`try again in 2 hours`), a dated time (`try
 * again at Sep 29th, 2026 12:55 AM`), a clock time (`Try again at 4:44 AM`, `resets 3pm (UTC)`).
 */
export function usageLimitResetOf(text: string, now: Date): Date | null {
  const epoch = /limit reached\|(\d{10,13})\b/i.exec(text);
  if (epoch) {
    const value = Number(epoch[1]);
    return new Date(value < 1e12 ? value * 1000 : value);
  }
  const relative = relativeSeconds(text);
  if (relative !== null) return new Date(now.getTime() + relative * 1000);
  const dated = /\b(?:try again|resets?)\s+(?:at|on)?\s*([A-Za-z]{3})[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4}),?\s+(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)?/i.exec(text);
  if (dated) {
    const month = MONTHS.indexOf(dated[1]!.toLowerCase());
    if (month >= 0) return new Date(Number(dated[3]), month, Number(dated[2]), hours24(Number(dated[4]), dated[6]), Number(dated[5] ?? 0));
  }
  const clock = /\b(?:try again|resets?)\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)?(?:\s*\((UTC)\))?/i.exec(text);
  if (clock && (clock[2] !== undefined || clock[3] !== undefined)) {
    const hour = hours24(Number(clock[1]), clock[3]);
    if (hour < 24 && Number(clock[2] ?? 0) < 60) return nextClockTime(now, hour, Number(clock[2] ?? 0), clock[4] !== undefined);
  }
  return null;
}
