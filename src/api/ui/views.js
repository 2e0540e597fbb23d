// The views of gce-backend's dashboard (lib.js, filter.js, charts.js, spend.js and controls.js
// load before this file, app.js after): the
// Configs (#/), one Config (#/configs/<prefix>) and the queues with their dead tasks (#/queues),
// each read from the API and updated in place, cell by cell. app.js routes, polls and signs in;
// it calls one refresh per poll, with `stale` (true once the token changed: results dropped).
'use strict';

const gbViews = (() => {
  const {
    $, enc, call, allPages, hms, span, ago, until, when, short, secs, el, badge, syncRows, cards, setText, banner,
  } = gb;
  // VM details (with the instance's status from Compute) are read every this many polls, for
  // Configs of at most DETAIL_MAX VMs: each one asks Compute.
  const DETAIL_EVERY = 5;
  const DETAIL_MAX = 20;
  // Entries of a Config's history shown (the newest; `gce-backend configs history` has all).
  const HISTORY_SHOWN = 20;

  let historyOf = null; // the Config whose history is shown (read every DETAIL_EVERY polls)
  // Compute's status of an incarnation, by hostname (new for each incarnation, so a recreated
  // VM never shows its predecessor's); only for VMs listed with an instance on the last read.
  const instanceStatus = new Map();

  // ---- the Configs ---------------------------------------------------------------------------

  function bar(c) {
    const want = Math.max(c.configured, c.created, 1);
    const pct = (n) => `${Math.min(100, (100 * n) / want).toFixed(1)}%`;
    const created = el('span', { class: 'fill created' });
    created.style.width = pct(c.created);
    const connected = el('span', { class: 'fill connected' });
    connected.style.width = pct(c.connected);
    return el('div', { class: 'bar-wrap' },
      el('div', { class: 'bar', title: `${c.connected} connected, ${c.created} created of ${c.configured}` }, created, connected),
      el('span', { class: 'bar-label', text: `${c.created}/${c.configured}` }));
  }

  // A Config's file gone and its deletion held (by other files' errors), as the API lists it.
  const deletionHeld = (e) => (e.files || []).some((f) => f.kind === 'deletion_held');

  function stateBadges(e) {
    const st = e.status;
    const box = el('span', { class: 'badges' });
    const kind = { active: 'ok', orphaned: 'warn', deleted: 'muted', corrupt: 'bad' }[st.state] || '';
    box.append(badge(st.state, kind));
    if (deletionHeld(e)) box.append(badge('deletion held', 'warn'));
    if (st.pause_in_force) box.append(badge('paused', 'warn'));
    if (st.breaker) box.append(badge('breaker open', 'bad'));
    if (st.spot && st.spot.failover) box.append(badge(`spot failover until ${hms(new Date(st.spot.failover.until))}`, 'warn'));
    if (st.rollout) box.append(badge(`rolling ${st.rollout.updated}/${st.rollout.updated + st.rollout.outdated}`, 'warn'));
    if (st.demand && st.demand.held) box.append(badge('demand held', 'warn'));
    if (!st.verified) box.append(badge('unverified', 'warn'));
    return box;
  }

  const lastError = (st) => (st.errors || [])[0];

  // Dead tasks now (the dead sets), by queue total and by Config (each task names its own, as
  // the API decides it; null for a task of no one Config).
  async function deadNow() {
    const { queues } = await call('GET', '/queues');
    const withDead = queues.filter((q) => q.counts.dead > 0);
    const lists = await Promise.all(withDead.map((q) => allPages(`/queues/${enc(q.name)}/dead`, 'tasks', 100, 5)));
    const byConfig = {};
    for (const t of lists.flatMap((l) => l.items)) {
      if (t.config) byConfig[t.config] = (byConfig[t.config] || 0) + 1;
    }
    return { total: queues.reduce((n, q) => n + q.counts.dead, 0), byConfig };
  }

  async function refreshOverview(stale) {
    const [list, pause, dead] = await Promise.all([
      allPages('/configs', 'configs', 100, 100), call('GET', '/pause'), deadNow(), gbSpend.refresh(stale),
    ]);
    if (stale()) return;
    const configs = list.items;
    const p = pause.paused;
    banner($('#global-pause'), p ? `Every Config is paused by ${p.by}${p.reason ? `: ${p.reason}` : ''} (since ${when(p.at)}).` : '');
    const sum = (f) => configs.reduce((n, e) => n + f(e.status), 0);
    const unhealthy = sum((s) => s.counts.unhealthy);
    cards($('#summary'), [
      ['Configs', configs.length, '', 'configs'],
      ['VMs configured', sum((s) => s.counts.configured), '', 'configured'],
      ['connected', sum((s) => s.counts.connected), 'ok', 'connected'],
      ['draining', sum((s) => s.counts.draining), '', 'draining'],
      ['unhealthy', unhealthy, unhealthy ? 'bad' : '', 'unhealthy'],
      ['dead tasks', dead.total, dead.total ? 'bad' : '', 'dead-tasks'],
    ]);
    $('#no-configs').hidden = configs.length > 0;
    syncRows($('#configs tbody'), configs, 'data-config', (e) => e.status.prefix, (e) => {
      const st = e.status;
      const c = st.counts;
      const err = lastError(st);
      const b = st.backoff;
      const deadHere = dead.byConfig[st.prefix] || 0;
      return [
        { f: 'prefix', sig: st.prefix, make: () => el('a', { href: `#/configs/${enc(st.prefix)}`, text: st.prefix }) },
        { f: 'state', sig: `${st.state}|${deletionHeld(e)}|${!!st.pause_in_force}|${st.verified}|${!!st.breaker}|${st.rollout ? st.rollout.updated + '/' + st.rollout.outdated : ''}|${!!(st.demand && st.demand.held)}|${st.spot && st.spot.failover ? st.spot.failover.until : ''}`, make: () => stateBadges(e),
          title: st.pause_in_force ? `paused by ${st.pause_in_force.by || 'everyone'}: ${st.pause_in_force.reason}` : undefined },
        { f: 'bar', sig: `${c.configured}|${c.created}|${c.connected}`, make: () => bar(c) },
        { f: 'configured', text: c.configured, cls: 'num' },
        { f: 'created', text: c.created, cls: 'num' },
        { f: 'connected', text: c.connected, cls: `num ${c.connected < c.configured ? 'lag' : 'good'}` },
        { f: 'draining', text: c.draining, cls: 'num' },
        { f: 'unhealthy', text: c.unhealthy, cls: `num ${c.unhealthy ? 'bad' : ''}` },
        { f: 'dead-tasks', sig: deadHere, cls: `num ${deadHere ? 'bad' : ''}`,
          title: `${st.dead_tasks} task${st.dead_tasks === 1 ? '' : 's'} died in all (retried or not), ${st.task_failures} runs failed`,
          make: () => (deadHere ? el('a', { href: '#/queues', text: deadHere }) : document.createTextNode('0')) },
        // What it costs, as the API's spend answers it.
        ...gbSpend.cells(st.prefix),
        { f: 'backoff', text: b ? `${b.reason} until ${hms(new Date(b.until))}` : '', cls: b ? 'warn-text' : '',
          title: b ? `${b.project}/${b.zone}: ${b.failures} failures in a row` : undefined },
        { f: 'last-error', text: err ? `${err.code}: ${short(err.message, 140)}` : '', cls: err && !err.resolved ? 'error-text' : 'muted',
          title: err ? `${when(err.time)} ${err.stage}: ${err.message}${err.resolved ? ' (resolved)' : ''}` : undefined },
      ];
    });
    // Config files not applied, and deletions held, that this token may read (the API decides).
    const files = (list.last && list.last.files) || [];
    $('#files-box').hidden = files.length === 0;
    syncRows($('#files tbody'), files, 'data-file', (f) => `${f.path}|${f.prefix}|${f.kind || ''}`, (f) => [
      { f: 'path', text: f.path, cls: 'mono' },
      { f: 'prefix', text: f.prefix || '?' },
      { f: 'problem', sig: f.kind || '', make: () => (f.kind === 'deletion_held' ? badge('deletion held', 'warn') : badge('not applied', 'bad')) },
      { f: 'since', text: when(f.since), title: ago(f.since) },
      { f: 'why', text: f.message, cls: 'message' },
    ]);
    gbFilter.applyAll();
  }

  // ---- one Config ----------------------------------------------------------------------------

  function vmState(v) {
    const kind = { connected: 'ok', running: 'info', creating: 'muted', warm: 'muted', draining: 'warn', unhealthy: 'bad' }[v.state];
    return badge(v.state, kind);
  }

  function botState(v) {
    return v.bot_state || '—';
  }

  function instanceOf(v) {
    if (v.vm.instance && instanceStatus.has(v.vm.hostname)) return instanceStatus.get(v.vm.hostname);
    if (v.vm.instance) return 'created';
    return v.vm.insert_sent ? 'inserting' : '—';
  }

  // A VM's creation as the API says it goes: its task's attempts and when it runs next.
  function workCell(v) {
    const w = v.work;
    if (!w) return { f: 'work', text: '' };
    const next = w.next_run ? `next ${until(w.next_run)}` : w.state === 'running' ? 'running' : '';
    // A task held back (a backoff, a pause) waits with no attempt of its own yet.
    const tried = w.attempts > 0 ? `${w.attempts} attempt${w.attempts === 1 ? '' : 's'}` : 'waiting';
    return { f: 'work', text: [tried, next].filter(Boolean).join(', '), cls: w.last_error ? 'warn-text' : '',
      title: `${w.queue} ${w.state}${w.last_error ? `; last error: ${w.last_error}` : ''}` };
  }

  // Drops the statuses of incarnations no longer listed with an instance.
  function pruneInstances(vms) {
    const live = new Set(vms.filter((v) => v.vm.instance).map((v) => v.vm.hostname));
    for (const h of [...instanceStatus.keys()]) if (!live.has(h)) instanceStatus.delete(h);
  }

  // Compute's status of each VM's instance, by the hostname the answer names.
  async function readInstances(vms) {
    const got = new Map();
    await Promise.all(vms.filter((v) => v.vm.instance).map(async (v) => {
      try {
        const d = await call('GET', `/vms/${enc(v.vm.id)}`);
        const vm = d.vm && d.vm.vm;
        if (d.instance_status && vm && vm.instance) got.set(vm.hostname, d.instance_status);
      } catch (_) { /* kept from the last read */ }
    }));
    return got;
  }

  // One line per zone of a multi-zone Config (weight, VMs, connected, backoff); else its zone.
  function zoneFacts(st, a) {
    if (!(st.zones || []).length) return [['zone', a.zone]];
    return st.zones.map((z) => [`zone ${z.zone}`,
      `weight ${z.weight} · ${z.vms} VM${z.vms === 1 ? '' : 's'} · ${z.connected} connected` +
      (z.draining ? ` · ${z.draining} draining` : '') +
      (z.backoff ? ` · backs off until ${hms(new Date(z.backoff.until))} (${z.backoff.reason})` : '')]);
  }

  // Its machine type; for a Config with fallback machine types, one line per rank (VMs,
  // connected, placements, the zones where it backs off).
  function rankFacts(st, a) {
    if (!(st.ranks || []).length) return [['machine type', (a.machine_type || '').split('/').pop()]];
    return st.ranks.map((r) => [`rank ${r.rank}`,
      `${r.machine_type} · ${r.vms} VM${r.vms === 1 ? '' : 's'} · ${r.connected} connected · ${r.placed} placed` +
      (r.backoffs || []).map((b) => ` · backs off in ${b.zone} until ${hms(new Date(b.until))} (${b.reason})`).join('')]);
  }

  // A demand-driven Config's last reading, as the API answers it: what it found and why.
  function demandFact(d, r) {
    const dims = Object.entries(d.dimensions || {}).map(([k, v]) => `${k}:${v}`).join(', ');
    if (!r) return `${dims} · not read yet`;
    const read = `pending ${r.pending} · busy ${r.busy} · idle ${r.idle} · target ${r.target}`;
    return `${dims} · ${read} (${r.why}) · read ${when(r.at)}`;
  }

  // A Spot pool's failover, as the API answers it (status `spot`).
  function spotFact(sp) {
    const f = sp.failover;
    const total = `${sp.failovers_total} failover${sp.failovers_total === 1 ? '' : 's'} so far`;
    if (f) return `standard VMs until ${when(f.until)} (${f.preempted} preemptions, ${f.refused} refusals in ${secs(sp.within)}) · ${total}`;
    return `Spot · ${sp.preempted} preemptions, ${sp.refused} refusals in the last ${secs(sp.within)} (more than ${sp.more_than} make standard VMs for ${secs(sp.cooldown)}) · ${total}`;
  }

  function facts(entry) {
    const c = entry.config;
    const st = entry.status;
    const a = c.attributes || {};
    const list = [
      ['source', st.source], ['revision', st.revision],
      ['amount', `${entry.amount} (min ${c.amount.min}, max ${c.amount.max})`],
      ['project', a.project], ...zoneFacts(st, a), ...rankFacts(st, a),
      ['lifetime', secs(c.lifetime)], ['timeout', secs(c.timeout)],
      ['swarming', c.swarming], ['owner', (c.owner || []).join(', ') || '(admins only)'],
      ['task failures', st.task_failures], ['dead tasks', st.dead_tasks],
    ];
    if (st.paused) list.push(['paused', `by ${st.paused.by} since ${when(st.paused.at)}: ${st.paused.reason}`]);
    if (c.demand) list.push(['demand', demandFact(c.demand, st.demand)]);
    if (st.spot) list.push(['spot failover', spotFact(st.spot)]);
    if (c.warm) list.push(['warm pool', `${st.counts.parked || 0} kept warm (up to ${c.warm.suspended || 0} suspended, ${c.warm.stopped || 0} stopped)`]);
    if (st.delete_at) list.push(['deletes at', when(st.delete_at)]);
    if (st.corrupt) list.push(['corrupt', st.corrupt]);
    const box = $('#config-facts');
    const sig = JSON.stringify(list);
    if (box.dataset.sig === sig) return;
    box.dataset.sig = sig;
    box.replaceChildren(...list.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', { text: String(v) })]));
  }

  // The newest entries of a Config's audit trail, as the API answers them (hidden, or none:
  // an empty list).
  async function readHistory(prefix) {
    try {
      return (await call('GET', `/configs/${enc(prefix)}/history`, { limit: String(HISTORY_SHOWN) })).entries;
    } catch (e) {
      if (e.status === 404) return [];
      throw e;
    }
  }

  const revision = (r) => (r ? r.slice(0, 8) : '—');

  function showHistory(entries) {
    $('#no-history').hidden = entries.length > 0;
    syncRows($('#history tbody'), entries, 'data-audit', (e) => `${e.at}|${e.actor}|${e.action}|${e.detail}`, (e) => [
      { f: 'time', text: when(e.at), title: ago(e.at) },
      { f: 'actor', text: e.actor, cls: 'mono' },
      { f: 'action', text: e.action.replace(/_/g, ' ') },
      { f: 'revision', text: e.before_revision === e.after_revision ? revision(e.after_revision)
        : `${revision(e.before_revision)} → ${revision(e.after_revision)}`, cls: 'mono',
        title: `${e.before_revision || 'none'} → ${e.after_revision || 'none'}` },
      { f: 'detail', text: e.detail, cls: 'message' },
    ]);
  }

  async function refreshConfig(prefix, stale, polls) {
    let entry;
    try {
      entry = await call('GET', `/configs/${enc(prefix)}`);
    } catch (e) {
      if (stale()) return;
      if (e.status !== 404) throw e;
      // A Config that is gone keeps its history (who deleted it), for those who may read it.
      const history = await readHistory(prefix);
      if (stale()) return;
      showHistory(history);
      historyOf = null;
      setText($('#config-prefix'), prefix);
      // Not applied: each of its file's errors on a line of its own.
      banner($('#config-missing'), [e.message, ...e.files.map((f) => `${f.path}: ${f.message}`)].join('\n'));
      $('#config-facts').replaceChildren();
      $('#config-facts').dataset.sig = '';
      $('#config-summary').replaceChildren();
      $('#config-summary').dataset.sig = '';
      syncRows($('#vms tbody'), [], 'data-vm', () => '', () => []);
      syncRows($('#errors tbody'), [], 'data-error', () => '', () => []);
      gbControls.forget();
      gbCharts.forget();
      return;
    }
    // The history changes on a change to the Config: read with the VM details, and at once for
    // another Config.
    const wantHistory = historyOf !== prefix || polls % DETAIL_EVERY === 0;
    const [{ items: vms, last: lastPage }, history] = await Promise.all([
      allPages(`/configs/${enc(prefix)}/vms`, 'vms', 1000, 20),
      wantHistory ? readHistory(prefix) : null,
      gbCharts.refreshConfig(prefix, stale, polls),
    ]);
    const read = vms.length <= DETAIL_MAX && polls % DETAIL_EVERY === 0 ? await readInstances(vms) : null;
    if (stale()) return;
    gbControls.config(entry);
    if (read) for (const [h, status] of read) instanceStatus.set(h, status);
    pruneInstances(vms);
    setText($('#config-prefix'), prefix);
    banner($('#config-missing'), '');
    const st = entry.status;
    const c = st.counts;
    cards($('#config-summary'), [
      ['configured', c.configured, '', 'configured'],
      ['created', c.created, '', 'created'],
      ['connected', c.connected, c.connected < c.configured ? 'lag' : 'ok', 'connected'],
      ['draining', c.draining, '', 'draining'],
      ['unhealthy', c.unhealthy, c.unhealthy ? 'bad' : '', 'unhealthy'],
      ['state', st.pause_in_force ? `${st.state}, paused` : st.state, st.pause_in_force ? 'warn' : '', 'state'],
    ]);
    facts(entry);
    $('#no-vms').hidden = vms.length > 0;
    // Ids held by no VM by choice, as the API lists them (the pool shrank idle first).
    const letGo = (lastPage && lastPage.letGo) || [];
    $('#vms-let-go').hidden = letGo.length === 0;
    setText($('#vms-let-go'), letGo.length
      ? `Let go (no VM by choice: the pool shrank and kept its busy VMs; taken first when it grows): ${letGo.join(' ')}` : '');
    syncRows($('#vms tbody'), vms, 'data-vm', (v) => v.vm.id, (v) => {
      const i = v.vm.instance;
      const born = (i && i.created) || v.vm.configured;
      const inst = instanceOf(v);
      const bot = botState(v);
      return [
        { f: 'id', text: v.vm.id },
        { f: 'hostname', text: v.vm.hostname, cls: 'mono' },
        { f: 'state', sig: v.state, make: () => vmState(v) },
        { f: 'instance', text: inst, cls: inst === 'RUNNING' || inst === 'created' ? 'good' : '' },
        { f: 'bot', text: bot, cls: bot === 'connected' ? 'good' : bot === 'dead' ? 'bad' : '',
          title: v.bot && v.bot.bot ? `last seen ${when(v.bot.bot.last_seen)}` : undefined },
        { f: 'zone', text: (v.vm.attributes && v.vm.attributes.zone) || '',
          title: v.vm.attributes ? (v.vm.attributes.machine_type || '').split('/').pop() + (v.vm.rank != null ? ` (rank ${v.vm.rank})` : '') : undefined },
        { f: 'ip', text: (i && i.internal_ip) || '', cls: 'mono' },
        { f: 'age', text: born ? span(Date.now() - Date.parse(born)) : '', cls: 'num', title: when(born) },
        { f: 'deadline', text: until(v.deadline), title: when(v.deadline) },
        { f: 'rollout', sig: `${v.outdated}|${!!v.vm.failover}`, make: () => (v.outdated ? badge('outdated', 'warn') : v.vm.failover ? badge('standard (spot failover)', 'info') : document.createTextNode('')),
          title: v.outdated ? 'made from older instance attributes: a rolling update replaces it'
            : v.vm.failover ? 'made standard while its Spot pool failed over: replaced when its lifetime ends' : undefined },
        workCell(v),
        gbControls.recycleCell(v, entry.may_change),
      ];
    });
    gbFilter.applyAll();
    const errors = st.errors || [];
    $('#no-errors').hidden = errors.length > 0;
    syncRows($('#errors tbody'), errors, 'data-error', (e) => `${e.time}|${e.stage}|${e.code}`, (e) => [
      { f: 'time', text: when(e.time), title: ago(e.time) },
      { f: 'stage', text: e.stage },
      { f: 'code', text: e.code, cls: e.resolved ? 'muted' : 'error-text' },
      { f: 'zone', text: e.zone },
      { f: 'message', text: e.message, cls: 'message' },
      { f: 'resolved', text: e.resolved ? when(e.resolved) : 'no', cls: e.resolved ? 'muted' : 'error-text' },
      { f: 'vm', sig: e.vm || '', make: () => (e.vm
        ? el('a', { href: '#', 'data-show-vm': e.vm, title: `show ${e.vm} in the VMs above`, text: e.vm })
        : document.createTextNode('')) },
    ]);
    if (history) {
      showHistory(history);
      historyOf = prefix;
    }
  }

  // ---- the queues ----------------------------------------------------------------------------

  function button(action, text, attrs) {
    return el('button', Object.assign({ type: 'button', 'data-action': action, class: action === 'purge-dead' ? 'danger' : '' }, attrs), text);
  }

  // The queues and their dead tasks; `me` is whoami's answer. What the caller may do comes from
  // the API: queue-wide buttons for `me.may.admin`, a task's Retry where its `may_retry` says.
  async function refreshQueues(stale, me, polls) {
    const { queues } = await call('GET', '/queues');
    await gbCharts.refreshQueues(stale, polls);
    if (stale()) return;
    const admin = me.may.admin;
    syncRows($('#queues tbody'), queues, 'data-queue', (q) => q.name, (q) => {
      const c = q.counts;
      const acts = admin && c.dead > 0;
      return [
        { f: 'name', text: q.name, cls: 'mono' },
        { f: 'pending', text: c.pending, cls: 'num' },
        { f: 'delayed', text: c.delayed, cls: 'num' },
        { f: 'running', text: c.running, cls: 'num' },
        { f: 'dead', text: c.dead, cls: `num ${c.dead ? 'bad' : ''}` },
        { f: 'done', text: c.done, cls: 'num' },
        { f: 'failed', text: c.failed, cls: `num ${c.failed ? 'warn-text' : ''}` },
        { f: 'retried', text: c.retried, cls: 'num' },
        // Retries per minute: the last minute the API sampled.
        { f: 'retry-rate', text: gbCharts.queueRetries(q.name), cls: 'num' },
        Object.assign({ f: 'retries-hour', cls: 'spark-cell' }, gbCharts.queueSpark(q.name)),
        { f: 'actions', sig: acts, cls: 'actions', make: () => (acts
          ? el('span', {}, button('retry-all', 'retry all', { 'data-queue': q.name }), ' ',
            button('purge-dead', 'purge dead', { 'data-queue': q.name }))
          : document.createTextNode('')) },
      ];
    });
    const withDead = queues.filter((q) => q.counts.dead > 0);
    const lists = await Promise.all(withDead.map((q) => allPages(`/queues/${enc(q.name)}/dead`, 'tasks', 100, 5)));
    const tasks = lists.flatMap((l) => l.items);
    if (stale()) return;
    $('#no-dead').hidden = tasks.length > 0;
    syncRows($('#dead tbody'), tasks, 'data-task', (t) => t.task_id, (t) => {
      const retry = t.may_retry;
      return [
        { f: 'queue', text: t.queue, cls: 'mono' },
        { f: 'task', text: t.task_id, cls: 'mono' },
        { f: 'key', text: t.key, cls: 'mono' },
        { f: 'reason', text: t.reason },
        { f: 'runs', text: `${(t.runs || []).length}`, cls: 'num', title: `${t.attempts} attempts` },
        { f: 'died', text: t.resolved ? ago(t.resolved) : '', title: when(t.resolved) },
        { f: 'last-error', text: short(t.last_error, 120), cls: 'error-text message', title: t.last_error || undefined },
        { f: 'actions', sig: retry, cls: 'actions', make: () => (retry
          ? button('retry', 'Retry', { 'data-queue': t.queue, 'data-task-id': t.task_id })
          : document.createTextNode('')) },
      ];
    });
  }

  // Drops what the views remember (the history shown, instance statuses), so the next token
  // never sees the last one's.
  function forget() {
    historyOf = null;
    instanceStatus.clear();
    gbCharts.forget();
    gbControls.forget();
    gbSpend.forget();
  }

  return { forget, refreshOverview, refreshConfig, refreshQueues };
})();
