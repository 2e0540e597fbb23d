// gce-backend's dashboard: a hash router over three views (#/ the Configs, #/configs/<prefix>
// one Config, #/queues the queues and their dead tasks; drawn by views.js, loaded before this
// file with the charts, controls and search box) that polls the operator's API every two seconds (counted from the end of each refresh)
// and updates the page in place, cell by cell; sign-in, sign-out and the buttons' actions.
// Plain JavaScript, no framework, no build step.
'use strict';

(() => {
  const { auth, $, enc, call, hms, setText, banner, flash } = gb;
  const { refreshOverview, refreshConfig, refreshQueues } = gbViews;
  const POLL_MS = 2000;
  const STORE_KEY = 'gce-backend-token';
  try { auth.token = localStorage.getItem(STORE_KEY) || ''; } catch (_) { /* storage disabled */ }
  let me = null; // whoami's answer
  // Bumped by every sign-in and sign-out: a refresh (or whoami, or action) started under an
  // older generation used another token, and its results are dropped when they land.
  let generation = 0;
  let inFlight = null; // the refresh running now (a promise)
  let wanted = null; // { promise, resolve }: a refresh asked for while one runs
  let timer = null; // the next scheduled poll
  let polls = 0;
  let lastOk = null;
  let failingSince = null; // the first failed refresh since the last good one

  // ---- routing and sign-in -------------------------------------------------------------------

  function route() {
    const h = location.hash.replace(/^#/, '');
    if (h.startsWith('/configs/')) return { view: 'config', prefix: decodeURIComponent(h.slice(9)) };
    if (h === '/queues') return { view: 'queues' };
    return { view: 'overview' };
  }

  // `#token=…` (alone, or with a route: `#/queues&token=…`) signs in once and leaves the URL.
  function tokenFromUrl() {
    const h = location.hash.replace(/^#/, '');
    if (!/(^|&)token=/.test(h)) return;
    const rest = [];
    for (const part of h.split('&')) {
      if (part.startsWith('token=')) signIn(decodeURIComponent(part.slice(6)));
      else if (part) rest.push(part);
    }
    history.replaceState(null, '', `${location.pathname}${location.search}#${rest.join('&') || '/'}`);
  }

  function signIn(t) {
    generation += 1;
    forget();
    auth.token = t.trim();
    me = null; // whoami is asked again, with the new token
    try { localStorage.setItem(STORE_KEY, auth.token); } catch (_) { /* storage disabled */ }
  }

  function signOut(message) {
    generation += 1;
    auth.token = '';
    me = null;
    try { localStorage.removeItem(STORE_KEY); } catch (_) { /* storage disabled */ }
    forget();
    showLogin(message);
  }

  // Drops every row and card shown, so the next token never sees the last one's data, and the
  // last one's failing refreshes (no stale banner carried over).
  function forget() {
    failingSince = null;
    document.body.classList.remove('stale');
    for (const tb of document.querySelectorAll('main tbody')) tb.replaceChildren();
    for (const box of document.querySelectorAll('.cards, .facts')) {
      box.replaceChildren();
      box.dataset.sig = '';
    }
    gbViews.forget();
  }

  function show(view) {
    for (const v of ['login', 'overview', 'config', 'queues']) $(`#view-${v}`).hidden = v !== view;
    const signedIn = view !== 'login';
    $('#nav').hidden = !signedIn;
    $('#toolbar').hidden = !signedIn || view === 'queues';
    $('#who').hidden = !signedIn;
    for (const a of document.querySelectorAll('[data-nav]')) {
      a.classList.toggle('active', a.dataset.nav === view || (view === 'config' && a.dataset.nav === 'overview'));
    }
  }

  function showLogin(message) {
    show('login');
    banner($('#banner'), '');
    setText($('#updated'), '');
    const err = $('#login-error');
    setText(err, message || '');
    err.hidden = !message;
  }

  function renderWho() {
    setText($('#who-name'), `${me.name} · ${me.role}`);
    $('#read-only').hidden = me.may.write;
  }

  // ---- actions -------------------------------------------------------------------------------

  async function act(btn) {
    const q = btn.dataset.queue;
    const id = btn.dataset.taskId;
    let method;
    let path;
    let done;
    let body;
    let control = null; // a Config or VM control's request (controls.js)
    switch (btn.dataset.action) {
      case 'retry':
        [method, path, done] = ['POST', `/queues/${enc(q)}/tasks/${enc(id)}/retry`, `Task ${id} of ${q} is queued again.`];
        break;
      case 'retry-all':
        if (!confirm(`Put every dead task of ${q} back on the queue?`)) return;
        [method, path, done] = ['POST', `/queues/${enc(q)}/dead/retry`, null];
        break;
      case 'purge-dead':
        if (!confirm(`Drop every dead task of ${q}? This cannot be undone.`)) return;
        [method, path, done] = ['DELETE', `/queues/${enc(q)}/dead`, null];
        break;
      default:
        control = gbControls.request(btn);
        if (!control) return;
        ({ method, path, body } = control);
    }
    const g = generation;
    btn.disabled = true;
    try {
      const r = await call(method, path, undefined, body);
      if (g !== generation) return; // signed in or out meanwhile
      if (control) flash(gbControls.done(control, r));
      else flash(done || `${r.count} dead task${r.count === 1 ? '' : 's'} of ${q} ${method === 'POST' ? 'queued again' : 'dropped'}.`);
    } catch (e) {
      if (g !== generation) return;
      if (e.status === 401) return signOut(e.message);
      flash(`Failed: ${e.message}`);
    }
    // The page shows the action's effect at once; the button (kept by syncRows while its cell
    // does not change) may be pressed again once that refresh is in.
    await poll();
    btn.disabled = false;
  }

  // ---- the loop ------------------------------------------------------------------------------

  async function refresh(stale) {
    if (!auth.token) return show('login');
    if (!me) {
      const who = await call('GET', '/whoami');
      if (stale()) return;
      me = who;
    }
    renderWho();
    const r = route();
    show(r.view);
    if (r.view === 'overview') await refreshOverview(stale);
    else if (r.view === 'config') await refreshConfig(r.prefix, stale, polls);
    else await refreshQueues(stale, me, polls);
  }

  // One refresh, its outcome shown unless the token changed while it ran.
  async function cycle() {
    const g = generation;
    const stale = () => g !== generation;
    try {
      await refresh(stale);
      if (stale() || !auth.token) return;
      lastOk = new Date();
      failingSince = null;
      polls += 1;
      document.body.classList.remove('stale');
      banner($('#banner'), '');
      setText($('#updated'), `updated ${hms(lastOk)}`);
    } catch (e) {
      if (stale()) return; // another token's answer: not this one's business
      if (e.status === 401) signOut(e.message);
      else {
        // The data shown is stale: greyed, and the banner says since when.
        failingSince = failingSince || new Date();
        document.body.classList.add('stale');
        const since = `since ${hms(failingSince)}`;
        const shown = lastOk ? `; the data shown (greyed) is from ${hms(lastOk)}` : '';
        banner($('#banner'), e.status
          ? `The API answers ${e.status} ${since}: ${e.message}${shown}`
          : `Cannot reach the API ${since}: ${e.message}${shown}`);
      }
    }
  }

  // Refreshes now, or right after the refresh in flight (once, however often asked meanwhile);
  // resolves when that refresh is done. The next poll is due POLL_MS after a refresh ends, so
  // polls never run back to back however slow the API is.
  function poll() {
    if (inFlight) {
      if (!wanted) {
        let resolve;
        const promise = new Promise((r) => { resolve = r; });
        wanted = { promise, resolve };
      }
      return wanted.promise;
    }
    clearTimeout(timer);
    timer = null;
    inFlight = cycle().finally(() => {
      inFlight = null;
      if (wanted) {
        const w = wanted;
        wanted = null;
        poll().then(w.resolve);
      } else {
        timer = setTimeout(poll, POLL_MS);
      }
    });
    return inFlight;
  }

  function start() {
    tokenFromUrl();
    $('#login').addEventListener('submit', (ev) => {
      ev.preventDefault();
      signIn($('#token-input').value);
      $('#token-input').value = '';
      poll();
    });
    $('#sign-out').addEventListener('click', (ev) => {
      ev.preventDefault();
      signOut('');
    });
    document.addEventListener('click', (ev) => {
      const btn = ev.target.closest('button[data-action]');
      if (btn) act(btn);
      // An error's VM: the VMs above, filtered to it.
      const vm = ev.target.closest('a[data-show-vm]');
      if (vm) {
        ev.preventDefault();
        gbFilter.set(vm.dataset.showVm);
        const row = document.querySelector(`#vms tr[data-vm="${CSS.escape(vm.dataset.showVm)}"]`);
        if (row) row.scrollIntoView({ block: 'center' });
      }
    });
    gbFilter.start();
    window.addEventListener('hashchange', () => {
      tokenFromUrl();
      poll();
    });
    poll();
  }

  start();
})();
