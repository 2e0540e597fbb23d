//! Unit tests of `api/ui.rs`.

use super::*;

#[test]
fn the_page_names_the_files_it_is_served_with() {
    assert!(INDEX.contains("app.js") && INDEX.contains("style.css"));
    assert!(LIB.contains("api/gce-backend/v1") && INDEX.contains("lib.js"));
    assert!(VIEWS.contains("gbViews") && APP.contains("gbViews"));
    let at = |f: &str| INDEX.find(&format!("<script src=\"{f}\"")).unwrap_or_else(|| panic!("{f}"));
    let order = ["lib.js", "filter.js", "charts.js", "spend.js", "controls.js", "views.js", "app.js"];
    assert!(order.windows(2).all(|w| at(w[0]) < at(w[1])), "scripts out of order");
    assert!(!INDEX.contains("<script>"), "no inline script: the CSP allows only 'self'");
}

#[test]
fn the_page_re_decides_nothing_the_api_answers() {
    let files = [
        ("app.js", APP),
        ("views.js", VIEWS),
        ("lib.js", LIB),
        ("filter.js", FILTER),
        ("charts.js", CHARTS),
        ("spend.js", SPEND),
        ("controls.js", CONTROLS),
    ];
    for (name, js) in files {
        assert!(!js.contains("'reader'") && !js.contains("'writer'"), "{name} copies the role order");
        assert!(!js.contains("ownerOf") && !js.contains(".key.replace"), "{name} parses task keys");
    }
}
