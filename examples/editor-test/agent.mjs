// agent.mjs: a single-session ACP agent on the official TypeScript SDK, the
// kind `acpbridge --fanout -- node agent.mjs` gives an editor's threads:
// it refuses a second session, streams a chunk, asks permission, and ends
// the turn. router.mjs drives it through the router.
import * as acp from "@agentclientprotocol/sdk";
import { Readable, Writable } from "node:stream";
import { randomUUID } from "node:crypto";

let live = null;
const app = acp
  .agent({ name: "sdk-one-session-agent" })
  .onRequest(acp.methods.agent.initialize, () => ({
    protocolVersion: acp.PROTOCOL_VERSION,
    agentCapabilities: { loadSession: false },
    authMethods: [],
    agentInfo: { name: "sdk-one-session-agent", version: "1.0.0" },
  }))
  .onRequest(acp.methods.agent.session.new, () => {
    if (live) throw new Error(`one session per process; ${live} is live`);
    live = `sdk-${process.pid}-${randomUUID()}`;
    return { sessionId: live };
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
    await client.notify(acp.methods.client.session.update, {
      sessionId: params.sessionId,
      update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `pid ${process.pid}: ` } },
    });
    const res = await client.request(acp.methods.client.session.requestPermission, {
      sessionId: params.sessionId,
      toolCall: { toolCallId: "t1", title: "Do it" },
      options: [{ optionId: "yes", name: "Yes", kind: "allow_once" }, { optionId: "no", name: "No", kind: "reject_once" }],
    });
    return { stopReason: res.outcome.outcome === "selected" && res.outcome.optionId === "yes" ? "end_turn" : "refusal" };
  })
  .onNotification(acp.methods.agent.session.cancel, () => {});

app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
