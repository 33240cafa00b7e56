//! The live web page at `/`: one HTML file, a script and a style sheet,
//! embedded in the binary (no CDN, no build step). The script polls
//! `/api/v1/topology` every second and draws the graph, the table, the
//! sparklines and the last errors; its buttons call the steering routes.

/// The page.
pub const INDEX: &str = include_str!("page/index.html");

/// The page's assets by path: content type and body.
pub fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/app.js" => Some(("text/javascript; charset=utf-8", include_str!("page/app.js"))),
        "/style.css" => Some(("text/css; charset=utf-8", include_str!("page/style.css"))),
        _ => None,
    }
}
