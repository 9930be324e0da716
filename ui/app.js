// The dashboard's entry point: the token form, the router between the list (`#/`,
// `#/?prefix=P`) and a lock's page (`#/lock/NAME`), the connection indicator, the live
// region that announces changes, and the clock that moves countdowns.
//
// Routes live in the fragment, so the server serves one page for all of them and no lock
// name or prefix needs a server route; the token is never part of any of them.

import { setToken, token } from "./api.js";
import { tick } from "./format.js";
import { openList } from "./list.js";
import { openLock } from "./lock.js";

const $ = (id) => document.getElementById(id);
let current = null;
let announceTimer = null;

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

function route() {
  if (current) {
    current.close();
  }
  const hash = location.hash;
  if (hash.startsWith("#/lock/")) {
    current = openLock(decodeURIComponent(hash.slice("#/lock/".length)), page);
  } else {
    const query = new URLSearchParams(hash.startsWith("#/?") ? hash.slice(3) : "");
    current = openList(query.get("prefix") || "", page);
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
  location.hash = prefix ? "#/?prefix=" + encodeURIComponent(prefix) : "#/";
});

window.addEventListener("hashchange", () => {
  route();
  // Moving to another view moves the keyboard and the screen reader to its heading.
  const heading = location.hash.startsWith("#/lock/") ? "lock-title" : "list-title";
  $(heading).focus();
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
