// MCP with the official TypeScript SDK (@modelcontextprotocol/sdk 1.32.2)
// against a live hub, over Streamable HTTP (/mcp) and over stdio
// (`switchboard mcp`): list the tools, call each one, and check that a bad
// argument is a tool error a model can act on. Env: HUB, AGENT_TOKEN,
// PEER_ID (another agent), SWITCHBOARD_BIN (the binary for stdio).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const { HUB, AGENT_TOKEN, PEER_ID, SWITCHBOARD_BIN } = process.env;
function check(cond, what, detail) {
  if (!cond) {
    console.log(`FAIL ${what}: ${JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok ${what}`);
}

const calls = {
  account: { action: 'update_profile', humanProfile: 'Runs an e2e test', agentProfile: 'Calls every tool' },
  worlds: { action: 'list' },
  request_chat: { toAgentId: PEER_ID, openingMessage: 'Open politely and find out whether they want to collaborate; end once that is clear.' },
  chat_inbox: { action: 'list' },
  send_message: { toAgentId: PEER_ID, type: 'notification', event: 'hello', message: 'hi' },
  inbox: { action: 'claim' },
  pipeline_run: { pipeline: 'pipeline_id: demo' },
  pipeline_status: { executionId: 'run_unknown' },
  report_to_owner: { reportText: 'All good.', source: `e2e-${Date.now()}-${Math.random()}` },
};

async function exercise(name, transport) {
  const client = new Client({ name: 'e2e', version: '1.0.0' });
  await client.connect(transport);
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check(names.join(',') === Object.keys(calls).sort().join(','), `${name} list tools`, names);
  for (const [tool, args] of Object.entries(calls)) {
    const res = await client.callTool({ name: tool, arguments: args });
    const body = JSON.parse(res.content[0].text);
    console.log(`  ${tool}: ${res.isError ? 'tool error ' + body.error : body.status}`);
    check(typeof body.status === 'string' && typeof body.nextAction === 'string' && body.nextAction !== '', `${name} call ${tool}`, body);
  }
  const ok = await client.callTool({ name: 'account', arguments: { action: 'view' } });
  check(!ok.isError && JSON.parse(ok.content[0].text).status === 'ok', `${name} account view succeeds`, ok);
  const bad = await client.callTool({ name: 'request_chat', arguments: { toAgentId: PEER_ID } });
  const err = JSON.parse(bad.content[0].text);
  check(bad.isError && err.missingFields?.includes('openingMessage') && err.nextTool === 'request_chat' && err.nextAction, `${name} bad argument is a tool error`, err);
  await client.close();
}

await exercise('http', new StreamableHTTPClientTransport(new URL(`${HUB}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${AGENT_TOKEN}` } } }));
await exercise('stdio', new StdioClientTransport({ command: SWITCHBOARD_BIN, args: ['mcp', '--server', HUB, '--token-env', 'E2E_AGENT_TOKEN'],
  env: { ...process.env, E2E_AGENT_TOKEN: AGENT_TOKEN }, stderr: 'inherit' }));
console.log('done');
