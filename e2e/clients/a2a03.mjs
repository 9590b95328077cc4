// A2A 0.3 with the official JavaScript SDK 0.3.14 (installed as the npm
// alias a2a-sdk-03) against the hub's 0.3 JSON-RPC endpoint: send, get and
// stream. Env: HUB, AGENT_ID, CALLER_TOKEN.
import { A2AClient } from 'a2a-sdk-03/client';
import { randomUUID } from 'node:crypto';

const { HUB, AGENT_ID, CALLER_TOKEN } = process.env;
const authFetch = (url, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set('Authorization', `Bearer ${CALLER_TOKEN}`);
  return fetch(url, { ...init, headers });
};
function check(cond, what, detail) {
  if (!cond) {
    console.log(`FAIL ${what}: ${JSON.stringify(detail)}`);
    process.exit(1);
  }
  console.log(`ok ${what}`);
}

const client = await A2AClient.fromCardUrl(`${HUB}/a2a/agents/${AGENT_ID}/v0.3/.well-known/agent-card.json`, { fetchImpl: authFetch });
const msg = (text, contextId) => ({ message: { kind: 'message', messageId: randomUUID(), role: 'user', parts: [{ kind: 'text', text }], ...(contextId ? { contextId } : {}) } });
const text = (task) => (task.artifacts || []).flatMap((a) => a.parts.map((p) => p.text)).join('|');

const res = await client.sendMessage(msg('hello 0.3'));
check(!('error' in res), '0.3 send without error', res);
const task = res.result;
check(task.kind === 'task' && task.status.state === 'completed' && text(task) === 'echo: hello 0.3', '0.3 send', task);
const got = await client.getTask({ id: task.id });
check(got.result?.id === task.id && got.result.status.state === 'completed', '0.3 get', got);
const kinds = [];
for await (const ev of client.sendMessageStream(msg('stream 0.3', task.contextId))) kinds.push(ev.kind);
check(kinds[0] === 'task' && kinds.includes('artifact-update') && kinds.at(-1) === 'status-update', '0.3 stream', kinds);
console.log('done');
