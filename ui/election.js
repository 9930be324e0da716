// An election's page: its leader (candidate, value, term, the lease counting down), or "no
// leader"; the candidates waiting and a requestor asking the leader to hand over; and the
// events seen since the page opened.
//
// The election's event stream (`GET /v1/elections/{name}/events`) keeps it live: each event
// (`elected`, `proclaimed`, `no_leader`, `cleanup_requested`, `cleanup_cancelled`) carries
// the election as it is after it, and a lease that runs out is told with nobody calling.

import { electionPath } from "./api.js";
import { follow } from "./sse.js";
import { countdown, el, logEvent, when, who } from "./format.js";

export function openElection(name, page) {
  const $ = (id) => document.getElementById(id);
  const view = $("election-view");
  const events = $("election-events");
  const failure = $("election-error");

  $("election-title").textContent = name;
  document.title = `${name} · lockwarden`;
  $("election-details").replaceChildren();
  events.replaceChildren();
  failure.hidden = true;
  view.hidden = false;

  function onEvent(event) {
    const election = JSON.parse(event.data).election;
    renderDetails(election, performance.now());
    logEvent(events, event.event, summary(election));
    if (event.event !== "snapshot") {
      page.announce(`${name}: ${event.event.replaceAll("_", " ")}, ${summary(election)}`);
    }
  }

  const stream = follow(
    electionPath(name) + "/events",
    onEvent,
    page.streamState(failure, "Cannot read this election"),
  );

  return {
    close() {
      stream.close();
      view.hidden = true;
      document.title = "lockwarden";
    },
  };
}

/** One line about an election, for the event list and the announcement. */
function summary(election) {
  const leader = election.leader;
  const parts = [
    leader ? `led by ${leader.candidate} (term ${leader.term})` : "no leader",
  ];
  if (leader && leader.value) {
    parts.push(`value “${leader.value}”`);
  }
  if (election.requestor) {
    parts.push(`${election.requestor.owner} asks to take over`);
  }
  if (election.candidates > 0) {
    parts.push(`${election.candidates} waiting`);
  }
  return parts.join("; ");
}

function renderDetails(election, since) {
  const leader = election.leader;
  const requestor = election.requestor;
  const none = "—";
  const rows = [
    [
      "leader",
      "Leader",
      leader ? leader.candidate : el("span", { class: "badge free" }, "no leader"),
    ],
    ["value", "Value", leader ? leader.value || none : none],
    ["term", "Term", leader && leader.term !== null ? String(leader.term) : none],
    ["priority", "Priority", leader ? String(leader.priority) : none],
    ["lease", "Lease left", leader ? countdown(leader.remaining_ms, since, "never expires") : none],
    ["elected_at", "Elected", leader ? when(leader.elected_at) : none],
    ["expires_at", "Lease ends", leader ? when(leader.expires_at) : none],
    ["candidates", "Candidates waiting", String(election.candidates)],
    [
      "requestor",
      "Requestor",
      requestor
        ? el(
            "span",
            {},
            `${who(requestor.owner, requestor.priority)} asks the leader to hand over`,
            requestor.cleanup_deadline ? ` by ${when(requestor.cleanup_deadline)}` : "",
          )
        : "none",
    ],
  ];
  document.getElementById("election-details").replaceChildren(
    ...rows.flatMap(([field, label, value]) => [
      el("dt", {}, label),
      el("dd", { "data-field": field }, value),
    ]),
  );
}
