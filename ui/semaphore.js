// A semaphore's page: its permits held out of its limit, each permit's holder (owner,
// fencing token, lease counting down, message), the queue's length and its requestor, the
// events seen since the page opened, and the admin's force release (of one permit, or of
// all), behind a confirmation.
//
// The semaphore's event stream (`GET /v1/semaphores/{name}/events`) keeps it live; each
// event carries the semaphore as it is after it. A server without that stream answers 404:
// the page then reads the semaphore (`GET /v1/semaphores/{name}`) once, and again only when
// Refresh is pressed. It never polls.

import { call, semaphorePath } from "./api.js";
import { follow } from "./sse.js";
import { countdown, el, logEvent, permits, when, who } from "./format.js";
import { releaser } from "./release.js";

export function openSemaphore(name, page) {
  const $ = (id) => document.getElementById(id);
  const view = $("semaphore-view");
  const events = $("semaphore-events");
  const failure = $("semaphore-error");
  const result = $("semaphore-result");
  const refresh = $("semaphore-refresh");
  const listeners = new AbortController();
  const on = (id, type, handler) =>
    $(id).addEventListener(type, handler, { signal: listeners.signal });
  let semaphore = null;
  let closed = false;
  let reads = 0;

  $("semaphore-title").textContent = name;
  document.title = `${name} · lockwarden`;
  $("semaphore-details").replaceChildren();
  $("holders").querySelector("tbody").replaceChildren();
  $("holders-summary").textContent = "Loading…";
  events.replaceChildren();
  failure.hidden = true;
  result.hidden = true;
  refresh.hidden = true;
  view.hidden = false;

  function show(now) {
    semaphore = now;
    const since = performance.now();
    renderDetails(semaphore, since);
    renderHolders(semaphore, since);
  }

  function onEvent(event) {
    const data = JSON.parse(event.data);
    const now = data.semaphore || unused(name);
    show(now);
    const about = data.fencing_token ? `permit ${data.fencing_token}; ` : "";
    logEvent(events, event.event, about + summary(now));
    if (event.event !== "snapshot") {
      page.announce(`${name}: ${event.event.replaceAll("_", " ")}, ${permits(now)} held`);
    }
  }

  // Without the stream: one read, now and at each Refresh.
  async function read() {
    const mine = ++reads;
    try {
      const now = await call("GET", semaphorePath(name));
      // Closed meanwhile, or a later Refresh's answer is the one to show.
      if (closed || mine !== reads) {
        return;
      }
      failure.hidden = true;
      show(now);
      logEvent(events, "read", summary(now));
    } catch (error) {
      if (!closed) {
        failure.textContent = `Cannot read this semaphore: ${error.describe()}`;
        failure.hidden = false;
      }
    }
  }

  const ask = releaser(listeners.signal, result);

  function release(token) {
    return async () => {
      const query = token === null ? "" : `?fencing_token=${token}`;
      const answer = await call("DELETE", semaphorePath(name) + query);
      const now = answer.semaphore;
      if (answer.already_free) {
        return "Nothing to release: no permit was held.";
      }
      const freed = answer.freed === 1 ? "1 permit" : `${answer.freed} permits`;
      return `Force released ${freed}. Now ${permits(now)} held.`;
    };
  }

  on("semaphore-release-all", "click", () => {
    const held = semaphore ? `, now ${permits(semaphore)} held` : "";
    ask(
      `Release every permit of “${name}”${held}? Each holder is told that its permit was ` +
        "revoked; callers in the queue, if any, get them.",
      release(null),
    );
  });
  on("holders", "click", (event) => {
    const button = event.target.closest("button[data-token]");
    if (button) {
      const { token, owner } = button.dataset;
      ask(
        `Release the permit of ${owner} (fencing token ${token}) on “${name}”? The holder ` +
          "is told that its permit was revoked; the next caller in the queue, if any, gets it.",
        release(token),
      );
    }
  });
  on("semaphore-refresh", "click", read);

  const report = page.streamState(failure, "Cannot read this semaphore");
  const stream = follow(semaphorePath(name) + "/events", onEvent, (state, error) => {
    report(state, error);
    if (state === "unavailable") {
      refresh.hidden = false;
      read();
    }
  });

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

/** A semaphore nobody holds or waits for, as the service shows one. */
function unused(name) {
  return { name, limit: null, held: 0, holders: [], requestor: null, waiters: 0 };
}

/** One line about a semaphore, for the event list. */
function summary(semaphore) {
  const parts = [`${permits(semaphore)} held`];
  if (semaphore.holders.length > 0) {
    parts.push("by " + semaphore.holders.map((h) => h.owner).join(", "));
  }
  if (semaphore.requestor) {
    parts.push(`${semaphore.requestor.owner} asks for cleanup`);
  }
  if (semaphore.waiters > 0) {
    parts.push(`${semaphore.waiters} waiting`);
  }
  return parts.join("; ");
}

function renderDetails(semaphore, since) {
  const requestor = semaphore.requestor;
  const asked = semaphore.holders.find((h) => h.cleanup_remaining_ms !== null);
  const rows = [
    ["permits", "Permits held", permits(semaphore)],
    ["limit", "Limit", semaphore.limit === null ? "— (unused)" : String(semaphore.limit)],
    ["waiters", "Waiters", String(semaphore.waiters)],
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
      requestor && asked
        ? el(
            "span",
            {},
            countdown(asked.cleanup_remaining_ms, since, "none"),
            ` (${asked.owner} is asked to give way)`,
          )
        : "—",
    ],
  ];
  document.getElementById("semaphore-details").replaceChildren(
    ...rows.flatMap(([field, label, value]) => [
      el("dt", {}, label),
      el("dd", { "data-field": field }, value),
    ]),
  );
}

function renderHolders(semaphore, since) {
  const rows = semaphore.holders.map((holder) => {
    const token = holder.fencing_token === null ? "—" : String(holder.fencing_token);
    const takeover = holder.takeover_at ? ` (taken over at ${when(holder.takeover_at)})` : "";
    const release =
      holder.fencing_token === null
        ? ""
        : el(
            "button",
            {
              type: "button",
              class: "danger",
              "data-token": holder.fencing_token,
              "data-owner": holder.owner,
              "aria-label": `Force release the permit of ${holder.owner}`,
            },
            "Release…",
          );
    return el(
      "tr",
      { "data-owner": holder.owner, "data-token": token },
      el("th", { scope: "row", class: "c-owner" }, holder.owner),
      el("td", { class: "c-priority" }, String(holder.priority)),
      el("td", { class: "c-token" }, token),
      el("td", { class: "c-message" }, holder.message || ""),
      el("td", { class: "c-acquired" }, when(holder.acquired_at)),
      el(
        "td",
        { class: "c-lease" },
        countdown(holder.remaining_ms, since, "never expires"),
        takeover,
      ),
      el("td", { class: "c-cleanup" }, countdown(holder.cleanup_remaining_ms, since, "—")),
      el("td", { class: "c-action" }, release),
    );
  });
  document.querySelector("#holders tbody").replaceChildren(...rows);
  const free = semaphore.limit === null ? 0 : Math.max(0, semaphore.limit - semaphore.held);
  document.getElementById("holders-summary").textContent =
    semaphore.holders.length === 0
      ? "No permit is held."
      : `${permits(semaphore)} permits held; ${free} free.`;
}
