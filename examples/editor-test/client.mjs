// client.mjs: an ACP client written with the official TypeScript SDK
// (@agentclientprotocol/sdk), tested the way an editor is tested with
// acpbridge: `acpbridge scenario serve editor_turn.txtar` plays the agent,
// checks every line this client sends against the file, and exits 0 only
// when the client did what the file says.
//
//   npm ci && node client.mjs [ACPBRIDGE] [SCENARIO]
//
// ACPBRIDGE defaults to $ACPBRIDGE or `acpbridge` on PATH. With
// WRONG_ANSWER=1 the client rejects the write instead, and the run must
// fail: the check bites.
import * as acp from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = process.argv[2] || process.env.ACPBRIDGE || "acpbridge";
const scenario = process.argv[3] || path.join(here, "editor_turn.txtar");
const wrong = process.env.WRONG_ANSWER === "1";

const agent = spawn(bin, ["scenario", "serve", "--timeout", "10s", "--report", path.join(here, "serve-report.txt"), scenario],
  { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => agent.on("exit", (code) => resolve(code)));

const seen = [];
const app = acp
  .client({ name: "sdk-client-under-test" })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    const kind = wrong ? "reject_once" : "allow_once";
    const option = params.options.find((o) => o.kind === kind);
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    seen.push(params.update.sessionUpdate);
  });

const stream = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));
let stop = "(none)";
try {
  stop = await app.connectWith(stream, async (ctx) => {
    await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    const { sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd: here, mcpServers: [] });
    const res = await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "Write hello.txt" }] });
    return res.stopReason;
  });
} catch (err) {
  stop = "error: " + (err?.message ?? err);
}
agent.stdin.end();
const code = await exited;
console.log(`the prompt ended: ${stop}; updates seen: ${seen.join(", ")}; scenario serve exited ${code}`);
if (!wrong && !seen.includes("usage_update")) {
  console.error("FAIL: the client was not told the context's usage (usage_update)");
  process.exit(1);
}
if (wrong ? code === 0 : code !== 0 || stop !== "end_turn") {
  console.error(wrong ? "FAIL: scenario serve accepted a client that rejected the write" : "FAIL: the client did not do what editor_turn.txtar says");
  process.exit(1);
}
console.log(wrong ? "ok: the wrong answer was caught" : "ok: the client did what editor_turn.txtar says");
