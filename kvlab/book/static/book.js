// The static edition (kvlab.book): draws every figure with the site's own plotly.js and brings the precomputed
// controls of a panel to life. All data is in the page (<script type="application/json">), so nothing is fetched.
// A panel's states were rendered by the live panel's own render function: moving one control shows the state of
// that value with every other control at its default (the page says so).
(function () {
  "use strict";
  const CONFIG = { displaylogo: false, responsive: true };

  function data(el) {
    return JSON.parse(el.querySelector(":scope > script[type='application/json']").textContent);
  }

  function figureOf(pool, f) {
    return { data: f.data.map((i) => pool[i]), layout: pool[f.layout] };
  }

  // Draw ``fig`` into ``div``; ``div.kvlabFigure`` keeps the figure as the page holds it (the tests compare it with
  // the live render), plotly gets copies (it writes into what it is given).
  function draw(div, fig) {
    div.kvlabFigure = fig;
    const copy = JSON.parse(JSON.stringify(fig));
    return Plotly.react(div, copy.data, copy.layout, CONFIG).then(() => { div.dataset.drawn = "1"; });
  }

  function initPlot(el) {
    const fig = data(el);
    const div = document.createElement("div");
    div.className = "kvlab-plot-area";
    el.appendChild(div);
    return draw(div, fig);
  }

  function initPanel(el) {
    const spec = data(el);
    const readout = el.querySelector(".kvlab-static-readout");
    const plots = Array.from(el.querySelectorAll(".kvlab-plot"));
    const inputs = Array.from(el.querySelectorAll("[data-control]"));
    el.kvlabSpec = spec;

    function show(state) {
      if (state.error) {
        el.classList.add("kvlab-stale");
        el.querySelector(".kvlab-static-message").innerHTML = state.error;
        return Promise.resolve();
      }
      el.classList.remove("kvlab-stale");
      el.querySelector(".kvlab-static-message").innerHTML = "";
      readout.innerHTML = state.html;
      if (window.MathJax && MathJax.Hub) MathJax.Hub.Queue(["Typeset", MathJax.Hub, readout]);
      return Promise.all(state.figures.map((f, i) => plots[i] && draw(plots[i], figureOf(spec.pool, f))));
    }

    function label(input, control) {
      const out = input.parentElement.querySelector(".kvlab-value");
      if (out) out.textContent = control.labels[Number(input.value)];
    }

    inputs.forEach((input) => {
      const control = spec.controls.find((c) => c.name === input.dataset.control);
      label(input, control);
      input.addEventListener("input", () => {
        inputs.forEach((other) => {  // one control at a time: the others go back to their defaults
          if (other === input) return;
          const c = spec.controls.find((x) => x.name === other.dataset.control);
          other.value = String(c.default);
          label(other, c);
        });
        label(input, control);
        el.dataset.busy = "1";
        show(control.states[Number(input.value)]).then(() => { delete el.dataset.busy; });
      });
    });
    return show(spec.shown);
  }

  function start() {
    const jobs = [];
    document.querySelectorAll(".kvlab-static-panel").forEach((el) => jobs.push(initPanel(el)));
    document.querySelectorAll(".kvlab-figure-static").forEach((el) => jobs.push(initPlot(el)));
    Promise.all(jobs).then(() => { window.kvlabFiguresDrawn = true; });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
