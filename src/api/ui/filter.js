// The dashboard's search box (lib.js loads before this file): rows of the Configs and VMs
// tables whose text lacks any of its words are hidden (a prefix, a VM name, a state, a zone…).
// The rows stay in the page (the polls keep them up to date); only their `hidden` changes.
'use strict';

const gbFilter = (() => {
  const { $ } = gb;
  const TABLES = ['#configs tbody', '#vms tbody'];

  const words = () => $('#filter').value.toLowerCase().split(/\s+/).filter(Boolean);

  // Hides the rows of `tbody` that lack one of the words `want`; says how many show.
  function apply(tbody, want) {
    if (!want.length) {
      // No words: every row shows, and no row's text need be read.
      for (const tr of tbody.children) if (tr.hidden) tr.hidden = false;
      return tbody.children.length;
    }
    let shown = 0;
    for (const tr of tbody.children) {
      const text = tr.textContent.toLowerCase();
      const hide = !want.every((w) => text.includes(w));
      if (tr.hidden !== hide) tr.hidden = hide;
      if (!hide) shown += 1;
    }
    return shown;
  }

  function applyAll() {
    const want = words();
    const counts = TABLES.map((css) => [$(css), apply($(css), want)]);
    const visible = counts.find(([tb]) => tb.closest('section:not([hidden])'));
    const note = $('#filter-count');
    const text = want.length && visible ? `${visible[1]} of ${visible[0].children.length} shown` : '';
    if (note.textContent !== text) note.textContent = text;
  }

  // Sets the search text (a link to one VM sets its id).
  function set(text) {
    $('#filter').value = text;
    applyAll();
  }

  function start() {
    $('#filter').addEventListener('input', applyAll);
  }

  return { applyAll, set, start };
})();
