// BrowserSteps (browser_steps.py): the states of a panel's sliders, drawn ahead in the browser.
// Assembled by kvlab.viz.plotly_code.esm: slot.mjs, `const VERSION, DRAWN_MAX, FREE_KEY` (browser_steps.py), pick.mjs,
// then this file.
const CONFIG = { displaylogo: false };
const later = (fn) => (globalThis.requestIdleCallback || ((f) => setTimeout(f, 1)))(fn, { timeout: 300 });
const STYLE_HIDDEN = "position:absolute;top:0;left:0;opacity:0;pointer-events:none";
const pause = () => new Promise((resolve) => setTimeout(resolve, 0));
const QUIET_MS = 250;  // states are drawn ahead only this long after the last one was shown

export default () => ({
  async initialize({ model }) {
    await slot(model.get("version")).promise;  // plotly's bundle has loaded, and with it window.Plotly
  },
  render({ model, el }) {
    const Plotly = globalThis.Plotly;
    const readout = document.createElement("div");
    readout.className = "widget-html kvlab-readout";
    const text = document.createElement("div");
    text.className = "widget-html-content";
    readout.append(text);
    const figures = document.createElement("div");
    el.append(readout, figures);
    let states = new Map(), drawn = new Map(), world = -1, waiting = false, closed = false, shownAt = 0, movedTo = null;
    const live = new Set();  // the figures of the states in ``drawn`` (a shown figure outlives its state's entry)

    // where the sliders are: one position per slider, and the key of that state ("3,0,12")
    const here = () => model.get("axes").map((name, a) => model.get("grid")[a].indexOf(model.get("at_" + name)));
    const current = () => (model.get("free") ? FREE_KEY : keyOf(here()));
    const drop = (gd) => { Plotly.purge(gd); gd.remove(); };
    function forget(key) {  // a drawn state no longer wanted: its figures go, but the one on screen stays until replaced
      const job = drawn.get(key);
      drawn.delete(key);
      if (job) job.then((gds) => gds.forEach((gd) => { live.delete(gd); if (!gd.classList.contains("kvlab-shown")) drop(gd); }));
    }
    function reset(w) {  // a new world: every state sent or drawn before is stale
      world = w;
      states = new Map();
      for (const key of [...drawn.keys()]) forget(key);
    }

    // Every drawn state of a figure lies in that figure's place, stacked, transparent and out of the pointer's way;
    // the shown one is opaque and carries the class kvlab-shown. Opacity, not visibility: visibility is inherited,
    // so showing a figure restyled its whole SVG (about 50 ms a key press on a 2-core machine; opacity about 12).
    const places = [];
    function place(k) {
      while (places.length <= k) {
        const div = document.createElement("div");
        div.className = "kvlab-figure";
        div.style.position = "relative";
        figures.append(div);
        places.push(div);
      }
      return places[k];
    }
    const hide = (gd) => { gd.classList.remove("kvlab-shown"); gd.style.opacity = "0"; gd.style.pointerEvents = "none"; };

    async function drawState(key, w) {  // -> the state's figures, drawn hidden in their places
      const gds = [], figs = states.get(key)?.figures || [];  // (draw() is only called for a drawable state)
      for (const [k, fig] of figs.entries()) {
        const gd = document.createElement("div");
        gd.dataset.key = key;
        gd.style.cssText = STYLE_HIDDEN;
        place(k).append(gd);
        const copy = structuredClone(fig);  // plotly writes into what it is given
        await Plotly.newPlot(gd, copy.data, copy.layout, CONFIG);
        gds.push(gd);
        await pause();  // a key press gets in between two figures
        if (w !== world || closed || !drawn.has(key)) { gds.forEach(drop); return []; }
      }
      gds.forEach((gd) => live.add(gd));
      return gds;
    }
    const draw = (key) => { if (!drawn.has(key)) drawn.set(key, drawState(key, world)); return drawn.get(key); };

    function show() {
      const key = current(), w = world, state = states.get(key);
      if (key !== movedTo) { movedTo = key; shownAt = performance.now(); }
      if (key !== FREE_KEY && drawn.has(FREE_KEY)) forget(FREE_KEY);
      if (!drawable(state)) return;  // not sent yet (it is on its way), or refused: the kernel explains it
      if (!drawn.has(key)) text.innerHTML = state.html;  // the readout first, while the figures are drawn
      draw(key).then((gds) => {
        if (w !== world || closed || current() !== key || !gds.length) return;
        text.innerHTML = state.html;
        gds.forEach((gd, k) => {
          const where = place(k), old = where.querySelector(":scope > .kvlab-shown");
          if (old === gd) return;
          where.style.height = gd._fullLayout.height + "px";
          gd.style.opacity = "1";
          gd.style.pointerEvents = "auto";
          gd.classList.add("kvlab-shown");
          if (old) (live.has(old) ? hide(old) : drop(old));
        });
        places.slice(gds.length).forEach((where) => { where.replaceChildren(); where.style.height = "0px"; });
        ahead();
      });
    }

    function ahead() {  // draw the sent states nearest to the shown one while the page is idle, at most DRAWN_MAX
      if (waiting || closed) return;
      const plan = planDraw(states, drawn, here(), current(), FREE_KEY, DRAWN_MAX);
      if (!plan) return;
      const { next, drop } = plan;
      if (drop) forget(drop);  // room made by dropping the farthest drawn state
      waiting = true;
      const wait = shownAt + QUIET_MS - performance.now();  // keys pressed in a row are not held up by a draw
      if (wait > 0) { setTimeout(() => { waiting = false; ahead(); }, wait); return; }
      later(() => {
        waiting = false;
        if (drawable(states.get(next))) draw(next).then(ahead);  // (unless it was dropped or refused meanwhile)
        else ahead();
      });
    }

    function receive(msg) {  // {world, states: {key: state}, keep: [keys] or absent}
      if (!forWorld(msg, model.get("world"))) return;  // sent for values that have changed since
      if (msg.world !== world) reset(msg.world);
      for (const [key, state] of Object.entries(msg.states)) states.set(key, state);
      if (msg.keep) {
        const keep = new Set(msg.keep);
        for (const key of [...states.keys()]) if (!keep.has(key)) { states.delete(key); forget(key); }
      }
      show();
      ahead();
    }

    el.kvlabSteps = () => ({ world, here: current(), states: [...states.keys()], drawn: [...drawn.keys()] });  // tests
    model.on("msg:custom", receive);
    model.on("change:seed", () => receive(model.get("seed")));
    model.on("change:world", () => reset(model.get("world")));
    model.on("change:free", show);
    for (const name of model.get("axes")) model.on("change:at_" + name, show);
    receive(model.get("seed"));  // the world's first state comes with the widget: drawn at once, even mid run-all
    model.send({ want: "states" });  // the kernel answers with every state it holds (a reloaded page too)
    return () => {
      closed = true;
      world = -2;
      for (const key of [...drawn.keys()]) forget(key);
      places.forEach((where) => where.querySelectorAll(".js-plotly-plot").forEach((gd) => Plotly.purge(gd)));
    };
  },
});
