// A2A 1.0 with the official JavaScript SDK (@a2a-js/sdk 1.3.0) against a
// live hub, over JSON-RPC and HTTP+JSON: send, stream, get, cancel and a
// multi-turn context. Env: HUB (base URL), AGENT_ID, CALLER_TOKEN.
// Prints one "ok <check>" line per passed check; exits 1 on the first failure.
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';
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

const msg = (text, extra = {}) => ({
  messageId: randomUUID(), role: Role.ROLE_USER, parts: [{ content: { $case: 'text', value: text } }],
  contextId: '', taskId: '', metadata: undefined, extensions: [], referenceTaskIds: [], ...extra,
});
const artifactText = (task) => (task.artifacts || []).flatMap((a) => a.parts.map((p) => p.content?.value)).join('|');

async function clientFor(binding) {
  const factory = new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
    transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch }), new RestTransportFactory({ fetchImpl: authFetch })],
    preferredTransports: [binding],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch }),
  }));
  // The card URL in full: a path joined to the base would drop /a2a/agents/<id>.
  return factory.createFromUrl(`${HUB}/a2a/agents/${AGENT_ID}/.well-known/agent-card.json`, "");
}

for (const binding of ['JSONRPC', 'HTTP+JSON']) {
  const c = await clientFor(binding);
  const task = await c.sendMessage({ message: msg(`hello ${binding}`) });
  check(task.status?.state === TaskState.TASK_STATE_COMPLETED && artifactText(task) === `echo: hello ${binding}`, `${binding} send`, task);

  const got = await c.getTask({ id: task.id });
  check(got.id === task.id && got.status?.state === TaskState.TASK_STATE_COMPLETED, `${binding} get`, got);

  const kinds = [];
  for await (const ev of c.sendMessageStream({ message: msg('stream please') })) {
    kinds.push(ev.payload?.$case);
  }
  check(kinds[0] === 'task' && kinds.includes('artifactUpdate') && kinds.at(-1) === 'statusUpdate', `${binding} stream`, kinds);

  const second = await c.sendMessage({ message: msg('second turn', { contextId: task.contextId }) });
  check(second.contextId === task.contextId && second.id !== task.id && artifactText(second) === 'echo: second turn', `${binding} multi-turn context`, second);

  const slow = await c.sendMessage({ message: msg('never answered'), configuration: { acceptedOutputModes: [], returnImmediately: true, taskPushNotificationConfig: undefined } });
  check(slow.status?.state !== TaskState.TASK_STATE_COMPLETED, `${binding} return immediately`, slow);
  const canceled = await c.cancelTask({ id: slow.id });
  check(canceled.status?.state === TaskState.TASK_STATE_CANCELED, `${binding} cancel`, canceled);

  let notFound = false;
  try { await c.getTask({ id: 'no-such-task' }); } catch (e) { notFound = true; }
  check(notFound, `${binding} unknown task is an error`, null);
}
console.log('done');
