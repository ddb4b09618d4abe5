import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { capabilityDropArgv, userSwitchArgv } from '../../worker-gate/agent-sandbox/user-switch.ts';

/** A gate as a systemd unit runs it: a non-root user holding CAP_SETUID and CAP_SETGID as ambient capabilities. */
const AS_NON_ROOT_GATE = ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups', '--inh-caps=+setuid,+setgid', '--ambient-caps=+setuid,+setgid', '--'];

function capabilitiesOf(argv: string[]): Record<string, string> {
  const status = execFileSync(argv[0]!, [...argv.slice(1), 'cat', '/proc/self/status'], { encoding: 'utf8' });
  return Object.fromEntries(status.split('\n').filter((line) => line.startsWith('Cap')).map((line) => line.split(/:\s+/) as [string, string]));
}

describe("the switch to the agent's user", () => {
  it('carries none of the gate\'s capabilities over to the agent, ambient ones included', () => {
    const agent = execFileSync('getent', ['passwd', 'rcp-agent'], { encoding: 'utf8' }).split(':');
    expect(agent.length, 'the agent user is missing: run bash scripts/ensure-agent-user.sh').toBeGreaterThan(3);
    const [uid, gid] = [Number(agent[2]), Number(agent[3])];
    // The gate's own process holds the two capabilities it needs to switch users.
    expect(capabilitiesOf(AS_NON_ROOT_GATE).CapAmb).toBe('00000000000000c0');

    const inAgent = capabilitiesOf([...AS_NON_ROOT_GATE, ...userSwitchArgv('setpriv', uid, gid)]);
    expect(inAgent).toMatchObject({ CapInh: '0000000000000000', CapPrm: '0000000000000000', CapEff: '0000000000000000', CapAmb: '0000000000000000' });
  });

  it("drops them too where the agent keeps the gate's user (no agent user to switch to)", () => {
    const inAgent = capabilitiesOf([...AS_NON_ROOT_GATE, ...capabilityDropArgv('setpriv')]);
    expect(inAgent).toMatchObject({ CapInh: '0000000000000000', CapPrm: '0000000000000000', CapEff: '0000000000000000', CapAmb: '0000000000000000' });
  });
});
