// Drives the AG-UI endpoint with the official client (@ag-ui/client's HttpAgent) through
// a running call's question: the first run ends on an input_required interrupt, the second
// answers it with a payload matching its responseSchema. Prints one JSON object.
// Usage: node agui_question_client.mjs URL TOKEN
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [url, token] = process.argv.slice(2);
const agent = new HttpAgent({
  url,
  headers: { Authorization: `Bearer ${token}` },
  threadId: "thread-question",
});

function recorder(into) {
  return {
    onEvent({ event }) {
      into.push(event.type);
    },
  };
}

agent.addMessage({ id: "user-1", role: "user", content: "book a seat" });
const first = [];
await agent.runAgent({ runId: "run-1" }, recorder(first));
const interrupts = agent.pendingInterrupts.map((i) => ({
  id: i.id,
  reason: i.reason,
  message: i.message,
  toolCallId: i.toolCallId,
  responseSchema: i.responseSchema,
}));
const responses = Object.fromEntries(
  agent.pendingInterrupts.map((i) => [i.id, { status: "resolved", payload: { seat: "2A" } }]),
);
const second = [];
await agent.runAgent(
  { runId: "run-2", resume: buildResumeArray(agent.pendingInterrupts, responses) },
  recorder(second),
);
process.stdout.write(
  JSON.stringify({
    interrupts,
    first,
    second,
    pendingAfter: agent.pendingInterrupts.length,
    last: agent.messages.at(-1)?.content ?? null,
  }),
);
