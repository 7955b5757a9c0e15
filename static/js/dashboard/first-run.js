/* A newcomer's dashboard: "Run with its defaults" starts an example (POST with an empty input, which
 * the server fills from the example's declared defaults) and opens the new instance's live page. */

import { byId as $ } from "../lib/dom.js";
import { postJSON } from "../lib/api.js";

document.querySelectorAll("#first-run .run-example").forEach((button) => {
  button.addEventListener("click", async () => {
    const error = $("first-run-error");
    error.hidden = true;
    button.disabled = true;
    button.textContent = "Starting…";
    try {
      const instance = await postJSON(button.dataset.url, { input: {} });
      location.href = `/instances/${instance.id}/`;
    } catch (err) {
      error.textContent = `Could not start ${button.closest(".example").dataset.slug}: ${err.message}`;
      error.hidden = false;
      button.disabled = false;
      button.textContent = "▶ Run with its defaults";
    }
  });
});
