// Drives the AG-UI endpoint with the official client (@ag-ui/client's HttpAgent):
// one run that parks on an approval, then the resume the scenario answers with.
// Usage: node agui_client.mjs URL TOKEN SCENARIO (approve | deny); prints one JSON object.
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [url, token, scenario] = process.argv.slice(2);
const agent = new HttpAgent({
  url,
  headers: { Authorization: `Bearer ${token}` },
  threadId: `thread-${scenario}`,
});

function recorder(into) {
  return {
    onEvent({ event }) {
      into.push(event.type);
    },
  };
}

agent.addMessage({ id: "user-1", role: "user", content: "deploy api" });
const first = [];
await agent.runAgent({ runId: "run-1" }, recorder(first));
const interrupts = agent.pendingInterrupts.map((i) => ({
  id: i.id,
  reason: i.reason,
  toolCallId: i.toolCallId,
}));
const answer =
  scenario === "approve"
    ? { status: "resolved", payload: { approved: true } }
    : { status: "resolved", payload: { approved: false, reason: "not today" } };
const responses = Object.fromEntries(agent.pendingInterrupts.map((i) => [i.id, answer]));
const second = [];
const result = await agent.runAgent(
  { runId: "run-2", resume: buildResumeArray(agent.pendingInterrupts, responses) },
  recorder(second),
);
process.stdout.write(
  JSON.stringify({
    interrupts,
    first,
    second,
    pendingAfter: agent.pendingInterrupts.length,
    messages: agent.messages.map((m) => ({
      id: m.id,
      role: m.role,
      content: m.content ?? null,
      toolCallId: m.toolCallId ?? null,
      toolCalls: (m.toolCalls ?? []).map((c) => c.function.name),
    })),
    newMessages: result.newMessages.map((m) => m.id),
  }),
);
