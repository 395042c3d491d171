// Tables arrive as one element carrying their markup in data-html (dashboard/raw_table.py),
// escaped by the server: one Dash component a table rather than one a cell, which cost the
// Panels tab of a two-rank job 48 s. This sets that markup as the element's content when the
// element is added to the page or its data-html changes.
(function () {
  function fill(el) {
    const markup = el.getAttribute('data-html');
    if (markup !== null && el.__ptHtml !== markup) { el.innerHTML = markup; el.__ptHtml = markup; }
  }
  function scan(node) {
    if (node.nodeType !== 1) return;
    if (node.classList.contains('pt-html')) fill(node);
    for (const el of node.getElementsByClassName('pt-html')) fill(el);
  }
  new MutationObserver((records) => {
    for (const r of records) {
      if (r.type === 'attributes') fill(r.target);
      else r.addedNodes.forEach(scan);
    }
  }).observe(document.documentElement, {childList: true, subtree: true, attributes: true,
                                         attributeFilter: ['data-html']});
  scan(document.documentElement);
})();
