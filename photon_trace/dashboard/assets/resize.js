// A graph is re-drawn only when its size changes. dcc.Graph calls Plotly.Plots.resize whenever its
// box changes size, and plotly then re-draws the whole figure, even when the figure already has
// the size it would get: as when a figure's own height grows the box (the timeline replacing its
// "loading…" placeholder), which drew a 500k-span timeline twice (+0.4-0.9 s in software GL).
// The check is plotly's own autosize rule: a dimension the figure does not fix follows the box,
// and a change under 2 px is none.
(function () {
  function guard() {
    const P = window.Plotly;
    if (!P || !P.Plots || P.Plots.resize.sameSizeGuard) return;
    const resize = P.Plots.resize;
    const guarded = function (gd) {
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
    guarded.sameSizeGuard = true;
    P.Plots.resize = guarded;
  }
  guard();                                   // plotly.js is loaded before the assets (app.py)
  window.addEventListener('load', guard);    // and should it ever come later
})();
