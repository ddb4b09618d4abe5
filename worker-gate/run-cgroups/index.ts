export { joinArgvFor, type RunCgroup, type RunCgroupRecord, type RunLimits } from './run-cgroup.ts';
export { RunCgroupHost, parentNameFor, reopenRunCgroup, stopAndRemove, type CpuPinning, type RunCgroupSetting, type RunCgroupsStatus } from './run-cgroup-host.ts';
export { formatCpuList, parseCpuList } from './cpuset.ts';
export { runLimitsFor, DEFAULT_MEMORY_SHARE } from './limits.ts';
