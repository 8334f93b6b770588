// PlotlyCode (plotly_code.py): loads plotly's gzip-compressed widget bundle once per page.
// Assembled by kvlab.viz.plotly_code.esm: slot.mjs, `const QUIET = [...]` (QUIET_METHODS), then this file.
async function load(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  const url = URL.createObjectURL(new Blob([await new Response(stream).text()], { type: "text/javascript" }));
  try { return quiet(await import(url)).default; } finally { URL.revokeObjectURL(url); }
}
// After every redraw plotly's view diffs the whole drawn figure against its data and sends the result to the
// kernel (about 13 KiB a heatmap figure), which PanelFigureWidget ignores: skipped here, in the browser.
function quiet(module) {
  const view = module.FigureView && module.FigureView.prototype;
  for (const name of QUIET) if (view && typeof view[name] === "function") view[name] = function () {};
  return module;
}
export default () => ({
  initialize({ model }) {
    const s = slot(model.get("version"));
    if (!s.started) { s.started = true; load(model.get("code")).then(s.resolve, s.reject); }
  },
});
