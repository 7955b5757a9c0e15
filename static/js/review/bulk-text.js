/* The review inbox's bulk decision, its words: the one confirmation asked before deciding many items,
 * and what happened after. Pure (tests/js/review-bulk.test.mjs). */

const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

export function selectedText(n) {
  return n ? `${plural(n, "item", "items")} selected` : "No item selected";
}

/** The confirmation: what the action does to each instance (rejecting fails it and compensates). */
export function confirmText(action, n) {
  const items = plural(n, "open review item", "open review items");
  if (action === "reject") {
    return `Reject ${items}? Each instance fails and the compensations of its finished steps run. This cannot be undone.`;
  }
  return `Approve ${items}? Each instance continues with the default grants (a human task with its defaults).`;
}

/** After the server answered {action, decided: [ids], failed: [{item, message}]}. */
export function resultText(result) {
  const verb = result.action === "reject" ? "Rejected" : "Approved";
  const parts = [`${verb} ${plural(result.decided.length, "item", "items")}.`];
  if (result.failed.length) {
    parts.push(`${plural(result.failed.length, "item was", "items were")} not decided: `
      + result.failed.map((f) => `#${f.item} ${f.message}`).join("; "));
  }
  return parts.join(" ");
}
