// Building DOM nodes and showing durations, times and countdowns.
//
// Text from the service (owners, messages) is only ever set as text, never parsed as HTML.
// A countdown starts from a `*_remaining_ms` the service measured on its own clock when it
// answered, and runs on this page's monotonic clock (performance.now) from the moment the
// answer arrived: the browser's wall clock is never compared with the service's.

/** `el("td", {class: "x"}, "text", child)`: an element with attributes and children. */
export function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (value !== null && value !== undefined && value !== false) {
      node.setAttribute(key, value === true ? "" : String(value));
    }
  }
  for (const child of children) {
    if (child !== null && child !== undefined) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

/** "0.4 s", "12.5 s", "4 min 05 s", "3 h 02 min". */
export function duration(ms) {
  if (ms <= 0) {
    return "0 s";
  }
  if (ms < 60_000) {
    return (ms / 1000).toFixed(1) + " s";
  }
  const seconds = Math.floor(ms / 1000);
  const pad = (n) => String(n).padStart(2, "0");
  if (seconds < 3600) {
    return `${Math.floor(seconds / 60)} min ${pad(seconds % 60)} s`;
  }
  return `${Math.floor(seconds / 3600)} h ${pad(Math.floor(seconds / 60) % 60)} min`;
}

/**
 * A span that counts down from `ms` (measured by the service when it answered, at
 * performance.now() `since`), or `fallback` text when there is nothing to count.
 */
export function countdown(ms, since, fallback) {
  if (ms === null || ms === undefined) {
    return el("span", { class: "muted" }, fallback);
  }
  const node = el("span", {
    class: "countdown",
    "data-countdown": "",
    "data-from": ms,
    "data-since": since,
  });
  paint(node, performance.now());
  return node;
}

function paint(node, now) {
  const left = Math.max(0, Number(node.dataset.from) - (now - Number(node.dataset.since)));
  const shown = Math.round(left);
  // `data-ms` is the value on screen, in milliseconds, for tools that read the page.
  if (node.dataset.ms !== String(shown)) {
    node.dataset.ms = shown;
    node.textContent = duration(left);
    node.classList.toggle("over", left <= 0);
  }
}

/** Moves every countdown on the page on to now. */
export function tick() {
  const now = performance.now();
  for (const node of document.querySelectorAll("[data-countdown]")) {
    paint(node, now);
  }
}

/** A service timestamp (RFC 3339), shown in the browser's time zone. Display only. */
export function when(iso) {
  if (!iso) {
    return "—";
  }
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? iso : at.toLocaleString();
}

/** Sorts lock names as the service does: part by part, so "a" < "a/b" < "a-b". */
export function byName(a, b) {
  const x = a.split("/");
  const y = b.split("/");
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) {
      return x[i] < y[i] ? -1 : 1;
    }
  }
  return x.length - y.length;
}

/** "owner (priority N)". */
export function who(owner, priority) {
  return `${owner} (priority ${priority})`;
}

/** "2/3": a semaphore's live permits out of its limit ("—" while it is unused). */
export function permits(semaphore) {
  return `${semaphore.held}/${semaphore.limit === null ? "—" : semaphore.limit}`;
}

/** The most entries a page's list of recent events keeps. */
const MAX_EVENTS = 50;

/** Adds an event at the top of `list` (an `<ol>`): its time, its type and `text`. */
export function logEvent(list, type, text) {
  const time = new Date().toLocaleTimeString();
  list.prepend(
    el(
      "li",
      { "data-type": type },
      el("span", { class: "event-time" }, time),
      " ",
      el("strong", {}, type.replaceAll("_", " ")),
      " — ",
      text,
    ),
  );
  while (list.children.length > MAX_EVENTS) {
    list.lastElementChild.remove();
  }
}
