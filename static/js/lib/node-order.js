/* Keyboard travel over a graph's nodes, pure (tests/js/node-order.test.mjs): nodes in reading order
 * (left to right, then top to bottom, as the layouts draw a flow), and the next or previous one from
 * the current. */

/** nodes: [{id, x, y}] -> ids in reading order (columns within 40 px count as one). */
export function readingOrder(nodes) {
  return nodes.slice().sort((a, b) => (Math.abs(a.x - b.x) > 40 ? a.x - b.x : a.y - b.y) || a.id.localeCompare(b.id))
    .map((n) => n.id);
}

/** The id `step` places after `current` (-1: before), wrapping around; the first (or last) when
 * `current` is none of them. null for no nodes. */
export function stepFrom(ids, current, step) {
  if (!ids.length) return null;
  const at = ids.indexOf(current);
  if (at < 0) return step >= 0 ? ids[0] : ids[ids.length - 1];
  return ids[(at + step + ids.length) % ids.length];
}
