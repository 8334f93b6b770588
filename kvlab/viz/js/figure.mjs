// PanelFigureWidget (widgets.py): a small loader that waits for the page's plotly bundle and delegates to it.
// Assembled by kvlab.viz.plotly_code.esm: slot.mjs, `const VERSION = "<plotly version>"`, then this file.
export default () => {
  let figure;
  return {
    async initialize(ctx) {
      figure = (await slot(VERSION).promise)();
      return figure.initialize?.(ctx);
    },
    render(ctx) { return figure.render(ctx); },
  };
};
