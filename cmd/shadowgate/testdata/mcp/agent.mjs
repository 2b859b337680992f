// An agent on the TypeScript MCP SDK (@modelcontextprotocol/sdk, from the
// npm registry), an independent client for the MCP end-to-end test. It
// prints one JSON object a line, each with its "step", for the Go test to
// judge; it judges nothing itself.
//
//   node agent.mjs http  <mcp url> <console url> <write value>
//   node agent.mjs stdio <shadowgate binary> <mcp url> <console url> <write value>
//
// Tokens come from the environment: AGENT_TOKEN (an operator admitted to
// MCP), WATCHER_TOKEN (a viewer admitted to MCP), APPROVER_TOKEN (a
// person's API token, not admitted to MCP).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [mode, ...rest] = process.argv.slice(2);
const out = (step, data) => console.log(JSON.stringify({ step, ...data }));

function transport(token) {
  if (mode === 'http') {
    return new StreamableHTTPClientTransport(new URL(rest[0]), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  }
  return new StdioClientTransport({ command: rest[0], args: ['mcp', '--url', rest[1]],
    env: { PATH: process.env.PATH, SHADOWGATE_MCP_TOKEN: token }, stderr: 'inherit' });
}
const consoleURL = mode === 'http' ? rest[1] : rest[2];
const writeValue = (mode === 'http' ? rest[2] : rest[3]) === 'true';

async function connect(token) {
  const client = new Client({ name: 'shadowgate-e2e-agent', version: '0.0.1' });
  await client.connect(transport(token));
  return client;
}

function result(r) {
  return { isError: r.isError ?? false, text: r.content?.[0]?.text ?? '', structured: r.structuredContent ?? null };
}

const agent = await connect(process.env.AGENT_TOKEN);
const { tools } = await agent.listTools();
out('tools', { tools: tools.map((t) => ({ name: t.name, annotations: t.annotations ?? {}, description: t.description })) });

out('read', result(await agent.callTool({ name: 'read', arguments: { device: 'tank-1', capability: 'level' } })));

const asked = result(await agent.callTool({ name: 'request_write', arguments: {
  device: 'valve-1', capability: 'open', value: writeValue, reason: 'the e2e agent waters zone A' } }));
out('request_write', asked);

// A second principal, a person, approves through the API.
const id = asked.structured?.approval_id;
const answer = await fetch(`${consoleURL}/api/v1/approvals/${id}`, { method: 'POST',
  headers: { Authorization: `Bearer ${process.env.APPROVER_TOKEN}`, 'Content-Type': 'application/json' },
  body: JSON.stringify({ decision: 'approve', device: 'valve-1', capability: 'open', value: writeValue, reason: 'looked fine' }) });
out('approve', { status: answer.status });

const progress = [];
const followed = await agent.callTool({ name: 'get_approval', arguments: { approval_id: id, wait_seconds: 30 } }, undefined,
  { onprogress: (p) => progress.push(p.message) });
out('get_approval', { ...result(followed), progress });

out('refused', result(await agent.callTool({ name: 'request_write', arguments: {
  device: 'heater-1', capability: 'on', value: true, reason: 'warm the seedlings' } })));

try {
  await agent.callTool({ name: 'no_such_tool', arguments: {} });
  out('unknown_tool', { thrown: false });
} catch (e) {
  out('unknown_tool', { thrown: true, code: e.code, message: e.message });
}
await agent.close();

// A viewer's token is not offered the writing tools; called anyway, the
// gateway refuses it for its role (over HTTP), or the bridge, which
// offers only what the gateway listed, knows no such tool (over stdio).
const watcher = await connect(process.env.WATCHER_TOKEN);
out('watcher_tools', { names: (await watcher.listTools()).tools.map((t) => t.name) });
try {
  out('watcher_write', result(await watcher.callTool({ name: 'request_write', arguments: {
    device: 'valve-1', capability: 'open', value: true, reason: 'just looking' } })));
} catch (e) {
  out('watcher_write', { thrown: true, code: e.code, message: e.message });
}
await watcher.close();

try {
  const stranger = await connect(process.env.APPROVER_TOKEN);
  await stranger.listTools();
  out('not_admitted', { connected: true });
  await stranger.close();
} catch (e) {
  out('not_admitted', { connected: false, message: String(e.message ?? e) });
}
process.exit(0);
