/* Where nodes go on a canvas, pure (tests/js/arrange.test.mjs): a layered layout of a graph by its
 * edges, the viewport that shows a graph at a readable size, and a free spot for a new node.
 *
 * Boxes are centred, as cytoscape places nodes: {id, x, y, w, h}. The editor's canvas (editor/canvas.js)
 * and lib/graph.js read the positions and sizes off cytoscape and apply what these functions return.
 */

// ------------------------------------------------------------------------------- layered layout

/** The edges that close a cycle (a loop's way back), found by a depth-first walk from the nodes in
 * `order` (sources first): laying them out backwards would put a loop's body after its exit. */
function backEdges(order, out) {
  const back = new Set();
  const mark = {}; // 1: on the walk's path, 2: done
  const walk = (id) => {
    mark[id] = 1;
    (out[id] || []).forEach(({ target, index }) => {
      if (mark[target] === 1) back.add(index);
      else if (!mark[target]) walk(target);
    });
    mark[id] = 2;
  };
  order.forEach((id) => { if (!mark[id]) walk(id); });
  return back;
}

/** Each node's layer: the longest path to it from a source over the forward edges; nodes marked
 * `last` (the end nodes) in the layer after every other node, where a flow is read to end. */
function layers(nodes, edges) {
  const ids = nodes.map((n) => n.id);
  const known = new Set(ids);
  const usable = edges.map((e, index) => ({ source: e.source, target: e.target, index }))
    .filter((e) => known.has(e.source) && known.has(e.target) && e.source !== e.target);
  const out = {};
  const indegree = {};
  ids.forEach((id) => { out[id] = []; indegree[id] = 0; });
  usable.forEach((e) => { out[e.source].push(e); indegree[e.target] += 1; });
  // Walk from the sources in the graph's order, then from whatever a cycle left unreached.
  const back = backEdges([...ids.filter((id) => indegree[id] === 0), ...ids], out);
  const forward = usable.filter((e) => !back.has(e.index));
  const rank = {};
  ids.forEach((id) => { rank[id] = 0; });
  // Longest path by relaxation in topological order (Kahn's): the forward edges form a DAG.
  const inForward = {};
  ids.forEach((id) => { inForward[id] = 0; });
  forward.forEach((e) => { inForward[e.target] += 1; });
  const queue = ids.filter((id) => inForward[id] === 0);
  const fwdOut = {};
  ids.forEach((id) => { fwdOut[id] = []; });
  forward.forEach((e) => fwdOut[e.source].push(e.target));
  for (let i = 0; i < queue.length; i += 1) {
    const id = queue[i];
    fwdOut[id].forEach((t) => {
      rank[t] = Math.max(rank[t], rank[id] + 1);
      inForward[t] -= 1;
      if (inForward[t] === 0) queue.push(t);
    });
  }
  const lastIds = new Set(nodes.filter((n) => n.last).map((n) => n.id));
  const others = ids.filter((id) => !lastIds.has(id));
  if (lastIds.size && others.length) {
    const after = Math.max(...others.map((id) => rank[id])) + 1;
    lastIds.forEach((id) => { rank[id] = Math.max(rank[id], after); });
  }
  return { rank, forward };
}

/** The nodes of each layer in an order that keeps edges short and uncrossed: first appearance, then
 * a few sweeps placing each node at the mean position of its neighbours in the layers before (after). */
function orderLayers(ids, rank, forward) {
  const count = Math.max(0, ...ids.map((id) => rank[id])) + 1;
  const byLayer = Array.from({ length: count }, () => []);
  ids.forEach((id) => byLayer[rank[id]].push(id));
  const preds = {};
  const succs = {};
  ids.forEach((id) => { preds[id] = []; succs[id] = []; });
  forward.forEach((e) => { preds[e.target].push(e.source); succs[e.source].push(e.target); });
  const place = {};
  const renumber = () => byLayer.forEach((layer) => layer.forEach((id, i) => {
    place[id] = layer.length > 1 ? i / (layer.length - 1) : 0.5;
  }));
  renumber();
  const sweep = (layer, neighbours) => {
    const keyed = layer.map((id, i) => {
      const ns = neighbours[id];
      return { id, i, key: ns.length ? ns.reduce((s, n) => s + place[n], 0) / ns.length : place[id] };
    });
    keyed.sort((a, b) => a.key - b.key || a.i - b.i);
    return keyed.map((k) => k.id);
  };
  for (let round = 0; round < 4; round += 1) {
    for (let l = 1; l < count; l += 1) { byLayer[l] = sweep(byLayer[l], preds); renumber(); }
    for (let l = count - 2; l >= 0; l -= 1) { byLayer[l] = sweep(byLayer[l], succs); renumber(); }
  }
  return { byLayer, preds };
}

/** Positions along one layer: each node as near as it can be to `wanted` (its predecessors' mean),
 * in order, at least `gap` apart edge to edge; then the layer is shifted so the misses even out. */
function spread(order, size, wanted, gap) {
  const at = [];
  order.forEach((id, i) => {
    const min = i === 0 ? -Infinity : at[i - 1] + (size[order[i - 1]] + size[id]) / 2 + gap;
    at.push(Math.max(wanted[id], min));
  });
  const shift = order.reduce((s, id, i) => s + (wanted[id] - at[i]), 0) / (order.length || 1);
  return Object.fromEntries(order.map((id, i) => [id, at[i] + shift]));
}

/** A layered layout: nodes [{id, w, h, last?}], edges [{source, target, room?}] -> {id: {x, y}}.
 * options: direction "LR" (layers left to right, the default) or "TB"; nodeSep (px between the
 * nodes of a layer); rankSep (the least px between two layers). An edge's `room` is what its label
 * needs along the layering direction: the gap its label sits in is widened to it, the others stay
 * narrow (one wide label does not spread the whole graph). Deterministic. */
export function layered(nodes, edges, options) {
  const opts = Object.assign({ direction: "LR", nodeSep: 40, rankSep: 50 }, options || {});
  if (!nodes.length) return {};
  const tb = opts.direction === "TB";
  const ids = nodes.map((n) => n.id);
  const along = {}; // a node's extent in the layering direction
  const across = {}; // and within its layer
  nodes.forEach((n) => { along[n.id] = tb ? n.h : n.w; across[n.id] = tb ? n.w : n.h; });
  const { rank, forward } = layers(nodes, edges || []);
  const { byLayer, preds } = orderLayers(ids, rank, forward);
  // A label sits halfway along its edge: in the gap after the layer before its middle.
  const gaps = byLayer.map(() => opts.rankSep);
  forward.forEach((e) => {
    const room = (edges[e.index] && edges[e.index].room) || 0;
    if (rank[e.target] <= rank[e.source]) return; // into an end node pushed last: no gap of its own
    const at = rank[e.source] + Math.floor((rank[e.target] - rank[e.source] - 1) / 2);
    if (room > gaps[at]) gaps[at] = room;
  });
  const gapAfter = (l) => gaps[l];
  // Layers: each as thick as its thickest node, its nodes centred on the layer's middle line.
  const middle = [];
  let edge = 0;
  byLayer.forEach((layer, l) => { // every layer holds a node: a longest path passes through each
    const thick = Math.max(0, ...layer.map((id) => along[id]));
    middle.push(edge + thick / 2);
    edge += thick + gapAfter(l);
  });
  const cross = {};
  byLayer.forEach((layer) => {
    const wanted = {};
    layer.forEach((id) => {
      const placed = preds[id].filter((p) => cross[p] !== undefined);
      wanted[id] = placed.length ? placed.reduce((s, p) => s + cross[p], 0) / placed.length : 0;
    });
    Object.assign(cross, spread(layer, across, wanted, opts.nodeSep));
  });
  const out = {};
  ids.forEach((id) => {
    const a = middle[rank[id]];
    const c = cross[id];
    out[id] = tb ? { x: Math.round(c), y: Math.round(a) } : { x: Math.round(a), y: Math.round(c) };
  });
  return out;
}

// ------------------------------------------------------------------------------- boxes

/** The box around boxes: {x1, y1, x2, y2, w, h} (null for none). */
export function boundsOf(boxes) {
  if (!boxes.length) return null;
  const x1 = Math.min(...boxes.map((b) => b.x - b.w / 2));
  const y1 = Math.min(...boxes.map((b) => b.y - b.h / 2));
  const x2 = Math.max(...boxes.map((b) => b.x + b.w / 2));
  const y2 = Math.max(...boxes.map((b) => b.y + b.h / 2));
  return { x1, y1, x2, y2, w: x2 - x1, h: y2 - y1 };
}

/** Whether two centred boxes overlap once each is grown by `margin` on every side. */
export function overlaps(a, b, margin) {
  const m = margin || 0;
  return Math.abs(a.x - b.x) < (a.w + b.w) / 2 + m && Math.abs(a.y - b.y) < (a.h + b.h) / 2 + m;
}

/** Whether the segment p -> q crosses the centred box (Liang-Barsky clipping). */
export function segmentHitsBox(p, q, box) {
  const x1 = box.x - box.w / 2;
  const x2 = box.x + box.w / 2;
  const y1 = box.y - box.h / 2;
  const y2 = box.y + box.h / 2;
  const dx = q.x - p.x;
  const dy = q.y - p.y;
  let t0 = 0;
  let t1 = 1;
  const clip = [[-dx, p.x - x1], [dx, x2 - p.x], [-dy, p.y - y1], [dy, y2 - p.y]];
  for (const [pp, qq] of clip) {
    if (pp === 0) {
      if (qq < 0) return false;
    } else {
      const t = qq / pp;
      if (pp < 0) { if (t > t1) return false; if (t > t0) t0 = t; } else { if (t < t0) return false; if (t < t1) t1 = t; }
    }
  }
  return true;
}

// ------------------------------------------------------------------------------- viewport

/** The zoom and pan that show `bounds` (model coordinates) in a `width` x `height` canvas: the whole
 * of it when that needs no zoom below `minZoom` (text stays readable), never above `maxZoom` (a small
 * graph is not blown up). A graph too big to show whole at `minZoom` is shown from its start (its
 * left or top edge, at `padding`) and centred on any axis where it fits: the rest is a pan away. */
export function viewportFor(bounds, width, height, options) {
  const opts = Object.assign({ padding: 30, minZoom: 0.9, maxZoom: 1.2 }, options || {});
  if (!bounds) return { zoom: 1, pan: { x: width / 2, y: height / 2 } };
  const room = (size) => Math.max(1, size - 2 * opts.padding);
  const whole = Math.min(room(width) / Math.max(bounds.w, 1), room(height) / Math.max(bounds.h, 1));
  const zoom = Math.max(opts.minZoom, Math.min(opts.maxZoom, whole));
  const axis = (lo, size, span) => (size * zoom <= room(span)
    ? (span - size * zoom) / 2 - lo * zoom // fits: centred
    : opts.padding - lo * zoom); // does not: its start at the padding
  return { zoom, pan: { x: axis(bounds.x1, bounds.w, width), y: axis(bounds.y1, bounds.h, height) } };
}

// ------------------------------------------------------------------------------- a new node's spot

/** Where a new node of size {w, h} goes: a spot that overlaps no node (`boxes`, with `gap` around)
 * and that no edge (`segments`: [{p, q}] between node centres) runs through, inside `view`
 * ({x1, y1, x2, y2}, model coordinates) when there is one. First the spots after the `near` box (the
 * selected node: the next step of a flow, to its right, or below for "TB"), then a grid over the view
 * from its centre outwards; with no free spot in view, the first free one right of everything. */
export function freeSpot(size, boxes, segments, view, options) {
  const opts = Object.assign({ gap: 30, near: null, direction: "LR" }, options || {});
  const clear = (p, strict) => {
    const box = { x: p.x, y: p.y, w: size.w, h: size.h };
    if (boxes.some((b) => overlaps(box, b, opts.gap))) return false;
    if (!strict) return true;
    const grown = { x: p.x, y: p.y, w: size.w + opts.gap, h: size.h + opts.gap };
    return !segments.some((s) => segmentHitsBox(s.p, s.q, grown));
  };
  const inView = (p) => !view || (p.x - size.w / 2 >= view.x1 && p.x + size.w / 2 <= view.x2
    && p.y - size.h / 2 >= view.y1 && p.y + size.h / 2 <= view.y2);
  const candidates = [];
  const stepX = size.w + opts.gap * 2;
  const stepY = size.h + opts.gap * 2;
  if (opts.near) {
    const n = opts.near;
    const tb = opts.direction === "TB";
    const next = tb ? { x: n.x, y: n.y + (n.h + size.h) / 2 + opts.gap * 2 }
      : { x: n.x + (n.w + size.w) / 2 + opts.gap * 2, y: n.y };
    [0, 1, -1, 2, -2].forEach((k) => candidates.push(tb ? { x: next.x + k * stepX, y: next.y }
      : { x: next.x, y: next.y + k * stepY }));
  }
  if (view) {
    const centre = { x: (view.x1 + view.x2) / 2, y: (view.y1 + view.y2) / 2 };
    const cols = Math.max(1, Math.floor((view.x2 - view.x1) / stepX));
    const rows = Math.max(1, Math.floor((view.y2 - view.y1) / stepY));
    const x0 = centre.x - ((cols - 1) * stepX) / 2;
    const y0 = centre.y - ((rows - 1) * stepY) / 2;
    const grid = [];
    for (let r = 0; r < rows; r += 1) {
      for (let c = 0; c < cols; c += 1) grid.push({ x: x0 + c * stepX, y: y0 + r * stepY });
    }
    const dist = (p) => Math.hypot(p.x - centre.x, p.y - centre.y);
    grid.sort((a, b) => dist(a) - dist(b) || a.y - b.y || a.x - b.x);
    candidates.push(...grid);
  }
  const round = (p) => ({ x: Math.round(p.x), y: Math.round(p.y) });
  for (const strict of [true, false]) {
    const found = candidates.find((p) => inView(p) && clear(p, strict));
    if (found) return round(found);
  }
  // Nothing free in view: right of everything, level with the view's centre (or the graph's).
  const all = boundsOf(boxes);
  const y = view ? (view.y1 + view.y2) / 2 : (all ? all.y1 + all.h / 2 : 0);
  let p = { x: all ? all.x2 + opts.gap * 2 + size.w / 2 : 0, y };
  while (!clear(p, false)) p = { x: p.x + stepX, y };
  return round(p);
}
