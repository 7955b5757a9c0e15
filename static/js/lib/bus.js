/* A small synchronous event bus, pure (tests/js/bus.test.mjs). A page's modules form a one-way chain
 * (tests/js/editor_imports.test.mjs): a lower module never imports the one above that reacts to it;
 * it emits a named event, and the page's main.js wires who listens.
 *
 *   const bus = createBus(["graph:changed"]);
 *   const off = bus.on("graph:changed", ({ fromHistory }) => ...);
 *   bus.emit("graph:changed", { fromHistory: false });
 *
 * The event names are declared up front: emitting or listening to an undeclared name throws, so a
 * typo fails at once instead of an event that nobody hears. Listeners run in the order they were
 * added; one that throws does not stop the others (the error is rethrown after they have run). */

export function createBus(names) {
  const listeners = new Map((names || []).map((name) => [name, []]));
  const known = (name) => {
    if (!listeners.has(name)) throw new Error(`unknown event '${name}' (declared: ${[...listeners.keys()].join(", ")})`);
    return listeners.get(name);
  };
  return {
    /** Call `fn(payload)` on every `name` event; returns a function that removes it. */
    on(name, fn) {
      if (typeof fn !== "function") throw new TypeError(`a listener of '${name}' must be a function`);
      const list = known(name);
      list.push(fn);
      return () => {
        const at = list.indexOf(fn);
        if (at >= 0) list.splice(at, 1);
      };
    },
    /** Run the listeners of `name` now, in order; returns how many ran. */
    emit(name, payload) {
      const list = known(name).slice(); // a listener added or removed meanwhile acts from the next emit
      let failure = null;
      list.forEach((fn) => {
        try {
          fn(payload);
        } catch (err) {
          if (failure === null) failure = err;
        }
      });
      if (failure !== null) throw failure;
      return list.length;
    },
    /** The number of listeners of `name`. */
    count(name) {
      return known(name).length;
    },
  };
}
