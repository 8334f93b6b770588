// The page's one copy of plotly's widget code, per plotly version: a promise that code.mjs resolves once the bundle
// has loaded (figure.mjs and steps.mjs wait for it). Every widget module starts with this file
// (kvlab.viz.plotly_code.esm).
const KEY = Symbol.for("kvlab.plotly-widget-code");
function slot(version) {
  const all = (globalThis[KEY] ??= {});
  if (!all[version]) {
    let resolve, reject;
    const promise = new Promise((a, b) => { resolve = a; reject = b; });
    all[version] = { promise, resolve, reject, started: false };
  }
  return all[version];
}
