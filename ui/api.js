// Calls to lockwarden's JSON API, with the token typed into the page.
//
// The token lives in sessionStorage only: it is gone when the tab closes, is never written
// into a URL (so never into history, logs or a Referer), and is sent only as
// `Authorization: Bearer`, and only when one is set, so a server without API tokens is read
// without any.

const TOKEN_KEY = "lockwarden.token";

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) {
    sessionStorage.setItem(TOKEN_KEY, value);
  } else {
    sessionStorage.removeItem(TOKEN_KEY);
  }
}

/** The headers of every call: `accept`, and the bearer token when one is set. */
export function headers(accept) {
  const result = { Accept: accept };
  const bearer = token();
  if (bearer) {
    result.Authorization = "Bearer " + bearer;
  }
  return result;
}

/** A refusal from the API (its stable `code` and message), or no answer at all (status 0). */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }

  /** One line for a person: "403 forbidden: force release needs the admin token". */
  describe() {
    return this.status ? `${this.status} ${this.code}: ${this.message}` : this.message;
  }
}

/** The error a non-2xx response carries, in the API's one error shape where it has it. */
export async function errorOf(response) {
  const text = await response.text().catch(() => "");
  let detail = null;
  try {
    detail = JSON.parse(text).error;
  } catch (_) {
    // Not the API's JSON (a proxy's page, say): shown as text below.
  }
  if (detail && detail.code) {
    return new ApiError(response.status, detail.code, detail.message || "");
  }
  return new ApiError(response.status, "http_" + response.status, text.slice(0, 200));
}

/** Sends one call; resolves to the JSON body of a 2xx, rejects with an ApiError. */
export async function call(method, path, signal) {
  let response;
  try {
    response = await fetch(path, {
      method,
      headers: headers("application/json"),
      signal,
      cache: "no-store",
      credentials: "omit",
    });
  } catch (error) {
    if (error.name === "AbortError") {
      throw error;
    }
    throw new ApiError(0, "unreachable", "the service cannot be reached");
  }
  if (!response.ok) {
    throw await errorOf(response);
  }
  return response.json();
}

/** The path of a lock: its name is one path segment, so "/" travels as %2F. */
export function lockPath(name) {
  return "/v1/locks/" + encodeURIComponent(name);
}

/** The path of a semaphore, its name one path segment as a lock's is. */
export function semaphorePath(name) {
  return "/v1/semaphores/" + encodeURIComponent(name);
}

/** The path of an election, its name one path segment as a lock's is. */
export function electionPath(name) {
  return "/v1/elections/" + encodeURIComponent(name);
}
