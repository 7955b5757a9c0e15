/* Where an edge must bend so it does not run through another node: cytoscape draws an edge from node
 * to node in a straight line (or a bundle's curve), ignoring the route dagre worked out, so an edge
 * that skips a layer (node_a -> done past node_b) would cross node_b and hide behind it with its label.
 * Pure geometry (tests/js/edge-route.test.mjs); graph.js applies it as an unbundled-bezier bend.
 *
 *   bendFor({x, y}, {x, y}, [{x, y, w, h}, ...]) -> 0 (straight) or the control point's distance
 *   from the straight line (signed: cytoscape's control-point-distances).
 */

const MARGIN = 22;    // px kept between a bent edge and the node it goes around
const MOST = 600;     // px: a bend never reaches further out than this

/** Whether the segment p->q passes through the box {x, y, w, h} (centre and size), grown by `pad`. */
export function segmentHitsBox(p, q, box, pad) {
  const left = box.x - box.w / 2 - pad;
  const right = box.x + box.w / 2 + pad;
  const top = box.y - box.h / 2 - pad;
  const bottom = box.y + box.h / 2 + pad;
  // Liang-Barsky clipping: does any part of the segment lie inside the box?
  let t0 = 0;
  let t1 = 1;
  const dx = q.x - p.x;
  const dy = q.y - p.y;
  const checks = [[-dx, p.x - left], [dx, right - p.x], [-dy, p.y - top], [dy, bottom - p.y]];
  for (const [pk, qk] of checks) {
    if (pk === 0) {
      if (qk < 0) return false;
    } else {
      const r = qk / pk;
      if (pk < 0) { if (r > t1) return false; if (r > t0) t0 = r; } else { if (r < t0) return false; if (r < t1) t1 = r; }
    }
  }
  return t0 < t1;
}

/** The bend (signed distance of a single control point from the middle of p->q) that takes the curve
 * around every box it would cross, on whichever side needs less; 0 when it crosses none. */
export function bendFor(p, q, boxes) {
  const dx = q.x - p.x;
  const dy = q.y - p.y;
  const length = Math.hypot(dx, dy);
  if (length < 1) return 0;
  const nx = -dy / length;
  const ny = dx / length;
  const hit = boxes.filter((b) => segmentHitsBox(p, q, b, 4)).map((b) => {
    const t = Math.min(0.95, Math.max(0.05, ((b.x - p.x) * dx + (b.y - p.y) * dy) / (length * length)));
    return {
      t,
      s: (b.x - p.x) * nx + (b.y - p.y) * ny,         // the box centre's signed offset from the line
      half: Math.abs(nx) * b.w / 2 + Math.abs(ny) * b.h / 2, // the box's half extent across the line
    };
  });
  if (!hit.length) return 0;
  // A quadratic curve with its control point d out is 2t(1-t)d away from the line at t.
  const need = (side) => Math.max(...hit.map((h) => (h.half + MARGIN + side * h.s) / (2 * h.t * (1 - h.t))));
  const plus = need(1);
  const minus = need(-1);
  const d = Math.min(MOST, Math.min(plus, minus));
  return Math.round(plus <= minus ? d : -d);
}
