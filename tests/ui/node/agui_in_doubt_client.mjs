// Drives the AG-UI endpoint with the official client (@ag-ui/client's HttpAgent) through
// a call in doubt: the first run (no new message; the thread's session was killed mid-call)
// ends on a call_in_doubt interrupt, the second settles it with a payload matching its
// responseSchema. Prints one JSON object.
// Usage: node agui_in_doubt_client.mjs URL TOKEN THREAD
import { HttpAgent, buildResumeArray } from "@ag-ui/client";

const [url, token, threadId] = process.argv.slice(2);
const agent = new HttpAgent({ url, headers: { Authorization: `Bearer ${token}` }, threadId });

function recorder(into) {
  return {
    onEvent({ event }) {
      into.push(event.type);
    },
  };
}

const first = [];
await agent.runAgent({ runId: "run-1" }, recorder(first));
const interrupts = agent.pendingInterrupts.map((i) => ({
  id: i.id,
  reason: i.reason,
  toolCallId: i.toolCallId,
  responseSchema: i.responseSchema,
}));
const responses = Object.fromEntries(
  agent.pendingInterrupts.map((i) => [
    i.id,
    { status: "resolved", payload: { resolution: "settle", result: "paid by hand" } },
  ]),
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
