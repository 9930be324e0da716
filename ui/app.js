// The dashboard's entry point: the token form, the switch between kinds (locks, semaphores,
// elections), the router between their lists (`#/`, `#/semaphores`, `#/elections`, each
// with `?prefix=P`) and the page of one (`#/lock/NAME`, `#/semaphore/NAME`,
// `#/election/NAME`), the connection indicator, the live region that announces changes,
// and the clock that moves countdowns.
//
// Routes live in the fragment, so the server serves one page for all of them and no name
// or prefix needs a server route; the token is never part of any of them.

import { setToken, token } from "./api.js";
import { tick } from "./format.js";
import { openCatalog } from "./catalog.js";
import { openElection } from "./election.js";
import { openList } from "./list.js";
import { openLock } from "./lock.js";
import { openSemaphore } from "./semaphore.js";

const $ = (id) => document.getElementById(id);
let current = null;
let currentKind = "locks";
let announceTimer = null;

/** Each kind: its list's route and title, and how one of it opens. */
const KINDS = {
  locks: { list: "#/", title: "Locks", one: "lock", open: openLock },
  semaphores: {
    list: "#/semaphores",
    title: "Semaphores",
    one: "semaphore",
    open: openSemaphore,
  },
  elections: { list: "#/elections", title: "Elections", one: "election", open: openElection },
};

const page = {
  /** Says `text` to screen readers (politely; a burst of changes says only the last). */
  announce(text) {
    clearTimeout(announceTimer);
    announceTimer = setTimeout(() => {
      $("announce").textContent = text;
    }, 250);
  },

  /** Shows the state of the page's event stream. */
  connection(state, error) {
    const node = $("connection");
    node.dataset.state = state;
    node.textContent = {
      connecting: "Connecting…",
      live: "Live: changes appear as they happen.",
      retrying: `Connection lost (${error ? error.describe() : ""}); reconnecting…`,
      refused: `Refused: ${error ? error.describe() : ""}`,
      paused: "Paused while this tab is hidden; it catches up when shown.",
      unavailable: "Not live: this server has no event stream for it; Refresh reads it again.",
      static:
        "Not live: this list was read when it opened; Refresh reads it again. " +
        "Each one's own page is live.",
    }[state];
  },

  /**
   * What a view's event stream reports its state to: the connection line, and the view's
   * alert `failure` ("what: why") while the stream is refused; then `onRefused` too.
   */
  streamState(failure, what, onRefused) {
    return (state, error) => {
      page.connection(state, error);
      if (state === "refused") {
        failure.textContent = `${what}: ${error.describe()}`;
        failure.hidden = false;
        if (onRefused) {
          onRefused();
        }
      } else if (state === "live") {
        failure.hidden = true;
      }
    };
  },
};

/** What the fragment names: `{kind, name}` for one's page, `{kind, prefix}` for a list. */
function parse(hash) {
  for (const [kind, spec] of Object.entries(KINDS)) {
    const one = `#/${spec.one}/`;
    if (hash.startsWith(one)) {
      return { kind, name: decodeURIComponent(hash.slice(one.length)) };
    }
  }
  const mark = hash.indexOf("?");
  const path = mark < 0 ? hash : hash.slice(0, mark);
  const prefix = new URLSearchParams(mark < 0 ? "" : hash.slice(mark + 1)).get("prefix") || "";
  for (const [kind, spec] of Object.entries(KINDS)) {
    if (path === spec.list) {
      return { kind, prefix };
    }
  }
  return { kind: "locks", prefix: path === "" || path === "#" ? prefix : "" };
}

/** Marks the kind shown in the switch, and shows its table in the list. */
function showKind(kind, listed) {
  currentKind = kind;
  for (const link of document.querySelectorAll(".kinds a")) {
    if (link.dataset.kind === kind) {
      link.setAttribute("aria-current", listed ? "page" : "true");
    } else {
      link.removeAttribute("aria-current");
    }
  }
  for (const other of Object.keys(KINDS)) {
    $(other).hidden = other !== kind;
  }
  $("list-title").textContent = KINDS[kind].title;
  $("list-refresh").hidden = kind === "locks";
}

function route() {
  if (current) {
    current.close();
  }
  const at = parse(location.hash);
  showKind(at.kind, at.name === undefined);
  if (at.name !== undefined) {
    current = KINDS[at.kind].open(at.name, page);
  } else if (at.kind === "locks") {
    current = openList(at.prefix, page);
  } else {
    current = openCatalog(at.kind, at.prefix, page);
  }
}

function showToken() {
  $("token-state").textContent = token()
    ? "A token is set for this tab."
    : "No token set: calls are sent without one.";
  $("token-forget").disabled = !token();
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = $("token");
  setToken(input.value.trim());
  input.value = "";
  showToken();
  // Streams opened with the old token (or refused without one) start again with this one.
  route();
});

$("token-forget").addEventListener("click", () => {
  setToken("");
  showToken();
  route();
  $("token").focus();
});

$("prefix-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const prefix = $("prefix").value;
  const list = KINDS[currentKind].list;
  location.hash = prefix ? `${list}?prefix=${encodeURIComponent(prefix)}` : list;
});

window.addEventListener("hashchange", () => {
  route();
  // Moving to another view moves the keyboard and the screen reader to its heading.
  const at = parse(location.hash);
  $(at.name === undefined ? "list-title" : KINDS[at.kind].one + "-title").focus();
});

showToken();
route();
// Countdowns are repainted 4 times a second; a hidden tab is not painted (nor, in most
// browsers, woken this often).
setInterval(() => {
  if (!document.hidden) {
    tick();
  }
}, 250);
