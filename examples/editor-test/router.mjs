// router.mjs: the official TypeScript SDK on both sides of acpbridge's
// router: `acpbridge --fanout -- node agent.mjs` (a single-session agent on
// the SDK) driven by an SDK client as an editor drives it: initialize (the
// agent's own answer relayed), two threads, each a process of its own, both
// prompting at once, their permission requests answered, both turns ended.
//
//   npm ci && node router.mjs [ACPBRIDGE]
import * as acp from "@agentclientprotocol/sdk";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const bin = process.argv[2] || process.env.ACPBRIDGE || "acpbridge";
const state = mkdtempSync(path.join(tmpdir(), "acpbridge-router-"));
const router = spawn(bin, ["--fanout", "--state-dir", state, "--", process.execPath, path.join(here, "agent.mjs")],
  { stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => router.on("exit", (code) => resolve(code)));

let asked = 0;
const app = acp
  .client({ name: "sdk-client-through-the-router" })
  .onRequest(acp.methods.client.session.requestPermission, () => {
    asked++;
    return { outcome: { outcome: "selected", optionId: "yes" } };
  })
  .onNotification(acp.methods.client.session.update, () => {});

const stream = acp.ndJsonStream(Writable.toWeb(router.stdin), Readable.toWeb(router.stdout));
let result;
try {
  result = await app.connectWith(stream, async (ctx) => {
    const init = await ctx.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    const a = await ctx.request(acp.methods.agent.session.new, { cwd: here, mcpServers: [] });
    const b = await ctx.request(acp.methods.agent.session.new, { cwd: here, mcpServers: [] });
    const stops = await Promise.all([a, b].map(({ sessionId }) =>
      ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "go" }] })));
    return { agent: init.agentInfo?.name, sessions: [a.sessionId, b.sessionId], stops: stops.map((s) => s.stopReason) };
  });
} catch (err) {
  result = { error: err?.message ?? String(err) };
}
router.stdin.end();
const code = await exited;
console.log(`through the router: ${JSON.stringify(result)}; permissions asked ${asked}; the router exited ${code}`);
const pids = new Set((result.sessions ?? []).map((s) => s.split("-")[1]));
if (result.agent !== "sdk-one-session-agent" || pids.size !== 2 || result.stops?.join() !== "end_turn,end_turn" || asked !== 2 || code !== 0) {
  console.error("FAIL: the SDK agent behind the router did not serve two threads as an editor expects");
  process.exit(1);
}
console.log("ok: two threads, a process each, through the router");
