// A lock's page: its state, its queue in order, the events seen since the page opened, and
// the admin's force release, behind a confirmation.
//
// The lock's event stream (`GET /v1/locks/{name}/events`) keeps the state live. The queue
// comes from `GET /v1/locks/{name}/queue`, read again (at most one read at a time) after
// each event, since any change of holder or queue can move it.

import { call, lockPath } from "./api.js";
import { follow } from "./sse.js";
import { countdown, duration, el, logEvent, when, who } from "./format.js";
import { releaser } from "./release.js";

export function openLock(name, page) {
  const $ = (id) => document.getElementById(id);
  const view = $("lock-view");
  const details = $("lock-details");
  const queueBody = document.querySelector("#queue tbody");
  const events = $("events");
  const failure = $("lock-error");
  const result = $("action-result");
  const listeners = new AbortController();
  let lock = null;
  let since = 0;
  let changes = 0;
  let closed = false;
  let queueReading = false;
  let queueAgain = false;

  $("lock-title").textContent = name;
  document.title = `${name} · lockwarden`;
  details.replaceChildren();
  queueBody.replaceChildren();
  $("queue-summary").textContent = "Loading…";
  events.replaceChildren();
  failure.hidden = true;
  result.hidden = true;
  view.hidden = false;

  function show(newLock) {
    lock = newLock;
    since = performance.now();
    changes += 1;
    renderDetails(lock, since);
  }

  async function readQueue() {
    if (queueReading) {
      queueAgain = true;
      return;
    }
    queueReading = true;
    try {
      do {
        queueAgain = false;
        const before = changes;
        try {
          const answer = await call("GET", lockPath(name) + "/queue");
          if (closed) {
            return;
          }
          // An event that arrived meanwhile is newer than this answer's lock.
          if (changes === before) {
            show(answer.lock);
          }
          renderQueue(answer.queue, answer.truncated, performance.now());
        } catch (error) {
          if (!closed) {
            $("queue-summary").textContent = `Cannot read the queue: ${error.describe()}`;
          }
        }
      } while (queueAgain && !closed);
    } finally {
      queueReading = false;
    }
  }

  function onEvent(event) {
    const data = JSON.parse(event.data);
    show(data.lock);
    logEvent(events, event.event, summary(data.lock));
    readQueue();
    if (event.event !== "snapshot") {
      page.announce(`${name}: ${event.event.replace("_", " ")}`);
    }
  }

  const ask = releaser(listeners.signal, result);

  async function forceRelease() {
    const answer = await call("DELETE", lockPath(name));
    const now = answer.lock;
    return now.state === "held"
      ? `Force released. The lock went to the next waiter, ${now.owner}.`
      : "Force released. The lock is free.";
  }

  $("force-release").addEventListener(
    "click",
    () => {
      const held = lock && lock.owner ? `, now held by ${lock.owner}` : "";
      ask(
        `Release “${name}”${held}, whoever holds it? The holder is told that its lock ` +
          "was revoked; the next caller in the queue, if any, gets it.",
        forceRelease,
      );
    },
    { signal: listeners.signal },
  );

  const stream = follow(
    lockPath(name) + "/events",
    onEvent,
    page.streamState(failure, "Cannot read this lock"),
  );

  return {
    close() {
      closed = true;
      stream.close();
      listeners.abort();
      view.hidden = true;
      document.title = "lockwarden";
    },
  };
}

/** One line about a lock, for the event list. */
function summary(lock) {
  const parts = [];
  if (lock.state === "free") {
    parts.push("free");
  } else if (lock.state === "expired") {
    parts.push(`expired (last held by ${lock.owner})`);
  } else {
    parts.push(`held by ${who(lock.owner, lock.priority)}`);
  }
  if (lock.requestor) {
    parts.push(`${lock.requestor.owner} asks for cleanup`);
  }
  if (lock.waiters > 0) {
    parts.push(`${lock.waiters} waiting`);
  }
  return parts.join("; ");
}

function renderDetails(lock, since) {
  const requestor = lock.requestor;
  const rows = [
    ["state", "State", el("span", { class: "badge " + lock.state }, lock.state)],
    ["owner", "Holder", lock.owner || "—"],
    ["priority", "Priority", String(lock.priority)],
    ["message", "Message", lock.message || "—"],
    ["lease", "Lease left", countdown(lock.remaining_ms, since, lock.state === "held" ? "never expires" : "—")],
    ["lease_ms", "Lease length", lock.lease_ms === null ? "—" : duration(lock.lease_ms)],
    ["acquired_at", "Acquired", when(lock.acquired_at)],
    ["fencing_token", "Fencing token", lock.fencing_token === null ? "—" : String(lock.fencing_token)],
    ["cleanup_ms", "Cleanup window", duration(lock.cleanup_ms)],
    [
      "requestor",
      "Requestor",
      requestor
        ? `${who(requestor.owner, requestor.priority)}${requestor.forceful ? ", forceful" : ""}`
        : "none",
    ],
    [
      "cleanup",
      "Cleanup deadline",
      requestor
        ? el(
            "span",
            {},
            countdown(lock.cleanup_remaining_ms, since, "none"),
            requestor.cleanup_deadline ? ` (at ${when(requestor.cleanup_deadline)})` : "",
          )
        : "—",
    ],
    ["waiters", "Waiters", String(lock.waiters)],
  ];
  document.getElementById("lock-details").replaceChildren(
    ...rows.flatMap(([field, label, value]) => [
      el("dt", {}, label),
      el("dd", { "data-field": field }, value),
    ]),
  );
}

function renderQueue(queue, truncated, since) {
  const rows = queue.map((caller) =>
    el(
      "tr",
      { "data-owner": caller.owner },
      el("td", {}, String(caller.position)),
      el("th", { scope: "row" }, caller.owner),
      el("td", {}, String(caller.priority)),
      el("td", {}, caller.message || ""),
      el("td", {}, caller.requestor ? "requestor (asked for cleanup)" : "waiting"),
      el("td", {}, when(caller.joined_at)),
      el(
        "td",
        {},
        countdown(
          caller.wait_remaining_ms,
          since,
          caller.requestor ? "until the cleanup deadline" : "—",
        ),
      ),
    ),
  );
  document.querySelector("#queue tbody").replaceChildren(...rows);
  const cut = truncated ? " Only the first 1000 are listed." : "";
  document.getElementById("queue-summary").textContent =
    queue.length === 0 ? "Nobody is waiting." : `${queue.length} waiting.${cut}`;
}
