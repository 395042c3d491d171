// How plotly draws in this page (plotly.js is loaded before the assets: app.py).
//
// 1. WebGL at the screen's own resolution. plotly renders its WebGL canvases at a pixel ratio of 2
//    unless told otherwise (plotGlPixelRatio), so on an ordinary screen every span is filled at
//    four times its pixels: a 500k-span overview took 0.88 s to draw instead of 0.58 s in a
//    software-GL browser, and every zoom paid it again. A graph that sets no ratio gets the
//    screen's (window.devicePixelRatio: 2 on a high-DPI screen, as before).
// 2. A graph is re-drawn only when its size changes. dcc.Graph calls Plotly.Plots.resize whenever
//    its box changes size, and plotly then re-draws the whole figure, even when the figure already
//    has the size it would get: as when a figure's own height grows the box (the timeline
//    replacing its "loading…" placeholder), which drew a 500k-span timeline twice (+0.4-0.9 s).
//    The check is plotly's own autosize rule: a dimension the figure does not fix follows the
//    box, and a change under 2 px is none.
(function () {
  function withScreenRatio(config) {
    const c = Object.assign({}, config || {});
    if (c.plotGlPixelRatio === undefined) c.plotGlPixelRatio = window.devicePixelRatio || 1;
    return c;
  }

  function setup() {
    const P = window.Plotly;
    if (!P || !P.Plots || P.__photonTraceSetup) return;
    P.__photonTraceSetup = true;
    for (const fn of ['newPlot', 'react']) {   // (gd, data, layout, config) or (gd, {data, layout, config})
      const draw = P[fn];
      P[fn] = function (gd, data, layout, config) {
        if (data && !Array.isArray(data) && typeof data === 'object') {
          return draw.call(this, gd, Object.assign({}, data, {config: withScreenRatio(data.config)}));
        }
        return draw.call(this, gd, data, layout, withScreenRatio(config));
      };
    }
    const resize = P.Plots.resize;
    P.Plots.resize = function (gd) {
      const el = typeof gd === 'string' ? document.getElementById(gd) : gd;
      const fl = el && el._fullLayout, layout = el && el.layout;
      if (fl && layout && el.offsetParent !== null) {   // drawn and visible
        const style = window.getComputedStyle(el);
        const w = parseFloat(style.width), h = parseFloat(style.height);
        const wChanged = !layout.width && !(Math.abs(fl.width - w) <= 1);
        const hChanged = !layout.height && !(Math.abs(fl.height - h) <= 1);
        if (!wChanged && !hChanged) return Promise.resolve(el);
      }
      return resize.apply(this, arguments);
    };
  }
  setup();
  window.addEventListener('load', setup);    // should plotly.js ever come after the assets
})();
