// The dashboard's costs (lib.js loads before this file, views.js after): the API's `spend`
// answer (the showback report, cut to what the token may read) read every SPEND_EVERY
// refreshes of the Configs, giving each Config row its cost per hour now and its spend this
// month, and drawn as a chart: per tenant, a bar per Config of this month and of the month
// before, the tenant's totals and the share of its monthly budget used. Nothing is computed
// here that the API does not answer: only drawn.
'use strict';

const gbSpend = (() => {
  const { $, call, el, setText } = gb;
  const SPEND_EVERY = 5;

  let report = null; // the last `spend` answer
  let reads = 0;

  // Dollars as the CLI prints them ($1234, $12.34, $0.0123).
  function usd(v) {
    const n = Number(v) || 0;
    if (n >= 100) return `$${n.toFixed(0)}`;
    if (n >= 0.1) return `$${n.toFixed(2)}`;
    return `$${n.toFixed(4)}`;
  }

  // `spend` again, every SPEND_EVERY calls (at once the first time).
  async function refresh(stale) {
    reads += 1;
    if (report && reads % SPEND_EVERY !== 0) return;
    const r = await call('GET', '/spend');
    if (stale()) return;
    report = r;
    draw();
  }

  function configOf(prefix) {
    if (!report) return null;
    for (const t of report.tenants) {
      const c = t.configs.find((e) => e.prefix === prefix);
      if (c) return c;
    }
    return null;
  }

  // The Configs table's cost cells of Config `prefix`: per hour now, and this month.
  function cells(prefix) {
    const c = configOf(prefix);
    const hours = (m) => `${m.hours.running.toFixed(1)} h running, ${m.hours.suspended.toFixed(1)} h suspended, ${m.hours.stopped.toFixed(1)} h stopped`;
    return [
      { f: 'cost-hour', text: c ? usd(c.cost_per_hour) : '—', cls: 'num',
        title: c ? 'what its VMs cost per hour now, as billed (list prices)' : 'not read yet' },
      { f: 'cost-month', text: c ? usd(c.month.usd) : '—', cls: 'num',
        title: c ? `${c.month.month}: ${hours(c.month)}; ${c.previous.month}: ${usd(c.previous.usd)}` : undefined },
    ];
  }

  // One bar: `v` of `max`, labelled.
  function bar(kind, v, max, label) {
    const fill = el('span', { class: `fill ${kind}` });
    fill.style.width = `${max > 0 ? Math.min(100, (100 * v) / max).toFixed(1) : 0}%`;
    return el('div', { class: `spend-bar ${kind}`, title: label },
      el('div', { class: 'bar' }, fill), el('span', { class: 'bar-label', text: usd(v) }));
  }

  function budgetText(t) {
    if (t.budget_used_percent == null) return 'no budget';
    return `${t.budget_used_percent.toFixed(1)}% of its ${usd(t.budget_per_month)} budget used`;
  }

  // The chart: a group per tenant, a row per Config with this month's and last month's bars
  // (one scale for the whole chart).
  function draw() {
    const box = $('#spend-chart');
    const sig = JSON.stringify([report.month, report.tenants, report.prices]);
    if (box.dataset.sig === sig) return;
    box.dataset.sig = sig;
    const max = Math.max(0, ...report.tenants.flatMap((t) => t.configs.flatMap((c) => [c.month.usd, c.previous.usd])));
    const groups = report.tenants.map((t) => {
      const head = el('div', { class: 'spend-head' },
        el('strong', { text: `tenant ${t.tenant}` }),
        el('span', { class: 'muted', 'data-field': 'tenant-sums',
          text: `${usd(t.month.usd)} in ${report.month} · ${usd(t.previous.usd)} in ${report.previous_month} · ${usd(t.cost_per_hour)}/h now` }),
        el('span', { class: 'muted', 'data-field': 'budget', text: budgetText(t) }),
        t.hidden ? el('span', { class: 'muted', text: `(${t.hidden} Config${t.hidden === 1 ? '' : 's'} not shown)` }) : null);
      const rows = t.configs.map((c) => el('div', { class: 'spend-row', 'data-config': c.prefix },
        el('span', { class: 'spend-name', text: c.deleted ? `${c.prefix} (deleted)` : c.prefix }),
        el('div', { class: 'spend-bars' },
          bar('this', c.month.usd, max, `${report.month}: ${usd(c.month.usd)}`),
          bar('last', c.previous.usd, max, `${report.previous_month}: ${usd(c.previous.usd)}`))));
      return el('div', { class: 'spend-tenant', 'data-tenant': t.tenant }, head, ...rows);
    });
    const legend = el('div', { class: 'legends spend-legend' },
      el('span', { class: 'legend this', text: report.month }),
      el('span', { class: 'legend last', text: report.previous_month }));
    box.replaceChildren(...groups, legend);
    box.hidden = report.tenants.length === 0;
    setText($('#spend-note'), report.tenants.length
      ? `List prices (${report.prices.source}, read ${report.prices.read_at.slice(0, 10)}), before any discount.`
      : 'No Config this token may read.');
  }

  // Drops what was read (the next token reads its own).
  function forget() {
    report = null;
    reads = 0;
    const box = $('#spend-chart');
    box.replaceChildren();
    box.dataset.sig = '';
    setText($('#spend-note'), '');
  }

  return { refresh, cells, forget, usd };
})();
