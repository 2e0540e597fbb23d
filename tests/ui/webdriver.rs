//! A small W3C WebDriver client over `reqwest`, driving Debian's headless Chromium through
//! `chromedriver` (started on a free port per test, killed with its browser on drop): sessions,
//! navigation, elements, clicks, scripts, alerts and screenshots, and polling waits.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use tokio::time::Instant;

use serde_json::{Value, json};

use crate::support::free_port;

/// Debian's Chromium (package `chromium`).
pub(crate) const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's driver for it (package `chromium-driver`).
pub(crate) const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long a wait polls the page before it fails.
pub(crate) const WAIT: Duration = Duration::from_secs(60);
/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Fails (never skips) when Chromium or its driver is missing.
pub(crate) fn require_browser() {
    for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
        assert!(
            std::path::Path::new(path).exists(),
            "{path} is missing: the browser tests need Debian's {package} \
             (scripts/test installs it; or: sudo apt-get install -y chromium chromium-driver)"
        );
    }
}

/// A browser session: chromedriver (in its own process group, with Chromium under it).
pub(crate) struct Browser {
    http: reqwest::Client,
    base: String,
    driver: Child,
    profile: PathBuf,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session with a fresh profile.
    pub(crate) async fn start() -> Browser {
        require_browser();
        use std::os::unix::process::CommandExt;
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{CHROMEDRIVER}: {e}"));
        let profile = crate::support::temp_dir();
        let mut b = Browser {
            http: reqwest::Client::new(),
            base: format!("http://127.0.0.1:{port}"),
            driver,
            profile,
        };
        let started = Instant::now();
        loop {
            let ready = b.http.get(format!("{}/status", b.base)).send().await;
            if let Ok(r) = ready
                && let Ok(v) = r.json::<Value>().await
                && v["value"]["ready"] == true
            {
                break;
            }
            assert!(started.elapsed() < WAIT, "chromedriver did not start on port {port}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,900",
            &format!("--user-data-dir={}", b.profile.display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "unhandledPromptBehavior": "ignore",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
        }}});
        let v = b.raw("POST", "/session", Some(caps)).await;
        let id = v["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {v}")).to_owned();
        b.base = format!("{}/session/{id}", b.base);
        b
    }

    /// One WebDriver command; its `value`, or a panic naming the command and the error.
    async fn raw(&self, verb: &str, path: &str, body: Option<Value>) -> Value {
        self.try_raw(verb, path, body)
            .await
            .unwrap_or_else(|(status, v)| panic!("WebDriver {verb} {path}: {status} {v}"))
    }

    /// One WebDriver command: its `value`, or the HTTP status and the error's `value` (its
    /// `error` names it, e.g. `stale element reference`). A transport failure panics.
    async fn try_raw(&self, verb: &str, path: &str, body: Option<Value>) -> Result<Value, (u16, Value)> {
        let url = format!("{}{path}", self.base);
        let req = match verb {
            "GET" => self.http.get(&url),
            "DELETE" => self.http.delete(&url),
            _ => self.http.post(&url).json(&body.unwrap_or_else(|| json!({}))),
        };
        let res = req.send().await.unwrap_or_else(|e| panic!("{verb} {path}: {e}"));
        let status = res.status();
        let v: Value = res.json().await.unwrap_or_else(|e| panic!("{verb} {path}: {e}"));
        if status.is_success() { Ok(v["value"].clone()) } else { Err((status.as_u16(), v["value"].clone())) }
    }

    /// Opens `url` (waits for the document to load).
    pub(crate) async fn goto(&self, url: &str) {
        self.raw("POST", "/url", Some(json!({"url": url}))).await;
    }

    /// Runs `script` (a function body; `arguments` are `args`) and returns what it returns.
    pub(crate) async fn js(&self, script: &str, args: Value) -> Value {
        self.raw("POST", "/execute/sync", Some(json!({"script": script, "args": args}))).await
    }

    /// The elements matching a CSS selector (their references).
    pub(crate) async fn find_all(&self, css: &str) -> Vec<String> {
        let v = self.raw("POST", "/elements", Some(json!({"using": "css selector", "value": css}))).await;
        v.as_array().into_iter().flatten().filter_map(|e| e[ELEMENT].as_str().map(str::to_owned)).collect()
    }

    /// The one element matching `css`, waited for.
    pub(crate) async fn find(&self, css: &str) -> String {
        let started = Instant::now();
        loop {
            if let Some(e) = self.find_all(css).await.into_iter().next() {
                return e;
            }
            if started.elapsed() > WAIT {
                self.fail(&format!("no element {css:?}")).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Clicks, as a user would, the element matching `css`, waited for: when the page replaced
    /// the element between finding and clicking it (`stale element reference`), finds it again,
    /// until [`WAIT`]. Any other error fails.
    pub(crate) async fn click_on(&self, css: &str) {
        let started = Instant::now();
        loop {
            let element = self.find(css).await;
            match self.try_raw("POST", &format!("/element/{element}/click"), Some(json!({}))).await {
                Ok(_) => return,
                Err((_, v)) if v["error"] == "stale element reference" && started.elapsed() < WAIT => {}
                Err((status, v)) => self.fail(&format!("clicking {css:?}: {status} {v}")).await,
            }
        }
    }

    /// The rendered text of the element matching `css`, waited for (found again when replaced
    /// meanwhile, as [`Browser::click_on`]).
    pub(crate) async fn text_of(&self, css: &str) -> String {
        let started = Instant::now();
        loop {
            let element = self.find(css).await;
            match self.try_raw("GET", &format!("/element/{element}/text"), None).await {
                Ok(v) => return v.as_str().unwrap_or_default().to_owned(),
                Err((_, v)) if v["error"] == "stale element reference" && started.elapsed() < WAIT => {}
                Err((status, v)) => self.fail(&format!("reading {css:?}: {status} {v}")).await,
            }
        }
    }

    /// Types `text` into an element.
    pub(crate) async fn type_in(&self, element: &str, text: &str) {
        self.raw("POST", &format!("/element/{element}/value"), Some(json!({"text": text}))).await;
    }

    /// Accepts the open `confirm()` or `alert()`, waited for.
    pub(crate) async fn accept_alert(&self) {
        let started = Instant::now();
        loop {
            let res = self.http.post(format!("{}/alert/accept", self.base)).json(&json!({})).send().await;
            if res.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            if started.elapsed() > WAIT {
                self.fail("no dialog to accept").await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Resizes the window to `width` × `height` CSS pixels.
    pub(crate) async fn resize(&self, width: u32, height: u32) {
        self.raw("POST", "/window/rect", Some(json!({"width": width, "height": height}))).await;
    }

    /// A PNG of the window.
    pub(crate) async fn screenshot(&self) -> Vec<u8> {
        let v = self.raw("GET", "/screenshot", None).await;
        decode_base64(v.as_str().unwrap_or_default())
    }

    /// Polls `script` every 200 ms until it returns something other than null or false;
    /// returns that. Fails after [`WAIT`] with `what`, the page's text and a screenshot's path.
    pub(crate) async fn wait(&self, what: &str, script: &str, args: Value) -> Value {
        let started = Instant::now();
        loop {
            let v = self.js(script, args.clone()).await;
            if !v.is_null() && v != Value::Bool(false) {
                return v;
            }
            if started.elapsed() > WAIT {
                self.fail(&format!("waited {WAIT:?} for: {what}")).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Panics with `msg`, the page's URL and text, after saving a screenshot.
    pub(crate) async fn fail(&self, msg: &str) -> ! {
        let page = self.js("return location.href + '\\n' + document.body.innerText", json!([])).await;
        let shot = std::env::temp_dir().join(format!("gce-backend-ui-failure-{}.png", std::process::id()));
        let _ = std::fs::write(&shot, self.screenshot().await);
        panic!(
            "{msg}\n(screenshot: {})\n--- page ---\n{}",
            shot.display(),
            page.as_str().unwrap_or_default()
        );
    }

    /// Ends the session (closing Chromium); drop then stops chromedriver.
    pub(crate) async fn quit(self) {
        let _ = self.http.delete(&self.base).send().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver leads its own process group, which holds Chromium too: end them all.
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = self.driver.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// Standard base64 (as WebDriver encodes screenshots).
fn decode_base64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for v in s.bytes().filter_map(val) {
        acc = ((acc << 6) | u32::from(v)) & 0xffff;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
