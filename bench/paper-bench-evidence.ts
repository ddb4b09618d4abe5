/** The paper bench's evidence (bench/papers.ts): a realistic set of a project's evidence files, written to disk. */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/** A realistic evidence set: a few KB of notes, a decision file, and three results files holding 50 numbers. */
function evidenceFiles(projectName: string): { notes: string; decision: unknown; results: { path: string; data: unknown }[] } {
  const notes = [
    `# ${projectName}`,
    '',
    '## Goal',
    '',
    'Test whether block-sparse attention with a learned router keeps quality at 4k context while cutting attention FLOPs',
    'by half, on a 124M-parameter decoder trained from scratch on the same token budget as the dense baseline.',
    '',
    '## Setup',
    '',
    ...Array.from({ length: 12 }, (_, i) =>
      `- Step ${i + 1}: trained for 2000 steps at lr 3e-4 with warmup 200, batch 64, seq 4096; router temperature ${(0.5 + i * 0.1).toFixed(1)}; evaluated on the held-out split every 250 steps and logged to results/.`,
    ),
    '',
    '## Observations',
    '',
    ...Array.from({ length: 10 }, (_, i) =>
      `Run ${i + 1} converged smoothly; validation loss tracked the dense baseline within noise after step ${800 + i * 50}, and throughput stayed between ${1.7 + i * 0.02} and ${1.9 + i * 0.02} times the dense model. No divergence, no NaNs; gradient norms stayed under 1.0 after warmup.`,
    ),
    '',
    '## Next',
    '',
    'Repeat at 350M parameters and 8k context; compare against a fixed local-window baseline with the same FLOPs.',
    '',
  ].join('\n');
  const main = {
    model: { params_m: 124, layers: 12, heads: 12, context: 4096 },
    dense: { val_loss: 3.2871, val_ppl: 26.77, tokens_per_s: 41230.5, attn_gflops: 18.4, peak_mem_gb: 21.3, wall_h: 3.92 },
    sparse: { val_loss: 3.2914, val_ppl: 26.88, tokens_per_s: 74112.25, attn_gflops: 9.1, peak_mem_gb: 14.85, wall_h: 2.21 },
    delta: { val_loss: 0.0043, speedup: 1.7975, flops_ratio: 0.4946, mem_ratio: 0.6972 },
    steps: 2000,
    seed: 17,
  };
  const ablation = {
    router_temperature: [0.5, 0.7, 0.9, 1.1, 1.3].map((t, i) => ({ t, val_loss: 3.301 - i * 0.0031, density: 0.41 + i * 0.02 })),
    block_size: { b32: 3.2931, b64: 3.2914, b128: 3.2968 },
  };
  const seeds = { seeds: [11, 17, 23, 42, 99].map((seed, i) => ({ seed, val_loss: 3.289 + i * 0.0011 })) };
  return {
    notes,
    decision: { decision: 'finalize_positive', summary: 'Block-sparse attention matched dense quality within 0.13% loss at 1.8x throughput.' },
    results: [
      { path: 'results/main/metrics.json', data: main },
      { path: 'results/ablation/router.json', data: ablation },
      { path: 'results/seeds/runs.json', data: seeds },
    ],
  };
}

/** Writes a project's evidence under projectRoot: all of it, or only its notes (a project missing evidence). */
export async function writeProjectFiles(projectRoot: string, projectDir: string, projectName: string, which: 'complete' | 'notes_only'): Promise<void> {
  const files = evidenceFiles(projectName);
  const put = async (rel: string, text: string) => {
    const path = join(projectRoot, projectDir, rel);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, text);
  };
  await put('run_notes.md', files.notes);
  if (which === 'notes_only') return;
  await put('.research/decision.json', `${JSON.stringify(files.decision, null, 2)}\n`);
  for (const result of files.results) await put(result.path, `${JSON.stringify(result.data, null, 2)}\n`);
}
