// Follows one of lockwarden's event streams (Server-Sent Events) over fetch.
//
// Not EventSource: it cannot send an Authorization header, and the token must not travel in
// the URL. So the stream is read here, parsed as the SSE format says, and reopened after a
// drop with `Last-Event-ID`, from which the service replays what was missed (or starts
// again with a snapshot).

import { ApiError, errorOf, headers } from "./api.js";

const FIRST_RETRY_MS = 500;
const LAST_RETRY_MS = 5000;

/**
 * Opens `path` and calls `onEvent({event, id, data})` for each event, and `onState(state,
 * error)` as the connection goes "connecting", "live", "retrying" (with the error),
 * "paused" (the tab is hidden), "refused" (401/403/400: it stops, since retrying cannot
 * help until the token changes), or "unavailable" (404: this server has no such stream, an
 * older one say; it stops, and the view falls back to reading). Returns a handle whose
 * close() ends it.
 *
 * A hidden tab lets its stream go, and resumes it (with `Last-Event-ID`) when shown again:
 * a browser keeps at most 6 HTTP/1.1 connections to one server, and every open stream
 * holds one, so dashboards left in background tabs would otherwise stall a seventh.
 */
export function follow(path, onEvent, onState) {
  let lastId = "";
  let closed = false;
  let delay = FIRST_RETRY_MS;
  let connection = null;
  let shown = null;

  function visibility() {
    if (document.hidden) {
      if (connection) {
        connection.abort();
      }
    } else if (shown) {
      shown();
    }
  }
  document.addEventListener("visibilitychange", visibility);

  // Resolves to "refused" (refused or unavailable: not retried) or "aborted" (closed, or the
  // tab was hidden); throws when the stream fails or ends.
  async function connectOnce(signal) {
    const request = headers("text/event-stream");
    if (lastId) {
      request["Last-Event-ID"] = lastId;
    }
    let response;
    try {
      response = await fetch(path, {
        headers: request,
        signal,
        cache: "no-store",
        credentials: "omit",
      });
    } catch (error) {
      if (error.name === "AbortError") {
        return "aborted";
      }
      throw new ApiError(0, "unreachable", "the service cannot be reached");
    }
    if (!response.ok) {
      const error = await errorOf(response);
      if ([400, 401, 403].includes(response.status)) {
        onState("refused", error);
        return "refused";
      }
      if (response.status === 404) {
        onState("unavailable", error);
        return "refused";
      }
      throw error;
    }
    onState("live");
    delay = FIRST_RETRY_MS;
    try {
      await readEvents(response.body, (event) => {
        lastId = event.id;
        onEvent(event);
      });
    } catch (error) {
      if (error.name === "AbortError") {
        return "aborted";
      }
      throw error;
    }
    throw new ApiError(0, "stream_ended", "the event stream ended");
  }

  async function run() {
    while (!closed) {
      if (document.hidden) {
        onState("paused");
        await new Promise((resolve) => {
          shown = resolve;
        });
        shown = null;
        continue;
      }
      connection = new AbortController();
      onState("connecting");
      try {
        if ((await connectOnce(connection.signal)) === "refused") {
          return;
        }
      } catch (error) {
        if (closed) {
          return;
        }
        onState("retrying", error);
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, LAST_RETRY_MS);
      }
    }
  }

  run();
  return {
    close() {
      closed = true;
      document.removeEventListener("visibilitychange", visibility);
      if (connection) {
        connection.abort();
      }
      if (shown) {
        shown();
      }
    },
  };
}

/** Reads an SSE body to its end, calling `dispatch` for each complete event. */
async function readEvents(body, dispatch) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event = { event: "", id: "", data: [] };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        return;
      }
      buffer += decoder.decode(value, { stream: true });
      // Lines end in "\n" or "\r\n" (the service sends "\n"); the last piece may be half
      // a line, kept for the next chunk.
      const lines = buffer.split("\n");
      buffer = lines.pop();
      for (const raw of lines) {
        const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
        if (line === "") {
          if (event.data.length > 0) {
            dispatch({
              event: event.event || "message",
              id: event.id,
              data: event.data.join("\n"),
            });
          }
          event = { event: "", id: event.id, data: [] };
          continue;
        }
        if (line.startsWith(":")) {
          continue; // a comment: the heartbeat
        }
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) {
          value = value.slice(1);
        }
        if (field === "event") {
          event.event = value;
        } else if (field === "data") {
          event.data.push(value);
        } else if (field === "id" && !value.includes("\0")) {
          event.id = value;
        }
      }
    }
  } finally {
    reader.releaseLock();
  }
}
