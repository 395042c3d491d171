// Keyboard navigation on the timeline, as in Perfetto: W/S zoom in/out around the mouse (or the
// centre), A/D pan left/right. Each key is one Plotly.relayout: plotly moves the axis over what is
// drawn at once, and the zoom_view callback (clientside.js) asks the server for a new drawing only
// when the view needs data this one lacks. ? shows the keys and the colours. Keys typed into an
// input are left alone.
// And one listener for clicks on table rows that jump to the timeline (rows carry data-row).
(function () {
  let mouseFrac = null;
  const graph = () => document.querySelector('#timeline .js-plotly-plot');
  document.addEventListener('mousemove', (e) => {
    const gd = graph();
    if (!gd || !gd._fullLayout || !gd._fullLayout.xaxis) { mouseFrac = null; return; }
    const xa = gd._fullLayout.xaxis, box = gd.getBoundingClientRect();
    const px = e.clientX - box.left - xa._offset, py = e.clientY - box.top;
    mouseFrac = (px >= 0 && px <= xa._length && py >= 0 && py <= box.height) ? px / xa._length : null;
  });
  document.addEventListener('click', (e) => {
    if (e.target.closest && e.target.closest('#help-button, #help-close')) {
      const box = document.getElementById('help-overlay');
      toggleHelp(!(box && box.style.display === 'block'));
      return;
    }
    const tr = e.target.closest && e.target.closest('tr[data-row]');
    const table = tr && tr.closest('table');
    if (!table || !table.id || !window.dash_clientside || !window.dash_clientside.set_props) return;
    window.dash_clientside.set_props('row-click', {data: {table: table.id, row: Number(tr.dataset.row), at: Date.now()}});
  });
  // The ? overlay (dashboard/help.py): the rows of the colours this timeline has, each with the
  // colour it was drawn in, read from what plotly drew, so overlay and legend agree.
  function toggleHelp(show) {
    const box = document.getElementById('help-overlay');
    if (!box) return;
    if (!show) { box.style.display = 'none'; return; }
    const gd = graph(), drawn = {};
    for (const t of (gd && gd._fullData) || []) {
      if (!t.showlegend || t.visible === false) continue;
      const c = t.fill === 'toself' ? t.fillcolor : (t.marker && t.marker.color);
      drawn[t.name.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&')] = c;
    }
    for (const row of box.querySelectorAll('tr.pt-help-colour')) {
      const c = drawn[row.dataset.name];
      row.style.display = c ? '' : 'none';
      if (c) row.querySelector('.pt-swatch').style.background = c;
    }
    box.style.display = 'block';
  }

  document.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const tag = (e.target && e.target.tagName) || '';
    if (tag === 'INPUT' || tag === 'TEXTAREA' || (e.target && e.target.isContentEditable)) return;
    const help = document.getElementById('help-overlay');
    const open = help && help.style.display === 'block';
    if (e.key === '?' || (e.key === 'Escape' && open)) { toggleHelp(e.key === '?' && !open); e.preventDefault(); return; }
    const key = e.key.toLowerCase();
    if (!'wasd'.includes(key) || key.length !== 1) return;
    const gd = graph();
    if (!gd || !gd._fullLayout || !gd._fullLayout.xaxis || !window.Plotly) return;
    const [lo, hi] = gd._fullLayout.xaxis.range.map(Number);
    const w = hi - lo, f = mouseFrac === null ? 0.5 : mouseFrac, at = lo + f * w;
    let a = lo, b = hi;
    if (key === 'w' || key === 's') {
      const k = key === 'w' ? 0.7 : 1 / 0.7;
      a = at - f * w * k; b = at + (1 - f) * w * k;
    } else {
      const d = (key === 'a' ? -0.2 : 0.2) * w;
      a = lo + d; b = hi + d;
    }
    e.preventDefault();
    window.Plotly.relayout(gd, {'xaxis.range[0]': a, 'xaxis.range[1]': b});
  });
})();
