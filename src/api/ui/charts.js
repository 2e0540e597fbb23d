// The dashboard's charts (lib.js loads before this file, views.js after): small inline SVG
// sparklines of the last hour the API keeps (configSeries: a Config's VMs created, bots
// connected and amount; queueSeries: each queue's retries), one point a minute. The series
// change once a minute: they are read again every SERIES_EVERY polls, not on every poll.
'use strict';

const gbCharts = (() => {
  const { $, enc, call, hms, setText } = gb;
  const SVG = 'http://www.w3.org/2000/svg';
  const SERIES_EVERY = 15;

  let queueSeries = null; // the last queueSeries answer
  let configSeries = null; // { prefix, points } of the Config shown

  function svg(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return e;
  }

  // A sparkline of `lines` ([{ key, cls, label }]) over `points` (the API's, oldest first, at
  // most an hour): x from the first point's minute to the last's, y from 0 to the largest
  // value; `w`×`h` pixels.
  function spark(points, lines, w, h) {
    const t = points.map((p) => Date.parse(p.at));
    const [t0, t1] = [Math.min(...t), Math.max(...t)];
    const max = Math.max(1, ...points.flatMap((p) => lines.map((l) => p[l.key])));
    const x = (i) => (t1 > t0 ? ((w - 2) * (t[i] - t0)) / (t1 - t0) + 1 : w - 2).toFixed(1);
    const y = (v) => (h - 1 - ((h - 2) * v) / max).toFixed(1);
    const box = svg('svg', { class: 'spark', width: w, height: h, viewBox: `0 0 ${w} ${h}`, role: 'img' });
    box.append(svg('line', { class: 'axis', x1: 0, x2: w, y1: h - 0.5, y2: h - 0.5 }));
    for (const l of lines) {
      const pts = points.map((p, i) => `${x(i)},${y(p[l.key])}`).join(' ');
      if (points.length === 1) box.append(svg('circle', { class: l.cls, cx: x(0), cy: y(points[0][l.key]), r: 2 }));
      else if (points.length) box.append(svg('polyline', { class: l.cls, points: pts }));
    }
    const last = points[points.length - 1];
    const title = svg('title', {});
    title.textContent = last
      ? `${points.length} point${points.length === 1 ? '' : 's'}, ${hms(new Date(t0))} to ${hms(new Date(t1))}: ${lines.map((l) => `${l.label} ${last[l.key]}`).join(', ')}`
      : 'no sample in the last hour yet';
    box.append(title);
    box.dataset.points = String(points.length);
    return box;
  }

  // The Config's chart: VMs created, bots connected and the amount over the last hour.
  async function refreshConfig(prefix, stale, polls) {
    if (!configSeries || configSeries.prefix !== prefix || polls % SERIES_EVERY === 0) {
      const s = await call('GET', `/configs/${enc(prefix)}/series`);
      if (stale()) return;
      configSeries = s;
    }
    const box = $('#config-chart');
    const sig = JSON.stringify(configSeries);
    if (box.dataset.sig === sig) return;
    box.dataset.sig = sig;
    const lines = [
      { key: 'amount', cls: 'amount', label: 'amount' },
      { key: 'created', cls: 'created', label: 'created' },
      { key: 'connected', cls: 'connected', label: 'connected' },
    ];
    const legend = lines.map((l) => gb.el('span', { class: `legend ${l.cls}`, text: l.label }));
    box.replaceChildren(spark(configSeries.points, lines, 360, 60), gb.el('div', { class: 'legends' }, ...legend));
    setText($('#config-chart-note'), configSeries.points.length ? '' : 'No sample yet: one is taken each minute.');
  }

  // Every queue's series (read every SERIES_EVERY polls); `points(name)` gives one queue's.
  async function refreshQueues(stale, polls) {
    if (queueSeries && polls % SERIES_EVERY !== 0) return;
    const s = await call('GET', '/queues/series');
    if (stale()) return;
    queueSeries = s;
  }

  function queuePoints(name) {
    const q = queueSeries && queueSeries.queues.find((e) => e.name === name);
    return q ? q.points : [];
  }

  // A queue's retries in the last minute sampled (its last point), `—` before any sample.
  function queueRetries(name) {
    const points = queuePoints(name);
    return points.length ? String(points[points.length - 1].retries) : '—';
  }

  // A queue's retries sparkline (a table cell's content), with its signature.
  function queueSpark(name) {
    const points = queuePoints(name);
    return {
      sig: JSON.stringify(points),
      make: () => spark(points, [{ key: 'retries', cls: 'retries', label: 'retries' }], 120, 22),
    };
  }

  // Drops what was read (the next token reads its own).
  function forget() {
    queueSeries = null;
    configSeries = null;
    const box = $('#config-chart');
    box.replaceChildren();
    box.dataset.sig = '';
    setText($('#config-chart-note'), '');
  }

  return { spark, refreshConfig, refreshQueues, queueSpark, queueRetries, forget };
})();
