// The dashboard's controls (lib.js loads before this file, app.js after): pause or resume a
// Config, set its amount, recycle a VM. Shown only where the API says the caller may
// (`may_change` of the Config entry); each asks for confirmation, then calls the method the CLI
// calls; app.js sends it and refreshes the page, so the result shows without a reload.
'use strict';

const gbControls = (() => {
  const { $, enc, el } = gb;

  function button(action, text, attrs) {
    return el('button', Object.assign({ type: 'button', 'data-action': action }, attrs), text);
  }

  // The Config page's controls for `entry` (the API's Config entry): nothing unless the caller
  // may change it. Redrawn only when what they offer changes, so typing survives the polls.
  function config(entry) {
    const box = $('#config-controls');
    const c = entry.config;
    const own = entry.status.paused;
    const may = entry.may_change;
    const sig = JSON.stringify([c.prefix, may, !!own, c.amount.min, c.amount.max]);
    box.hidden = !may;
    if (box.dataset.sig !== sig) {
      box.dataset.sig = sig;
      box.replaceChildren();
      if (!may) return;
      const pause = own
        ? [button('resume', 'resume', { 'data-prefix': c.prefix })]
        : [el('input', { id: 'pause-reason', type: 'text', placeholder: 'why pause (optional)', 'data-testid': 'pause-reason', maxlength: '200' }),
          button('pause', 'pause', { 'data-prefix': c.prefix, class: 'danger' })];
      box.append(
        el('span', { class: 'control' }, ...pause),
        el('span', { class: 'control' },
          el('label', { for: 'amount-input', text: 'amount' }),
          el('input', { id: 'amount-input', type: 'number', min: String(c.amount.min), max: String(c.amount.max), step: '1', 'data-testid': 'amount-input' }),
          button('set-amount', 'set', { 'data-prefix': c.prefix })));
    }
    const input = $('#amount-input');
    if (input && document.activeElement !== input && input.dataset.shown !== String(entry.amount)) {
      input.value = String(entry.amount);
      input.dataset.shown = String(entry.amount);
    }
  }

  // A VM row's Recycle button, when the caller may change its Config (`may`).
  function recycleCell(v, may) {
    return { f: 'actions', sig: may, cls: 'actions', make: () => (may
      ? button('recycle', 'recycle', { 'data-vm': v.vm.id, class: 'danger' })
      : document.createTextNode('')) };
  }

  // The call a control's button stands for, once confirmed: { method, path, body, done }; null
  // when it is none of these or the operator said no.
  function request(btn) {
    const p = btn.dataset.prefix;
    switch (btn.dataset.action) {
      case 'pause': {
        const reason = ($('#pause-reason') || {}).value || '';
        if (!confirm(`Pause ${p}? No VM is created or replaced until it is resumed (deletion goes on).`)) return null;
        return { method: 'POST', path: `/configs/${enc(p)}/pause`, body: { reason: reason.trim() }, done: `${p} is paused.` };
      }
      case 'resume':
        if (!confirm(`Resume ${p}?`)) return null;
        return { method: 'POST', path: `/configs/${enc(p)}/resume`, done: `${p} is resumed.` };
      case 'set-amount': {
        const input = $('#amount-input');
        const n = Number(input.value);
        if (!Number.isInteger(n) || n < 0) {
          gb.flash(`Not an amount: ${input.value}`);
          return null;
        }
        if (!confirm(`Set the amount of ${p} to ${n}? (clamped to its bounds ${input.min} to ${input.max})`)) return null;
        input.blur();
        input.dataset.shown = '';
        return { method: 'PUT', path: `/configs/${enc(p)}/amount`, body: { amount: n }, done: null, amount: true };
      }
      case 'recycle': {
        const id = btn.dataset.vm;
        if (!confirm(`Recycle ${id}? Its bot is terminated and its instance deleted; a new one replaces it.`)) return null;
        return { method: 'POST', path: `/vms/${enc(id)}/recycle`, done: `${id} is recycled: it drains and a new one replaces it.` };
      }
      default:
        return null;
    }
  }

  // What the page says once a request succeeded with answer `r`.
  function done(req, r) {
    if (req.amount) return `The amount of ${r.config.prefix} is ${r.amount}.`;
    return req.done;
  }

  function forget() {
    const box = $('#config-controls');
    box.replaceChildren();
    box.dataset.sig = '';
    box.hidden = true;
  }

  return { config, recycleCell, request, done, forget };
})();
