//! Where the API lives: its service name and version in URLs, and the URLs under a root URL
//! (the API's, the references', the schemas'). Handlers and the references both use them.

/// Service name in URLs.
pub const SERVICE: &str = "gce-backend";
/// API version in URLs.
pub const VERSION: &str = "v1";

/// URLs under a root URL (no trailing slash).
#[derive(Debug, Clone)]
pub struct Urls {
    root: String,
}

impl Urls {
    /// URLs under `root`.
    pub fn new(root: &str) -> Self {
        Urls { root: root.trim_end_matches('/').to_owned() }
    }

    /// The root URL.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// `ROOT/api/gce-backend/v1/<path>`.
    pub fn api(&self, path: &str) -> String {
        format!("{}/api/{SERVICE}/{VERSION}/{}", self.root, path.trim_start_matches('/'))
            .trim_end_matches('/')
            .to_owned()
    }

    /// `ROOT/references/<path>`.
    pub fn reference(&self, path: &str) -> String {
        format!("{}/references/{path}", self.root)
    }

    /// `ROOT/schemas/<path>`.
    pub fn schema(&self, path: &str) -> String {
        format!("{}/schemas/{path}", self.root)
    }
}
