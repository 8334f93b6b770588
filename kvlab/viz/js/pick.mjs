// Which state the browser shows and which it draws next: pure functions of the states held, so node can test them
// (tests/js/steps.test.mjs). A key is the sliders' positions on their grids joined by commas ("3,0,12"); a state
// is {html, figures} or {error: true} for a value the kernel refused (the kernel explains it; the browser keeps
// the last drawn state on screen and never draws a refused one).

export const keyOf = (pos) => pos.join(",");
export const posOf = (key) => key.split(",").map(Number);
export const distance = (key, pos) => posOf(key).reduce((d, p, a) => d + Math.abs(p - pos[a]), 0);

// A state the browser can draw: sent, and not refused.
export const drawable = (state) => Boolean(state && !state.error && state.figures);

// A message for this world, or null: one sent for values that have changed since is dropped.
export const forWorld = (msg, world) => (msg && msg.world === world ? msg : null);

// The sent, drawable, not yet drawn state nearest to position ``pos`` (the free state is never drawn ahead);
// undefined when there is none.
export function nearestToDraw(states, drawn, pos, freeKey) {
  return [...states.keys()]
    .filter((key) => key !== freeKey && !drawn.has(key) && drawable(states.get(key)))
    .sort((a, b) => distance(a, pos) - distance(b, pos))[0];
}

// What to draw next, with at most ``max`` states drawn: {next, drop} (drop: a drawn state farther than next, to make
// room; null when there is room), or null when nothing should be drawn (nothing left, or every drawn state is
// nearer than the next one).
export function planDraw(states, drawn, pos, shown, freeKey, max) {
  const next = nearestToDraw(states, drawn, pos, freeKey);
  if (next === undefined) return null;
  if (drawn.size < max) return { next, drop: null };
  const far = [...drawn.keys()].filter((key) => key !== shown && key !== freeKey)
    .sort((a, b) => distance(b, pos) - distance(a, pos))[0];
  if (far === undefined || distance(far, pos) <= distance(next, pos)) return null;
  return { next, drop: far };
}
