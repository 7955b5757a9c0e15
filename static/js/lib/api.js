/* The one API client every page uses: JSON in and out, the CSRF token on writes, the session cookie.
 *
 * A failed call throws an ApiError whose message is the server's own (`{"message": ...}`, what every
 * endpoint answers with a 4xx), with the status and the whole answer (`data`: e.g. a validation's
 * `errors`) for callers that branch on them. A network failure is an ApiError with status 0.
 */

export class ApiError extends Error {
  constructor(status, data, message) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.data = data;
  }
}

/** The page's CSRF token: the hidden form field Django renders (the logout form has one on every page
 * for a logged-in user), else a `data-csrf` attribute (the CSRF cookie may be HttpOnly). */
export function csrfToken() {
  const input = document.querySelector("input[name=csrfmiddlewaretoken]");
  if (input && input.value) return input.value;
  const tagged = document.querySelector("[data-csrf]");
  return tagged ? tagged.dataset.csrf : "";
}

export async function request(method, url, body) {
  const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  if (method !== "GET" && method !== "HEAD") init.headers["X-CSRFToken"] = csrfToken();
  let response;
  try {
    response = await fetch(url, init);
  } catch (exc) {
    throw new ApiError(0, {}, "the server did not answer: " + exc.message);
  }
  let data;
  try {
    data = await response.json();
  } catch (exc) {
    data = { message: `the server answered ${response.status} without JSON` };
  }
  if (!response.ok) {
    const message = (data && data.message) || `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, data || {}, message);
  }
  return data;
}

export const getJSON = (url) => request("GET", url);
export const postJSON = (url, body) => request("POST", url, body === undefined ? {} : body);
