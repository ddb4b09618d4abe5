import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Locator, type Page } from 'playwright-core';
import { expect } from 'vitest';

/**
 * Debian's Chromium driven by playwright-core, for the dashboard's browser tests. Never a browser that a test tool
 * downloads: `scripts/ensure-chromium.sh` (run by `npm test`) installs the distribution's package.
 */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/** Where the tests leave a screenshot of every panel, for a person to look at (git ignores it). */
export const SCREENSHOT_DIR = fileURLToPath(new URL('../artifacts/screenshots/', import.meta.url));

// Without the background-networking flags Chromium keeps dialling Google's hosts, which an offline machine refuses.
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run'];

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`Chromium was not found at ${CHROMIUM_PATH}. Run "bash scripts/ensure-chromium.sh" (npm test does it for you), or set CHROMIUM_PATH to a Chromium binary.`);
  }
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS });
}

export interface ApiCall {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string | null;
}

/** A dashboard tab that keeps what the browser complained about and every API call the page made. */
export interface DashboardTab {
  page: Page;
  /** Console errors and warnings, uncaught page errors and CSP reports, as the browser wrote them. */
  problems: string[];
  calls: ApiCall[];
  /** Goes to a dashboard route (`#/queue`) and waits for its panel heading. */
  open(route: string): Promise<void>;
  /** Waits until no API call has been on its way for a moment: the panel has drawn what it read. */
  settled(): Promise<void>;
  signIn(token: string): Promise<void>;
  /** The card whose heading is `title`. */
  card(title: string): Locator;
  /** Saves a full-page screenshot as `<name>.png` under SCREENSHOT_DIR. */
  screenshot(name: string): Promise<void>;
  close(): Promise<void>;
}

export interface TabOptions {
  viewport?: { width: number; height: number };
  /** Only for injecting axe-core, whose checks use HTML sinks the dashboard's Trusted Types policy forbids. */
  bypassCSP?: boolean;
}

export async function openDashboard(browser: Browser, baseUrl: string, options: TabOptions = {}): Promise<DashboardTab> {
  const context = await browser.newContext({ viewport: options.viewport ?? { width: 1280, height: 900 }, bypassCSP: options.bypassCSP ?? false });
  const page = await context.newPage();
  const problems: string[] = [];
  const calls: ApiCall[] = [];
  let inFlight = 0;
  let lastChange = Date.now();
  const changed = (delta: number) => {
    inFlight += delta;
    lastChange = Date.now();
  };
  // A run page's transcript stream stays open while the page shows it: it is not a request the page waits on.
  const counted = (request: { url(): string }) => !request.url().includes('/transcript/stream');
  page.on('request', (request) => counted(request) && changed(1));
  page.on('requestfinished', (request) => counted(request) && changed(-1));
  page.on('requestfailed', (request) => counted(request) && changed(-1));
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') problems.push(`${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (url.pathname.startsWith('/control/') && !url.pathname.startsWith('/control/dashboard-v2')) {
      calls.push({ method: request.method(), path: `${url.pathname}${url.search}`, headers: request.headers(), body: request.postData() });
    }
  });
  const shell = `${baseUrl}/control/dashboard-v2`;
  const tab: DashboardTab = {
    page,
    problems,
    calls,
    async open(route) {
      await page.goto(`${shell}${route}`);
      await page.locator('main .panel > h2').first().waitFor();
    },
    async settled() {
      await expect.poll(() => inFlight === 0 && Date.now() - lastChange >= 300, { timeout: 15_000, interval: 100 }).toBe(true);
    },
    async signIn(token) {
      await page.goto(shell);
      await page.getByLabel('Control API token').fill(token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.locator('nav a[aria-current="page"]').waitFor();
    },
    card: (title) => page.locator('section.card', { has: page.getByRole('heading', { name: title, exact: true }) }),
    async screenshot(name) {
      await mkdir(SCREENSHOT_DIR, { recursive: true });
      // The screenshot is for a person to look at, not an assertion: a machine too loaded to draw one in time
      // (Chromium once took over 30 s on two busy cores) says so and the test goes on.
      try {
        await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true, timeout: 20_000 });
      } catch (error) {
        if (!(error instanceof Error && error.name === 'TimeoutError')) throw error;
        process.stderr.write(`screenshot ${name}.png was not taken: ${error.message.split('\n')[0]}\n`);
      }
    },
    close: () => context.close(),
  };
  return tab;
}

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core's serious and critical findings on what the page shows now (WCAG 2.1 A and AA rules). */
export async function seriousAccessibilityViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(AXE_SOURCE);
  // Page code as text: this project type-checks against Node's globals, not the DOM's.
  const violations = await page.evaluate<AxeViolation[]>(`(async () => {
    const result = await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
    return result.violations.map(({ id, impact, help, nodes }) => ({ id, impact: impact ?? null, help, nodes: nodes.map((node) => ({ target: node.target })) }));
  })()`);
  return violations.filter((violation) => violation.impact === 'serious' || violation.impact === 'critical');
}

/** What the dashboard keeps in the browser: web storage, cookies a script can read, and IndexedDB databases. */
export async function browserState(page: Page) {
  return page.evaluate<{ localStorage: number; sessionStorage: number; scriptCookies: string; indexedDb: number }>(`(async () => ({
    localStorage: localStorage.length,
    sessionStorage: sessionStorage.length,
    scriptCookies: document.cookie,
    indexedDb: (await indexedDB.databases()).length,
  }))()`);
}

/** Runs `code` (a JavaScript statement or expression, as text) in the page. */
export const inPage = <T = unknown>(page: Page, code: string): Promise<T> => page.evaluate<T>(code);

/** The texts of one column of a table, by its header. */
export async function columnTexts(table: Locator, header: string): Promise<string[]> {
  const headers = await table.locator('thead th').allInnerTexts();
  const index = headers.findIndex((text) => text.trim() === header);
  expect(index, `column ${header} in ${headers.join(', ')}`).toBeGreaterThanOrEqual(0);
  return (await table.locator(`tbody tr td:nth-child(${index + 1})`).allInnerTexts()).map((text) => text.trim());
}
