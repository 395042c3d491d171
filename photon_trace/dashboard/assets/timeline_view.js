// The timeline's view in the page: whether a zoom or pan needs a new drawing from the server
// (needsData, used by the zoom_view clientside callback), the overview strip's box, and the
// labels inside spans wide enough for them. Everything here reads what plotly drew
// (gd.layout.meta, set by timeline/draw.py:draw) and asks the server nothing.
(function () {
  const MAX_COARSER = 2;    // zoomed out this much: spans drawn exact would be under half a pixel
  const MAX_FINER = 2;      // zoomed in this much: pixel columns of summed spans show 2 px wide
  const LABEL_MIN_PX = 28;  // a span narrower than this on screen has no label
  const TWO_LINES_PX = 26;  // a band this tall gets its name and duration on two lines
  const CLICK_SPAN = 1;     // timeline/draw.py: a hover trace of one category's spans

  function needsData(meta, lo, hi) {
    if (!meta || !meta.data_range || !meta.px_s || !meta.full_range) return true;
    const [dlo, dhi] = meta.data_range, [flo, fhi] = meta.full_range;
    const eps = (hi - lo) * 1e-9;
    if (lo < dlo - eps && dlo > flo + eps) return true;   // beyond what was drawn, and the trace goes on
    if (hi > dhi + eps && dhi < fhi - eps) return true;
    const ratio = (hi - lo) / meta.width_px / meta.px_s;  // a pixel now, in pixels of the drawing
    if (ratio > MAX_COARSER) return true;
    return ratio < 1 / MAX_FINER && (meta.mode === 'aggregate' || meta.in_columns > 0);
  }

  function overviewBox(range) {
    // after the timeline's next frame: the box is not worth delaying the view the user asked for
    requestAnimationFrame(() => setTimeout(() => {
      const ov = document.querySelector('#overview .js-plotly-plot');
      const tpl = ov && ov.layout && ov.layout.meta && ov.layout.meta.view_box;
      if (!tpl || !window.Plotly) return;
      window.Plotly.relayout(ov, {shapes: range ? [Object.assign({}, tpl, {x0: range[0], x1: range[1]})] : []});
    }, 0));
  }

  function duration(s) {   // as panels/figures.py:fmt_duration writes it
    const ns = s * 1e9, a = Math.abs(ns);
    for (const [scale, unit] of [[1e9, 's'], [1e6, 'ms'], [1e3, 'µs']]) {
      if (a >= scale) return a < 100 * scale ? `${+(ns / scale).toPrecision(3)} ${unit}` : `${Math.round(ns / scale)} ${unit}`;
    }
    return `${Math.round(ns)} ns`;
  }

  const decoder = document.createElement('textarea');
  function shown(text) {   // a figure's text is Plotly markup (timeline/text.py:plain): back to the words
    decoder.innerHTML = String(text).replace(/<br>/g, ' ');
    return decoder.value;
  }

  function ink(colour) {   // dark text on a light fill, white on a dark one
    const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(colour || '');
    if (!m) return '#111';
    const [r, g, b] = m.slice(1).map(h => parseInt(h, 16) / 255);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5 ? '#111' : '#fff';
  }

  function labels(gd) {
    const fl = gd._fullLayout, meta = gd.layout && gd.layout.meta;
    const box = gd.querySelector('.svg-container');
    if (!fl || !fl.xaxis || !fl.yaxis || !box) return;
    let layer = box.querySelector(':scope > .pt-labels');
    if (!layer) {
      layer = document.createElement('div');
      layer.className = 'pt-labels';
      const top = box.querySelectorAll(':scope > svg.main-svg');   // under the hover layer's svg
      box.insertBefore(layer, top.length > 1 ? top[top.length - 1] : null);
    }
    const xa = fl.xaxis, ya = fl.yaxis;
    Object.assign(layer.style, {left: xa._offset + 'px', top: ya._offset + 'px', width: xa._length + 'px',
                                height: ya._length + 'px'});
    layer.textContent = '';
    if (!meta || !meta.curves || !meta.bands || meta.mode !== 'exact') return;
    const fills = {};
    for (const t of gd._fullData) if (t.fill === 'toself' && t.legendgroup) fills[t.legendgroup] = t.fillcolor;
    const [lo, hi] = xa.range.map(Number);
    const full = Math.max(...meta.bands.map(([b0, b1]) => b1 - b0));
    // Every span on screen, then each one's label in the widest part of it that no span nested
    // in it (a host wait, a sub-phase: half a lane, drawn over it) covers.
    const spans = [], nested = {};
    meta.curves.forEach((c, ti) => {
      const t = gd._fullData[ti];
      if (!c || c[0] !== CLICK_SPAN || !t || t.visible !== true || !t.customdata) return;
      const [b0, b1] = meta.bands[c[1]];
      const inner = b1 - b0 < full - 1e-9;
      for (let k = 0; k < t.customdata.length; k++) {
        const cd = t.customdata[k], x0 = cd[5], x1 = cd[5] + cd[3];
        if (x1 <= lo || x0 >= hi) continue;
        const s = {t, k, set: c[1], p0: xa.l2p(Math.max(x0, lo)), p1: xa.l2p(Math.min(x1, hi)), band: b1 - b0,
                   lane: Math.round(-t.y[k] + (b0 + b1) / 2), inner};
        spans.push(s);
        if (inner) (nested[s.lane] = nested[s.lane] || []).push([s.p0, s.p1]);
      }
    });
    const frag = document.createDocumentFragment();
    for (const s of spans) {
      let [p0, p1] = [s.p0, s.p1];
      if (!s.inner && nested[s.lane]) [p0, p1] = widestGap(p0, p1, nested[s.lane]);
      if (p1 - p0 < LABEL_MIN_PX) continue;
      const {t, k} = s, cd = t.customdata[k];
      {
        const bandPx = Math.abs(ya.l2p(s.band) - ya.l2p(0));
        const el = document.createElement('div');
        el.className = 'pt-label';
        const yc = ya.l2p(t.y[k]);
        const lines = bandPx >= TWO_LINES_PX ? 2 : 1;
        Object.assign(el.style, {left: (p0 + 2) + 'px', width: (p1 - p0 - 4) + 'px', top: (yc - 7 * lines) + 'px',
                                 color: ink(fills[t.legendgroup])});
        const own = (meta.label_names || [])[s.set];
        const what = own == null && t.text ? shown(t.text[k]) : shown(own == null ? t.meta : own);
        if (lines === 2) {
          const a = document.createElement('div'), b = document.createElement('div');
          a.textContent = what; b.textContent = duration(cd[3]);
          el.append(a, b);
        } else {
          const a = document.createElement('div');
          a.textContent = `${what} · ${duration(cd[3])}`;
          el.append(a);
        }
        frag.appendChild(el);
      }
    }
    layer.appendChild(frag);
  }

  function widestGap(p0, p1, covers) {   // the widest part of [p0, p1] outside every interval in covers
    const inside = covers.filter(([a, b]) => b > p0 && a < p1).sort((u, v) => u[0] - v[0]);
    let best = [p0, p0], at = p0;
    for (const [a, b] of inside) {
      if (a - at > best[1] - best[0]) best = [at, a];
      at = Math.max(at, b);
    }
    if (p1 - at > best[1] - best[0]) best = [at, p1];
    return best;
  }

  function hook() {
    const gd = document.querySelector('#timeline .js-plotly-plot');
    if (!gd || gd.__ptLabels || !gd.on) return;
    gd.__ptLabels = true;
    gd.on('plotly_relayout', (e) => { userRelayout(e); labels(gd); });
    gd.on('plotly_afterplot', () => labels(gd));
    labels(gd);
  }

  // The x-axis part of a relayout event (zoom, pan, reset): its xaxis.range/autorange keys, and
  // with `both` the compare view's second axis's too; the rest (autosize, legend clicks) left.
  function xaxisPart(r, both) {
    const key = both ? /^xaxis2?\.(range|autorange)/ : /^xaxis\.(range|autorange)/;
    const out = {};
    for (const k of Object.keys(r || {})) if (key.test(k)) out[k] = r[k];
    return out;
  }

  // The x range a relayout sets: [lo, hi], or null for autorange.
  function xRangeOf(r) {
    let rng = null;
    if ('xaxis.range[0]' in r && 'xaxis.range[1]' in r) rng = [r['xaxis.range[0]'], r['xaxis.range[1]']];
    else if (Array.isArray(r['xaxis.range'])) rng = r['xaxis.range'];
    return rng ? [Math.min(...rng.map(Number)), Math.max(...rng.map(Number))] : null;
  }

  // The last view the user chose for trace A (zoom, pan, reset), numbered in the order chosen,
  // counted when plotly moves the axis (before any Dash callback runs): a server drawing asked
  // for before it is shown at it (apply_zoom in clientside.js). Plotly.react, how a drawing
  // lands, fires no plotly_relayout.
  let chosen = {seq: 0, range: null};
  function userRelayout(e) {
    if (!Object.keys(xaxisPart(e, false)).length) return;
    chosen = {seq: chosen.seq + 1, range: xRangeOf(e)};
  }
  const latestView = () => chosen;

  window.ptTimeline = {needsData, overviewBox, labels, duration, xaxisPart, xRangeOf, latestView};
  setInterval(hook, 250);   // the graph's div comes and goes with the tab and the trace
})();
