// The review inbox's bulk decision texts (static/js/review/bulk-text.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { confirmText, resultText, selectedText } from "../../static/js/review/bulk-text.js";

test("one confirmation says what the action does to every instance", () => {
  assert.match(confirmText("reject", 3), /^Reject 3 open review items\? Each instance fails .* cannot be undone/);
  assert.match(confirmText("approve", 1), /^Approve 1 open review item\? Each instance continues/);
  assert.equal(selectedText(0), "No item selected");
  assert.equal(selectedText(2), "2 items selected");
});

test("the result names what was decided and each item that was not", () => {
  assert.equal(resultText({ action: "approve", decided: [1, 2], failed: [] }), "Approved 2 items.");
  assert.equal(resultText({ action: "reject", decided: [], failed: [{ item: 7, message: "needs group 'finance'" }] }),
    "Rejected 0 items. 1 item was not decided: #7 needs group 'finance'");
});
