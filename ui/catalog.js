// The lists of semaphores and of elections: each one under a prefix, in name order, from
// `GET /v1/semaphores?prefix=` (or `/v1/elections?prefix=`).
//
// Neither kind has a prefix stream, and following each row's own stream would hold one of
// the browser's 6 connections per row. So a list is read when it opens and again only when
// Refresh is pressed: it never polls, and an idle page costs the service nothing. The page
// of one semaphore or election (click its name) follows its stream and is live.

import { call } from "./api.js";
import { countdown, el, permits, who } from "./format.js";

/** The most rows read and shown; a larger prefix is cut, and the page says so. */
const MAX_ROWS = 500;

const KINDS = {
  semaphores: {
    path: "/v1/semaphores",
    route: "#/semaphore/",
    singular: "semaphore",
    cells: ["permits", "holders", "lease", "requestor", "waiters"],
    fill: fillSemaphore,
  },
  elections: {
    path: "/v1/elections",
    route: "#/election/",
    singular: "election",
    cells: ["leader", "value", "term", "lease", "requestor", "candidates"],
    fill: fillElection,
  },
};

export function openCatalog(kind, prefix, page) {
  const spec = KINDS[kind];
  const $ = (id) => document.getElementById(id);
  const view = $("list-view");
  const body = document.querySelector(`#${kind} tbody`);
  const summary = $("list-summary");
  const failure = $("list-error");
  const listeners = new AbortController();
  let reading = null;
  let closed = false;

  $("prefix").value = prefix;
  body.replaceChildren();
  failure.hidden = true;
  view.hidden = false;

  async function read() {
    if (reading) {
      reading.abort();
    }
    const controller = new AbortController();
    reading = controller;
    summary.textContent = "Reading…";
    let answer;
    try {
      const query = new URLSearchParams({ prefix, limit: String(MAX_ROWS) });
      answer = await call("GET", `${spec.path}?${query}`, controller.signal);
    } catch (error) {
      if (closed || error.name === "AbortError") {
        return;
      }
      failure.textContent = `Cannot list ${kind}: ${error.describe()}`;
      failure.hidden = false;
      summary.textContent = "";
      page.connection("refused", error);
      return;
    }
    // An answer that arrives after the view closed (or after a newer read began) is dropped.
    if (closed || reading !== controller) {
      return;
    }
    const since = performance.now();
    const items = answer[kind];
    body.replaceChildren(...items.map((item) => row(spec, item, since)));
    failure.hidden = true;
    page.connection("static");
    const where = prefix ? ` under “${prefix}”` : "";
    const cut = answer.next_cursor ? ` Only the first ${MAX_ROWS} are listed.` : "";
    const at = new Date().toLocaleTimeString();
    const noun = items.length === 1 ? spec.singular : kind;
    summary.textContent = `${items.length} ${noun}${where}, read at ${at}.${cut}`;
    page.announce(summary.textContent);
  }

  $("list-refresh").addEventListener("click", read, { signal: listeners.signal });
  read();

  return {
    close() {
      closed = true;
      listeners.abort();
      if (reading) {
        reading.abort();
      }
      view.hidden = true;
    },
  };
}

function row(spec, item, since) {
  const link = el("a", { href: spec.route + encodeURIComponent(item.name) }, item.name);
  const tr = el(
    "tr",
    { "data-name": item.name },
    el("th", { scope: "row", class: "c-name" }, link),
    ...spec.cells.map((c) => el("td", { class: "c-" + c })),
  );
  spec.fill((name) => tr.querySelector(".c-" + name), item, since);
  return tr;
}

/** The holder whose lease ends first, of those whose lease ends at all. */
function firstToEnd(holders) {
  return holders
    .filter((h) => h.remaining_ms !== null && h.remaining_ms !== undefined)
    .reduce((first, h) => (first && first.remaining_ms <= h.remaining_ms ? first : h), null);
}

function fillSemaphore(cell, semaphore, since) {
  cell("permits").replaceChildren(
    el("span", { title: "permits held out of the limit" }, permits(semaphore)),
  );
  const owners = semaphore.holders.map((h) => h.owner).join(", ");
  cell("holders").replaceChildren(owners ? el("span", { title: owners }, owners) : "—");
  const first = firstToEnd(semaphore.holders);
  const never = semaphore.holders.length > 0 ? "never expires" : "—";
  cell("lease").replaceChildren(
    first
      ? el("span", {}, countdown(first.remaining_ms, since, "—"), ` (${first.owner})`)
      : never,
  );
  const requestor = semaphore.requestor;
  cell("requestor").replaceChildren(requestor ? who(requestor.owner, requestor.priority) : "—");
  cell("waiters").replaceChildren(String(semaphore.waiters));
}

function fillElection(cell, election, since) {
  const leader = election.leader;
  if (leader) {
    cell("leader").replaceChildren(leader.candidate);
    cell("value").replaceChildren(
      leader.value ? el("span", { title: leader.value }, leader.value) : "",
    );
    cell("term").replaceChildren(leader.term === null ? "—" : String(leader.term));
    cell("lease").replaceChildren(countdown(leader.remaining_ms, since, "never expires"));
  } else {
    cell("leader").replaceChildren(el("span", { class: "badge free" }, "no leader"));
    for (const name of ["value", "term", "lease"]) {
      cell(name).replaceChildren("—");
    }
  }
  const requestor = election.requestor;
  cell("requestor").replaceChildren(requestor ? who(requestor.owner, requestor.priority) : "—");
  cell("candidates").replaceChildren(String(election.candidates));
}
