// multi.mjs: a multi-session ACP agent on the official TypeScript SDK, the
// other kind of agent `acpbridge scenario run` compares acpbridge with: one
// Node process holds every session, each prompt streamed from an
// OpenAI-compatible endpoint (OPENAI_BASE_URL, OPENAI_API_KEY), its two
// tools (write_file, run_command) run through the client after asking.
// compare.sh runs it beside acpbridge on testdata/scenarios/coding.txtar.
import * as acp from "@agentclientprotocol/sdk";
import { Readable, Writable } from "node:stream";
import { randomUUID } from "node:crypto";
import path from "node:path";

const sessions = new Map(); // id → { cwd, history, abort }
const tools = [
  { type: "function", function: { name: "write_file", description: "Write a file.",
    parameters: { type: "object", properties: { path: { type: "string" }, content: { type: "string" } } } } },
  { type: "function", function: { name: "run_command", description: "Run a shell command line.",
    parameters: { type: "object", properties: { command: { type: "string" } } } } },
];

// complete streams one model call as session updates and returns the
// text and the tool calls.
async function complete(client, sessionId, history, signal) {
  const res = await fetch(process.env.OPENAI_BASE_URL.replace(/\/$/, "") + "/chat/completions", {
    method: "POST", signal,
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${process.env.OPENAI_API_KEY}` },
    body: JSON.stringify({ model: "default", stream: true, messages: history, tools }),
  });
  if (!res.ok) throw new Error(`the model answered ${res.status}`);
  let text = "", rest = "";
  const calls = [];
  const update = (u) => client.notify(acp.methods.client.session.update, { sessionId, update: u });
  for await (const piece of res.body.pipeThrough(new TextDecoderStream())) {
    rest += piece;
    let nl;
    while ((nl = rest.indexOf("\n")) >= 0) {
      const line = rest.slice(0, nl).trim();
      rest = rest.slice(nl + 1);
      if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
      const delta = JSON.parse(line.slice(6)).choices?.[0]?.delta ?? {};
      if (delta.reasoning_content) await update({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: delta.reasoning_content } });
      if (delta.content) {
        text += delta.content;
        await update({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: delta.content } });
      }
      for (const tc of delta.tool_calls ?? []) {
        const c = (calls[tc.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
        c.id += tc.id ?? "";
        c.function.name += tc.function?.name ?? "";
        c.function.arguments += tc.function?.arguments ?? "";
      }
    }
  }
  return { text, calls };
}

// runTool runs one tool call through the client, after asking, and
// returns its result for the model.
async function runTool(client, sessionId, cwd, call) {
  const args = JSON.parse(call.function.arguments || "{}");
  const edit = call.function.name === "write_file";
  const title = edit ? `Write ${args.path}` : `Run ${args.command}`;
  const update = (u) => client.notify(acp.methods.client.session.update, { sessionId, update: { toolCallId: call.id, ...u } });
  await update({ sessionUpdate: "tool_call", title, kind: edit ? "edit" : "execute", status: "pending" });
  const finish = async (status, text) => {
    await update({ sessionUpdate: "tool_call_update", status, content: [{ type: "content", content: { type: "text", text } }] });
    return text;
  };
  const asked = await client.request(acp.methods.client.session.requestPermission, {
    sessionId, toolCall: { toolCallId: call.id, title },
    options: [{ optionId: "allow", name: "Allow", kind: "allow_once" }, { optionId: "reject", name: "Reject", kind: "reject_once" }],
  });
  if (asked.outcome.outcome !== "selected" || asked.outcome.optionId !== "allow") return finish("failed", "the user refused");
  if (edit) {
    await client.request(acp.methods.client.fs.writeTextFile, { sessionId, path: path.resolve(cwd, args.path), content: args.content });
    return finish("completed", `wrote ${args.path}`);
  }
  const { terminalId } = await client.request(acp.methods.client.terminal.create, { sessionId, command: "sh", args: ["-c", args.command], cwd });
  await client.request(acp.methods.client.terminal.waitForExit, { sessionId, terminalId });
  const out = await client.request(acp.methods.client.terminal.output, { sessionId, terminalId });
  await client.request(acp.methods.client.terminal.release, { sessionId, terminalId });
  return finish("completed", out.output);
}

const app = acp
  .agent({ name: "sdk-multi-session-agent" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    authMethods: [],
    agentInfo: { name: "sdk-multi-session-agent", version: "1.0.0" },
  }))
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    const sessionId = `ts-${randomUUID()}`;
    sessions.set(sessionId, { cwd: params.cwd, history: [], abort: null });
    return { sessionId };
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    const s = sessions.get(params.sessionId);
    if (!s) throw new Error(`no session ${params.sessionId}`);
    s.abort = new AbortController();
    s.history.push({ role: "user", content: params.prompt.map((b) => b.text ?? "").join("\n") });
    try {
      for (;;) {
        const { text, calls } = await complete(client, params.sessionId, s.history, s.abort.signal);
        s.history.push(calls.length ? { role: "assistant", content: text, tool_calls: calls } : { role: "assistant", content: text });
        if (!calls.length) return { stopReason: "end_turn" };
        for (const call of calls) {
          s.history.push({ role: "tool", tool_call_id: call.id, content: await runTool(client, params.sessionId, s.cwd, call) });
        }
      }
    } catch (err) {
      if (s.abort.signal.aborted) return { stopReason: "cancelled" };
      throw err;
    }
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => sessions.get(params.sessionId)?.abort?.abort());

app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
