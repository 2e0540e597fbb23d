// Helpers of gce-backend's dashboard (views.js and app.js load after this file): calls to the
// operator's API, formatting of times and spans, and DOM updates that leave unchanged rows alone.
'use strict';

const gb = (() => {
  const API = new URL('../api/gce-backend/v1', location.href).href;
  const auth = { token: '' }; // the bearer token app.js signed in with
  const $ = (sel) => document.querySelector(sel);
  const enc = encodeURIComponent;

  // ---- the API -------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, body) {
      super((body && body.message) || `HTTP ${status}`);
      this.status = status;
      this.code = body && body.code;
      this.files = (body && body.files) || []; // a Config not found: its file's errors
    }
  }

  // One API call; `payload` (an object) is sent as JSON.
  async function call(method, path, query, payload) {
    const url = new URL(API + path);
    for (const [k, v] of Object.entries(query || {})) url.searchParams.set(k, v);
    const headers = { Authorization: `Bearer ${auth.token}`, Accept: 'application/json' };
    if (payload !== undefined) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(url, {
        method,
        headers,
        body: payload === undefined ? undefined : JSON.stringify(payload),
        cache: 'no-store',
      });
    } catch (e) {
      throw new ApiError(0, { message: `the API cannot be reached (${e.message})` });
    }
    let body = null;
    try { body = await res.json(); } catch (_) { /* not JSON */ }
    if (!res.ok) throw new ApiError(res.status, body || { message: `${res.status} ${res.statusText}` });
    return body;
  }

  // Every page of a paged list (at most `pages` pages of `limit`), and the last page read (what
  // every page carries alike, such as listVms's letGo).
  async function allPages(path, field, limit, pages, query) {
    let out = [];
    let next = null;
    let last = null;
    for (let i = 0; i < pages; i++) {
      const q = Object.assign({ limit: String(limit) }, query || {});
      if (next) q.continuationToken = next;
      last = await call('GET', path, q);
      out = out.concat(last[field] || []);
      next = last.continuationToken;
      if (!next) return { items: out, more: false, last };
    }
    return { items: out, more: true, last };
  }

  // ---- formatting ----------------------------------------------------------------------------

  const pad = (n) => String(n).padStart(2, '0');
  const hms = (d) => `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  function span(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 90) return `${s} s`;
    const m = Math.round(s / 60);
    if (m < 90) return `${m} min`;
    const h = Math.floor(m / 60);
    if (h < 48) return `${h} h ${pad(m % 60)} min`;
    return `${Math.floor(h / 24)} d ${h % 24} h`;
  }
  const ago = (iso) => (iso ? `${span(Date.now() - Date.parse(iso))} ago` : '—');
  function until(iso) {
    if (!iso) return '—';
    const d = Date.parse(iso) - Date.now();
    return d >= 0 ? `in ${span(d)}` : `${span(-d)} ago`;
  }
  // A time as `YYYY-MM-DD HH:MM:SS` (local).
  function when(iso) {
    if (!iso) return '';
    const d = new Date(iso);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hms(d)}`;
  }
  const short = (s, n) => (s && s.length > n ? `${s.slice(0, n - 1)}…` : s || '');
  const secs = (s) => (s ? span(s * 1000) : '0');

  // ---- DOM helpers ---------------------------------------------------------------------------

  // An element: attrs are attributes (`text` sets its text); kids are nodes or strings.
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v === true ? '' : v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  const badge = (text, kind) => el('span', { class: `badge ${kind || ''}`, text });

  // Sets attribute `k` of `e` to `v` (removes it for undefined, null or false), if different.
  function setAttr(e, k, v) {
    if (v === undefined || v === null || v === false) {
      if (e.hasAttribute(k)) e.removeAttribute(k);
    } else if (e.getAttribute(k) !== String(v)) {
      e.setAttribute(k, v === true ? '' : v);
    }
  }

  // Brings one cell up to date: its class and title in place; its content only when the content
  // changed (a text cell's text; a `make` cell's `sig`, or its text when it has no `sig`). A
  // cell whose content did not change keeps its nodes, so a button in it survives the poll.
  function syncCell(td, c) {
    setAttr(td, 'class', c.cls);
    setAttr(td, 'title', c.title);
    const content = c.make
      ? JSON.stringify(['make', c.sig !== undefined ? c.sig : c.text])
      : JSON.stringify(['text', c.text === undefined || c.text === null ? '' : String(c.text)]);
    if (td.dataset.sig === content) return;
    if (c.make) td.replaceChildren(c.make());
    else td.textContent = c.text === undefined || c.text === null ? '' : String(c.text);
    td.dataset.sig = content;
  }

  // Makes `tbody`'s rows those of `items` in order, keyed by `attr`, cell by cell: only a cell
  // whose content changed is replaced (a relative time or a counter changing every poll leaves
  // the row's other cells, its buttons and any selection alone).
  function syncRows(tbody, items, attr, keyOf, cellsOf) {
    const old = new Map();
    for (const tr of tbody.children) old.set(tr.getAttribute(attr), tr);
    const seen = new Set();
    let prev = null;
    for (const it of items) {
      const key = keyOf(it);
      seen.add(key);
      const cells = cellsOf(it);
      let tr = old.get(key);
      if (!tr) {
        tr = el('tr');
        tr.setAttribute(attr, key);
      }
      cells.forEach((c, i) => {
        let td = tr.children[i];
        if (!td || td.getAttribute('data-field') !== c.f) {
          const fresh = el('td', { 'data-field': c.f });
          if (td) tr.replaceChild(fresh, td);
          else tr.append(fresh);
          td = fresh;
        }
        syncCell(td, c);
      });
      while (tr.children.length > cells.length) tr.lastElementChild.remove();
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (want !== tr) tbody.insertBefore(tr, want);
      prev = tr;
    }
    for (const [key, tr] of old) if (!seen.has(key)) tr.remove();
  }

  // Summary cards: [label, value, kind, testid].
  function cards(box, list) {
    const sig = JSON.stringify(list);
    if (box.dataset.sig === sig) return;
    box.dataset.sig = sig;
    box.replaceChildren(...list.map(([label, value, kind, id]) =>
      el('div', { class: `card ${kind || ''}`, 'data-card': id },
        el('div', { class: 'value', text: String(value) }), el('div', { class: 'label', text: label }))));
  }

  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  function banner(node, text) {
    setText(node, text || '');
    node.hidden = !text;
  }

  let flashTimer = null;
  function flash(text) {
    banner($('#flash'), text);
    clearTimeout(flashTimer);
    flashTimer = setTimeout(() => banner($('#flash'), ''), 6000);
  }


  return {
    API, auth, $, enc, ApiError, call, allPages, pad, hms, span, ago, until, when, short, secs,
    el, badge, syncRows, cards, setText, banner, flash,
  };
})();
