// The browser-drawn steps' state picking (kvlab/viz/js/pick.mjs), run by node's own test runner:
// node --test tests/js/  (tests/test_js.py runs it, skipped where node is missing).
import assert from "node:assert/strict";
import { test } from "node:test";

import { distance, drawable, forWorld, keyOf, nearestToDraw, planDraw, posOf } from "../../kvlab/viz/js/pick.mjs";

const FREE = "free";
const ok = (html) => ({ html, figures: [{ data: [], layout: {} }] });
const refused = { error: true };
const mapOf = (obj) => new Map(Object.entries(obj));

test("a key is the sliders' positions, and distance counts steps on every slider", () => {
  assert.equal(keyOf([3, 0, 12]), "3,0,12");
  assert.deepEqual(posOf("3,0,12"), [3, 0, 12]);
  assert.equal(distance("3,0,12", [1, 0, 14]), 4);
});

test("the nearest drawable state is drawn first", () => {
  const states = mapOf({ "5": ok("5"), "7": ok("7"), "4": ok("4"), "9": ok("9") });
  assert.equal(nearestToDraw(states, new Map(), [5], FREE), "5");
  assert.equal(nearestToDraw(states, new Map([["5", null]]), [5], FREE), "4");
  assert.equal(nearestToDraw(states, new Map([["5", null], ["4", null]]), [5], FREE), "7");
});

test("a state the kernel refused is never drawn, even when it is the nearest", () => {
  const states = mapOf({ "5": refused, "6": ok("6"), "2": ok("2") });
  assert.equal(drawable(states.get("5")), false);
  assert.equal(nearestToDraw(states, new Map(), [5], FREE), "6");
  assert.equal(nearestToDraw(mapOf({ "5": refused }), new Map(), [5], FREE), undefined);
});

test("a state not sent yet, or without figures, is not drawable", () => {
  assert.equal(drawable(undefined), false);
  assert.equal(drawable({ html: "x" }), false);
  assert.equal(drawable(ok("x")), true);
});

test("the free state (a typed value no slider shows) is never drawn ahead", () => {
  const states = mapOf({ [FREE]: ok("free"), "9": ok("9") });
  assert.equal(nearestToDraw(states, new Map(), [0], FREE), "9");
});

test("with the drawn states full, the farthest is dropped for a nearer one, never the shown one", () => {
  const states = mapOf({ "0": ok(), "1": ok(), "2": ok(), "3": ok() });
  const drawn = new Map([["0", null], ["3", null]]);
  assert.deepEqual(planDraw(states, drawn, [1], "1", FREE, 3), { next: "1", drop: null });  // room left
  assert.deepEqual(planDraw(states, drawn, [1], "1", FREE, 2), { next: "1", drop: "3" });
  const shownFar = new Map([["3", null], ["1", null]]);  // the shown "3" is the farthest: "1" goes instead
  assert.deepEqual(planDraw(states, shownFar, [0], "3", FREE, 2), { next: "0", drop: "1" });
});

test("nothing is drawn when every drawn state is nearer than the next one", () => {
  const states = mapOf({ "4": ok(), "5": ok(), "6": ok(), "9": ok() });
  const drawn = new Map([["4", null], ["5", null], ["6", null]]);
  assert.equal(planDraw(states, drawn, [5], "5", FREE, 3), null);
  assert.equal(planDraw(mapOf({ "5": refused }), new Map(), [5], "5", FREE, 3), null);
});

test("a message for another world is dropped", () => {
  const msg = { world: 3, states: {} };
  assert.equal(forWorld(msg, 3), msg);
  assert.equal(forWorld(msg, 4), null);
  assert.equal(forWorld(undefined, 3), null);
});
