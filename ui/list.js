// The list: every held or expired lock under a prefix, kept live by the prefix's event
// stream (`GET /v1/events?prefix=`).
//
// The stream's snapshot comes from a listing, which does not read queues: it shows no
// waiters and no requestor. So each lock the snapshot names is read once more on its own
// (`GET /v1/locks/{name}`, a few at a time) before its waiters and requestor are shown;
// until then they show "…". Every later event carries the lock as the service read it,
// queue included, and replaces what the row shows.

import { call, lockPath } from "./api.js";
import { follow } from "./sse.js";
import { byName, countdown, el, who } from "./format.js";

/** The most rows shown; a larger prefix is cut, and the page says so. */
const MAX_ROWS = 500;
/** Reads of single locks in flight at once. */
const READS_IN_FLIGHT = 4;

export function openList(prefix, page) {
  const view = document.getElementById("list-view");
  const body = document.querySelector("#locks tbody");
  const summary = document.getElementById("list-summary");
  const failure = document.getElementById("list-error");
  // name → { lock, since, complete, changes, row, painted }
  const locks = new Map();
  const pending = [];
  let reading = 0;
  let truncated = false;
  let closed = false;

  document.getElementById("prefix").value = prefix;
  body.replaceChildren();
  failure.hidden = true;
  summary.textContent = "Loading…";
  view.hidden = false;

  function put(lock, complete) {
    const known = locks.get(lock.name);
    const entry = known || { changes: 0, row: null };
    entry.lock = lock;
    entry.since = performance.now();
    entry.complete = complete;
    entry.changes += 1;
    locks.set(lock.name, entry);
    return entry;
  }

  function forget(name) {
    const entry = locks.get(name);
    if (entry && entry.row) {
      entry.row.remove();
    }
    locks.delete(name);
  }

  // Reads the lock on its own, for what the stream's snapshot could not show. An event that
  // arrives meanwhile is newer than the answer: the answer is then dropped.
  function complete(name) {
    pending.push(name);
    pump();
  }

  function pump() {
    while (!closed && reading < READS_IN_FLIGHT && pending.length > 0) {
      const name = pending.shift();
      const entry = locks.get(name);
      if (!entry || entry.complete) {
        continue;
      }
      const changes = entry.changes;
      reading += 1;
      call("GET", lockPath(name))
        .then((lock) => {
          const now = locks.get(name);
          if (closed || !now || now.changes !== changes) {
            return;
          }
          if (lock.state === "free") {
            forget(name);
          } else {
            put(lock, true);
          }
          render();
        })
        .catch(() => {
          // Left as "…"; the next event about this lock fills it in.
        })
        .finally(() => {
          reading -= 1;
          pump();
        });
    }
  }

  function onEvent(event) {
    const data = JSON.parse(event.data);
    if (event.event === "snapshot") {
      for (const name of [...locks.keys()]) {
        forget(name);
      }
      truncated = data.truncated;
      for (const lock of data.locks) {
        put(lock, false);
      }
      render();
      [...locks.keys()].sort(byName).slice(0, MAX_ROWS).forEach(complete);
      return;
    }
    const lock = data.lock;
    if (lock.state === "free") {
      forget(lock.name);
    } else {
      // An `expired` event may come from a lock only the snapshot told of: its queue was
      // not read then either.
      const entry = put(lock, event.event !== "expired");
      if (!entry.complete) {
        complete(lock.name);
      }
    }
    render();
    page.announce(`${lock.name}: ${event.event.replace("_", " ")}`);
  }

  function render() {
    const names = [...locks.keys()].sort(byName);
    const shown = names.slice(0, MAX_ROWS);
    let previous = null;
    for (const name of shown) {
      const entry = locks.get(name);
      if (!entry.row) {
        entry.row = newRow(name);
        entry.painted = null;
      }
      // Only rows whose lock changed are filled again.
      if (entry.painted !== entry.changes) {
        fill(entry);
        entry.painted = entry.changes;
      }
      // Rows are kept (and so is keyboard focus on a link) and moved only when out of order.
      const expected = previous ? previous.nextSibling : body.firstChild;
      if (expected !== entry.row) {
        body.insertBefore(entry.row, expected);
      }
      previous = entry.row;
    }
    for (const name of names.slice(MAX_ROWS)) {
      const entry = locks.get(name);
      if (entry.row) {
        entry.row.remove();
        entry.row = null;
      }
    }
    const where = prefix ? ` whose name starts with “${prefix}”` : "";
    const cut = names.length > MAX_ROWS ? ` Showing the first ${MAX_ROWS}: narrow the prefix.` : "";
    const more = truncated ? " The service listed only the first 10000." : "";
    summary.textContent =
      names.length === 0
        ? `No held or expired locks${where}.`
        : `${names.length} held or expired lock${names.length === 1 ? "" : "s"}${where}.${cut}${more}`;
  }

  const stream = follow(
    "/v1/events?prefix=" + encodeURIComponent(prefix),
    onEvent,
    page.streamState(failure, "Cannot list locks", () => {
      summary.textContent = "";
    }),
  );

  return {
    close() {
      closed = true;
      stream.close();
      view.hidden = true;
    },
  };
}

function newRow(name) {
  const link = el("a", { href: "#/lock/" + encodeURIComponent(name) }, name);
  const cells = ["state", "owner", "priority", "message", "lease", "requestor", "cleanup", "waiters"];
  return el(
    "tr",
    { "data-lock": name },
    el("th", { scope: "row", class: "c-name" }, link),
    ...cells.map((c) => el("td", { class: "c-" + c })),
  );
}

function fill(entry) {
  const { lock, since, complete } = entry;
  const cell = (name) => entry.row.querySelector(".c-" + name);
  const unknown = () => el("span", { class: "muted", title: "reading…" }, "…");
  cell("state").replaceChildren(el("span", { class: "badge " + lock.state }, lock.state));
  cell("owner").replaceChildren(lock.owner || "—");
  cell("priority").replaceChildren(String(lock.priority));
  cell("message").replaceChildren(lock.message ? el("span", { title: lock.message }, lock.message) : "");
  const never = lock.state === "held" ? "never expires" : "—";
  cell("lease").replaceChildren(countdown(lock.remaining_ms, since, never));
  const requestor = lock.requestor;
  if (!complete) {
    cell("requestor").replaceChildren(unknown());
    cell("cleanup").replaceChildren(unknown());
    cell("waiters").replaceChildren(unknown());
    return;
  }
  cell("requestor").replaceChildren(requestor ? who(requestor.owner, requestor.priority) : "—");
  cell("cleanup").replaceChildren(
    requestor ? countdown(lock.cleanup_remaining_ms, since, "none") : "—",
  );
  cell("waiters").replaceChildren(String(lock.waiters));
}
