//! The graph page at `/`: HTML, a script and uPlot (a 50 KB chart library, MIT, version 1.6.32
//! from npm, checked in under `assets/vendor/`), all compiled into the binary so the page needs
//! no network at run time. It reads the schema with SHOW statements and draws `/sensordb/graph`.
//! Open, like `/ping`: the page itself holds no data (its queries need the read scope).

use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../../assets/index.html");
/// Name, content type and content of each asset.
const ASSETS: &[(&str, &str, &str)] = &[
    ("app.js", "text/javascript; charset=utf-8", include_str!("../../assets/app.js")),
    ("app.css", "text/css; charset=utf-8", include_str!("../../assets/app.css")),
    ("uPlot.iife.min.js", "text/javascript; charset=utf-8", include_str!("../../assets/vendor/uPlot.iife.min.js")),
    ("uPlot.min.css", "text/css; charset=utf-8", include_str!("../../assets/vendor/uPlot.min.css")),
];

pub async fn index() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-cache")], INDEX).into_response()
}

pub async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => {
            ([(header::CONTENT_TYPE, *content_type), (header::CACHE_CONTROL, "max-age=3600")], *body).into_response()
        }
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}
