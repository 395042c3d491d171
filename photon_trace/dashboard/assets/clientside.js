// The page's clientside callbacks: functions Dash runs in the browser instead of asking the
// server (wired in callbacks/timeline.py and callbacks/panels.py with ClientsideFunction).
window.dash_clientside = Object.assign({}, window.dash_clientside, {
  timeline: {
    // Keeps only the x-axis part of a relayout event (zoom, pan, reset). Done in the browser so
    // that the events plotly also sends (autosize, legend clicks) never re-trigger, and so
    // cancel, a server re-draw that is in flight.
    zoom_filter: function (r) {
      const skip = window.dash_clientside.no_update;
      if (!r) return skip;
      const out = window.ptTimeline.xaxisPart(r, true);
      if (!Object.keys(out).length) return skip;
      out.nonce = Date.now();
      return out;
    },

    // Trace A's zoom and pan (keys, drag, wheel), answered in the page: plotly has already moved
    // the axis over what the server drew (View.pad of the width beyond each side, each span
    // exact or summed per pixel column). The server is asked for a new drawing only when the
    // view needs data this one lacks (needsData); either way the view store keeps the range,
    // for the callbacks that start from it (go to step, search, the overview).
    zoom_view: function (r, path, view) {
      const skip = window.dash_clientside.no_update;
      if (!r) return [skip, skip];
      const out = window.ptTimeline.xaxisPart(r, false);
      if (!Object.keys(out).length) return [skip, skip];
      const v = Object.assign({}, view || {}, {range: window.ptTimeline.xRangeOf(out)});
      const gd = document.querySelector('#timeline .js-plotly-plot');
      const meta = gd && gd.layout && gd.layout.meta;
      window.ptTimeline.overviewBox(v.range);
      if (path !== 'live' && v.range && !window.ptTimeline.needsData(meta, v.range[0], v.range[1])) return [skip, v];
      out.nonce = Date.now();
      out.seq = window.ptTimeline.latestView().seq;   // this relayout's, counted when plotly made it
      return [out, v];
    },

    // The server's drawing for a zoom, shown at the view the user chose last. Keys come
    // faster than drawings: a drawing asked for by an earlier press can land after a later
    // press moved the axis and before that press's own callback ran (so nothing superseded
    // it), and plotly would put the axis back where the earlier press had it. The later
    // press's callback still runs and asks for data if this drawing lacks it.
    apply_zoom: function (d) {
      const skip = window.dash_clientside.no_update;
      if (!d) return [skip, skip];
      const latest = window.ptTimeline.latestView();
      if ((d.asked || 0) >= latest.seq) return [d.fig, d.view];
      const fig = Object.assign({}, d.fig, {layout: Object.assign({}, d.fig.layout)});
      fig.layout.xaxis = Object.assign({}, fig.layout.xaxis,
                                       latest.range ? {range: latest.range, autorange: false} : {autorange: true});
      return [fig, Object.assign({}, d.view, {range: latest.range})];
    },

    // A live re-draw reaches the timeline only if the user has not zoomed since it was asked for
    // and following is still on in the same epoch. The server drops the ones it can tell are
    // stale (AppState.live_redraw_is_stale), but a re-draw that passed that check before the
    // zoom's pause reached the server can still land after the zoom's own figure (a big figure
    // takes longer to send than the zoomed one): only the page knows what happened last.
    apply_live: function (d, zoom, follow) {
      const skip = window.dash_clientside.no_update;
      if (!d) return [skip, skip, skip, skip];
      const f = follow || {};
      if (((zoom || {}).nonce || 0) > d.asked || !f.on || (f.epoch || 0) !== d.epoch) return [skip, skip, skip, skip];
      return [d.fig, d.view, d.sel, d.overview];
    },

    // Legend clicks: the legend groups now hidden, kept so a re-draw can keep them hidden.
    hidden_filter: function (restyle, fig, hidden) {
      const skip = window.dash_clientside.no_update;
      if (!restyle || !fig || !fig.data) return skip;
      const changes = restyle[0], idx = restyle[1] || [];
      if (!changes || !('visible' in changes)) return skip;
      const set = new Set(hidden || []);
      const vis = changes.visible;
      idx.forEach((ti, n) => {
        const t = fig.data[ti]; if (!t) return;
        const v = Array.isArray(vis) ? vis[n % vis.length] : vis;
        const g = t.legendgroup || t.name;
        if (v === 'legendonly' || v === false) set.add(g); else set.delete(g);
      });
      return Array.from(set);
    },
  },
});
