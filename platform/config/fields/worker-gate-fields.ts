import { z } from 'zod';
import { AGENT_RUNTIMES } from '../../../worker-gate/contract/agent-runtimes.ts';
import type { GateThresholdProfile } from '../../../worker-gate/contract/workload.ts';
import { WorkloadClassSchema, doc, httpUrl, nonEmptyText, pct, text } from './field-kinds.ts';

const thresholdFields = {
  idle_sustain_sec: z.number().min(30),
  cpu_idle_threshold_pct: pct(),
  gpu_idle_avg_threshold_pct: pct(),
  gpu_idle_peak_threshold_pct: pct(),
  vram_delta_threshold_mib: z.number().min(0),
} satisfies Record<keyof GateThresholdProfile, z.ZodNumber>;

/** Seconds without progress after which a running agent counts as stalled. */
const stallAfterSec = () => z.number().int().min(1).max(86_400);

/** Limits of each run's own cgroup (docs/worker-gate.md#worker-gate); null: the default share of memory, no pids or CPU limit. */
const runLimitFields = {
  run_memory_max_mib: z.number().int().min(16).nullable(),
  run_pids_max: z.number().int().min(8).max(4_194_304).nullable(),
  run_cpu_max_cores: z.number().min(0.01).max(4096).nullable(),
};

const ProfileOverrideSchema = z.strictObject({
  idle_sustain_sec: thresholdFields.idle_sustain_sec.optional(),
  cpu_idle_threshold_pct: thresholdFields.cpu_idle_threshold_pct.optional(),
  gpu_idle_avg_threshold_pct: thresholdFields.gpu_idle_avg_threshold_pct.optional(),
  gpu_idle_peak_threshold_pct: thresholdFields.gpu_idle_peak_threshold_pct.optional(),
  vram_delta_threshold_mib: thresholdFields.vram_delta_threshold_mib.optional(),
  stall_after_sec: stallAfterSec().optional(),
  run_memory_max_mib: runLimitFields.run_memory_max_mib.optional(),
  run_pids_max: runLimitFields.run_pids_max.optional(),
  run_cpu_max_cores: runLimitFields.run_cpu_max_cores.optional(),
});

/** Most runs one gate may hold at once. */
export const MAX_RUN_SLOTS = 256;

/** GPU indices as nvidia-smi numbers them; a list names each GPU once. */
export const RunGpusSchema = z.union([
  z.literal('all'),
  z
    .array(z.number().int().min(0).max(255))
    .max(64)
    .refine((list) => new Set(list).size === list.length, 'must not name a GPU index twice'),
]);

const DEFAULT_COMMAND_MARKERS = ['codex', 'claude', 'python', 'torchrun', 'accelerate', 'vllm'];

/** The worker gate's fields: the agents it starts and how they are contained, the quiet window, the reaper of leftover processes, where its callbacks go. */
export const workerGateFields = {
  dispatch_script_path: doc(nonEmptyText().optional(), {
    perReplica: true,
    description:
      "Script the worker gate runs (without a shell) to start an agent when its agent_runtime is 'script'; required then. Relative paths resolve against the config file directory.",
  }),
  dispatch_timeout_sec: doc(z.number().positive().default(30), {
    description: 'How long the dispatch script may run before the dispatch fails (504).',
  }),
  log_events: doc(z.boolean().default(true), {
    description:
      'Worker gate: write its event history to worker-gate/events.jsonl under state_dir (read back on restart); false keeps only the running process\'s recent events in memory, still shown by /dashboard/api. The control plane\'s audit trail is always written.',
  }),
  sample_interval_sec: doc(z.number().min(1).default(5), { description: 'Telemetry sampling interval.' }),
  quiet_window_scope: doc(z.enum(['run', 'machine']).default('run'), {
    description:
      "What the worker gate's quiet window judges: 'run' (each run's own CPU and GPU use, so other work on the machine neither delays nor blocks its finish, and several runs can share a machine) or 'machine' (the whole machine's CPU and GPU, for hosts where a run's use cannot be told apart). The thresholds below mean different figures in each scope.",
  }),
  idle_sustain_sec: doc(thresholdFields.idle_sustain_sec.default(180), {
    description: 'How long a workload must stay below the idle thresholds to count as idle.',
  }),
  cpu_idle_threshold_pct: doc(thresholdFields.cpu_idle_threshold_pct.default(35), {
    description:
      "CPU use (percent) at or below which the workload counts as idle: with quiet_window_scope 'run', the run's own CPU (its cgroup's, or its tracked processes') as a percentage of one core; with 'machine', the whole machine's busy share of all its cores.",
  }),
  gpu_idle_avg_threshold_pct: doc(thresholdFields.gpu_idle_avg_threshold_pct.default(10), {
    description:
      "Average GPU use (percent) at or below which the workload counts as idle: with scope 'run', the utilisation of the GPUs the run's own compute processes are on (0 while it has none); with 'machine', the busiest GPU's.",
  }),
  gpu_idle_peak_threshold_pct: doc(thresholdFields.gpu_idle_peak_threshold_pct.default(20), {
    description: "Peak GPU use (percent) at or below which the workload counts as idle; the GPUs judged as for gpu_idle_avg_threshold_pct.",
  }),
  vram_delta_threshold_mib: doc(thresholdFields.vram_delta_threshold_mib.default(1024), {
    description:
      "Largest VRAM (MiB) still counted as idle; 0 requires none: with scope 'run', the GPU memory the run's own compute processes hold; with 'machine', the growth of all GPUs' memory over what was used when the run was dispatched.",
  }),
  max_wait_after_idle_sec: doc(z.number().min(60).default(43200), {
    description: 'Longest wait for a quiet window after idle was first seen.',
  }),
  stall_after_sec: doc(stallAfterSec().default(600), {
    description:
      "Worker gate: a running agent that shows no progress for this long (no lifecycle event, no sample of its own CPU or GPU above the quiet window's thresholds, and for Codex and Claude Code no model answer, tool event or usage change in the tool's stream) is stopped, its processes with it, and its run ends in gate_error with a reason starting 'stalled:'. workload_profiles may set it per class.",
  }),
  agent_runtime: doc(z.enum(AGENT_RUNTIMES).default('script'), {
    description:
      "Worker gate: the agent it starts. 'script' runs dispatch_script_path; 'codex' runs Codex CLI and 'claude-code' Claude Code, each under the gate's own launcher with its lifecycle hooks (docs/worker-gate.md#running-real-agents).",
  }),
  agent_runtime_by_workload_class: doc(z.partialRecord(WorkloadClassSchema, z.enum(AGENT_RUNTIMES)).default({}), {
    description: 'Worker gate: workload class → agent runtime, over agent_runtime for runs of that class.',
  }),
  agent_credential_env: doc(z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be an environment variable name')).default(['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL']), {
    description:
      "Worker gate: the names of its environment variables that a real agent receives (model keys and server URLs); the values are read from the gate's environment, never from this file. Nothing else of the gate's environment reaches the agent but what a process needs (PATH, HOME, locale).",
  }),
  agent_user: doc(nonEmptyText().regex(/^[a-z_][a-z0-9_-]{0,31}$/, 'must be a user name').default('rcp-agent'), {
    perReplica: true,
    description:
      "Worker gate: the unprivileged user agents run as, when the gate can switch users (root, or CAP_SETUID and CAP_SETGID); it owns the run's project directory and its home. scripts/ensure-agent-user.sh creates it. Without it, or without the capability, agents run as the gate's own user (docs/security.md#security-model).",
  }),
  agent_isolation: doc(z.enum(['auto', 'off']).default('auto'), {
    description:
      "Worker gate: 'auto' starts every agent (the dispatch script, Codex, Claude Code) in a bwrap sandbox that shows only its project, its home, its tools and the read-only system, and as agent_user where the gate can switch users; 'off' starts agents unsandboxed (reported at start, in /control/health and /dashboard/api, and failing a strict preflight).",
  }),
  agent_read_only_paths: doc(z.array(nonEmptyText()).default([]), {
    perReplica: true,
    description: 'Worker gate: more directories an agent sees read-only in its sandbox (data sets, model caches). Relative paths resolve against the config file directory.',
  }),
  agent_writable_paths: doc(z.array(nonEmptyText()).default([]), {
    perReplica: true,
    description: 'Worker gate: directories an agent may also write in its sandbox, shared by every run (a scratch or cache directory). Relative paths resolve against the config file directory.',
  }),
  agent_tmux_enabled: doc(z.boolean().default(false), {
    description:
      "Worker gate: start a real agent's runner inside a tmux session named after the run, on a tmux server of its own (watch it with tmux -L <session> attach -t <session>); the run reports the session as tmux_session. Needs tmux on the worker.",
  }),
  codex_path: doc(text().default(''), {
    perReplica: true,
    description: "Worker gate: the codex executable; '' runs the pinned version that scripts/ensure-agents.sh installs in the user cache (as root, /var/cache, which the agent user can reach). The agent user must be able to reach it.",
  }),
  claude_code_path: doc(text().default(''), {
    perReplica: true,
    description: "Worker gate: the claude executable (Claude Code); '' runs the pinned version that scripts/ensure-agents.sh installs in the user cache (as root, /var/cache, which the agent user can reach). The agent user must be able to reach it.",
  }),
  workload_profiles: doc(z.partialRecord(WorkloadClassSchema, ProfileOverrideSchema).default({}), {
    description: 'Per-class threshold overrides; they win over the built-in profiles (inference_eval, training, cpu_only, gpu_required) and the global thresholds.',
  }),
  run_cgroup_mode: doc(z.enum(['auto', 'v2', 'v1', 'none']).default('auto'), {
    description:
      "Worker gate: how each run is contained in a cgroup of its own. 'auto' takes cgroup v2 where the gate has a delegated subtree (run_cgroup_v2_root, or its own cgroup under systemd Delegate=yes) offering the memory and pids controllers, else the v1 hierarchies (pids, memory, freezer, cpu, cpuacct) where they are writable, else v2 without limits, else none; 'v2' and 'v1' insist (the gate does not start without it); 'none' tracks runs by their process tree. /dashboard/api shows the mode and why as service.run_cgroups.",
  }),
  run_cgroup_v2_root: doc(text().default(''), {
    perReplica: true,
    description:
      "Worker gate: a cgroup v2 directory the gate may create its run cgroups under (for example /sys/fs/cgroup/unified or a subtree delegated to the gate's user); '' uses the gate's own cgroup when it is delegated (not the hierarchy's root, and writable), moving the gate into <own>/gate first.",
  }),
  run_cgroup_parent: doc(text().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'must be one directory name').or(z.literal('')).default(''), {
    perReplica: true,
    description:
      "Worker gate: the directory (in each hierarchy) that holds this gate's run cgroups, one run-<run_id> each; '' derives rcp-gate-<hash of state_dir>, so two gates on one machine never sweep each other's runs.",
  }),
  run_memory_max_mib: doc(runLimitFields.run_memory_max_mib.default(null), {
    description:
      "Worker gate: memory limit of each run's cgroup (v2 memory.max, v1 memory.limit_in_bytes); the run's processes past it are killed by the kernel, never the gate. null: 75 % of the machine's memory. workload_profiles may set it per class.",
  }),
  run_pids_max: doc(runLimitFields.run_pids_max.default(4096), {
    description: "Worker gate: most processes and threads at once in a run's cgroup (pids.max): a fork bomb stops there. null: no limit. workload_profiles may set it per class.",
  }),
  run_cpu_max_cores: doc(runLimitFields.run_cpu_max_cores.default(null), {
    description: "Worker gate: CPU time a run's cgroup may use, in cores (v2 cpu.max, v1 cpu.cfs_quota_us); null: unlimited. workload_profiles may set it per class.",
  }),
  run_slots: doc(z.number().int().min(1).max(MAX_RUN_SLOTS).default(1), {
    description:
      "Worker gate: how many runs it holds at once (docs/worker-gate.md#slots-and-gpus). A run holds its slot from its dispatch until it is over (ready, finished, cancelled, error): a run whose agent waits on an answer keeps it; a dispatch while every slot is held is answered 409, naming the runs that hold them. 1 keeps one run at a time on the machine.",
  }),
  agent_continue_limit: doc(z.number().int().min(0).max(5).default(1), {
    description:
      "Worker gate: how many times a run whose agent ended its session without what it is judged on (run_notes.md, .research/decision.json) is resumed with a prompt naming what is missing, before it is judged as it is (docs/worker-gate.md#continuing-a-premature-stop). The run's token budget covers every continuation. 0 judges a run on its first session.",
  }),
  usage_limit_backoff_sec: doc(z.number().int().min(1).max(7 * 24 * 3600).default(900), {
    description:
      "Worker gate: how long a run whose model refused for a usage limit waits before its session resumes, when the tool's message names no reset time; also the least wait after a resumed session hits the limit again at once (docs/worker-gate.md#waiting-out-a-usage-limit). A named reset is waited for, a week at most.",
  }),
  usage_limit_hold_sec: doc(z.number().int().min(0).max(7 * 24 * 3600).default(600), {
    description:
      "Worker gate: the longest usage-limit wait during which the run keeps its slot, GPUs and CPUs (and the control plane its lane). A longer wait lets them go, for other runs, until the run resumes and takes them back (docs/worker-gate.md#waiting-out-a-usage-limit). 0 lets every waiting run's slot go.",
  }),
  run_gpus: doc(RunGpusSchema.default('all'), {
    description:
      "Worker gate: the GPUs it offers to runs. 'all': every GPU nvidia-smi reports; a list of indices (as nvidia-smi numbers them): only those ([] offers none). A dispatch's gpu_indices naming another GPU, or one a run of this gate still holds, is answered 409; the run's agent sees only its own GPUs (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES).",
  }),
  stale_project_process_reaper_enabled: doc(z.boolean().default(true), {
    description: 'Terminate leftover agent processes of finished projects.',
  }),
  stale_project_process_grace_sec: doc(z.number().min(0).default(900), {
    description: 'Age after which a leftover project process counts as stale.',
  }),
  stale_project_process_term_grace_sec: doc(z.number().min(0).default(5), {
    description: 'Wait between SIGTERM and SIGKILL when reaping.',
  }),
  stale_project_process_command_markers: doc(z.array(text()).default(DEFAULT_COMMAND_MARKERS), {
    description: 'Command-name markers that identify agent processes the reaper may end.',
  }),
  completion_callback_fallback_urls: doc(z.array(httpUrl()).max(16).default([]), {
    perReplica: true,
    description:
      'Worker gate: the callback URLs of the other control-plane replicas. A callback that completion_callback_url does not take (no answer, or not a 2xx) goes to the next of these at once; the next callback starts with the URL that took the last one.',
  }),
};
