//! Scripts the browser tests run in the page: API answers slowed down (and counted), and what
//! the page showed recorded.

/// A script slowing down, in the page, the answers to the API calls whose path ends with
/// `arguments[0]` (made with token `arguments[1]`, or any when null) by `arguments[2]` ms; it
/// counts them in `__starts` (when each was sent) and `__landed` (answers handed to the page).
/// Called again, it replaces the last one.
pub(super) const SLOW_FETCH: &str = "const [suffix, token, ms] = arguments; \
    window.__origFetch = window.__origFetch || window.fetch; \
    const orig = window.__origFetch; \
    window.__starts = []; window.__landed = 0; \
    window.fetch = (url, opts) => { \
      const p = orig.call(window, url, opts); \
      const hit = new URL(String(url)).pathname.endsWith(suffix) && \
        (!token || opts.headers.Authorization === `Bearer ${token}`); \
      if (!hit) return p; \
      window.__starts.push(performance.now()); \
      return p.then(r => new Promise(res => setTimeout(() => { window.__landed += 1; res(r); }, ms))); \
    };";

/// Ends [`SLOW_FETCH`].
pub(super) const FAST_FETCH: &str = "if (window.__origFetch) window.fetch = window.__origFetch;";

/// A script recording every text `#who-name` shows (`__who`) and whether a button of an action
/// was ever on the page (`__buttons`) from now on.
pub(super) const WATCH_WHO: &str = "window.__who = []; window.__buttons = false; \
    const who = document.querySelector('#who-name'); \
    new MutationObserver(() => window.__who.push(who.textContent)) \
      .observe(who, {childList: true, characterData: true, subtree: true}); \
    new MutationObserver(() => { \
      if (document.querySelector('button[data-action]')) window.__buttons = true; \
    }).observe(document.body, {childList: true, subtree: true});";
