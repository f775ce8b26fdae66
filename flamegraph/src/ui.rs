//! The viewer: a plain HTML page with filter pickers and the flamegraph rendered server-side by
//! `inferno` as an interactive SVG (click to zoom, Ctrl-F search), inlined into the page; no
//! external resources.

use crate::flamegraph::Flamegraph;
use crate::query::{self, FlamegraphParams};
use crate::store::Facets;
use crate::web::{AppState, TOKEN_COOKIE, error, now_secs, query_pairs, run_query};
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use std::fmt::Write as _;
use std::sync::Arc;

/// Time ranges offered by the picker (`""` = everything stored).
const PERIODS: &[(&str, &str)] = &[
    ("", "All stored data"),
    ("15m", "Last 15 minutes"),
    ("1h", "Last hour"),
    ("24h", "Last 24 hours"),
    ("72h", "Last 72 hours"),
    ("7d", "Last 7 days"),
    ("30d", "Last 30 days"),
    ("90d", "Last 90 days"),
    ("custom", "Custom (UTC)…"),
];

const DATA_SOURCES: &[(&str, &str)] = &[
    ("profiles", "All profiles"),
    ("transactions", "Linked to transactions"),
    ("spans", "Linked to spans"),
    ("functions", "Containing a function"),
];

/// HTML-escapes text and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The viewer's form values, with empty fields dropped and the viewer's defaults applied:
/// `dataSource=profiles` and the whole stored time range.
fn viewer_pairs(raw: Option<&str>, facets: &Facets) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = query_pairs(raw)
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .filter(|(k, v)| !(k == "statsPeriod" && v == "custom"))
        .collect();
    let has = |pairs: &[(String, String)], k: &str| pairs.iter().any(|(key, _)| key == k);
    if !has(&pairs, "dataSource") && !has(&pairs, "fingerprint") {
        pairs.push(("dataSource".into(), "profiles".into()));
    }
    if !has(&pairs, "statsPeriod") && !has(&pairs, "start") && !has(&pairs, "end") {
        let (first, last) = match (facets.first, facets.last) {
            (Some(f), Some(l)) => (f, l),
            _ => (now_secs() - 3600.0, now_secs()),
        };
        let iso = |t: f64| {
            chrono::DateTime::from_timestamp(t.floor() as i64, 0)
                .unwrap_or_default()
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        };
        pairs.push(("start".into(), iso(first)));
        pairs.push(("end".into(), iso(last + 1.0)));
    }
    pairs
}

/// A frame's label in the SVG: `function (package)`; `;` would split the folded stack.
fn label(name: &str, package: &str) -> String {
    let name = if name.is_empty() { "<unknown>" } else { name };
    let l = if package.is_empty() {
        name.to_string()
    } else {
        format!("{name} ({package})")
    };
    l.replace(';', ",")
}

/// Renders the flamegraph with inferno; `None` when there is nothing to draw.
pub(crate) fn render_svg(fg: &Flamegraph, title: &str) -> Option<String> {
    if fg.samples.is_empty() {
        return None;
    }
    let labels: Vec<String> = fg.frames.iter().map(|f| label(&f.name, &f.image)).collect();
    let lines: Vec<String> = fg
        .samples
        .iter()
        .filter(|s| s.count > 0 && !s.stack.is_empty())
        .map(|s| {
            let mut line = String::new();
            for (i, &f) in s.stack.iter().enumerate() {
                if i > 0 {
                    line.push(';');
                }
                line.push_str(&labels[f as usize]);
            }
            let _ = write!(line, " {}", s.count);
            line
        })
        .collect();
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.subtitle = Some(format!(
        "{} chunks, {} threads, {} samples",
        fg.chunks,
        fg.threads,
        fg.samples.iter().map(|s| s.count).sum::<u64>()
    ));
    opts.count_name = "samples".into();
    opts.hash = true;
    opts.deterministic = true;
    opts.text_truncate_direction = inferno::flamegraph::TextTruncateDirection::Right;
    let mut out = Vec::new();
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out).ok()?;
    String::from_utf8(out).ok()
}

async fn facets(state: &AppState) -> Result<Facets, Response> {
    let store = Arc::clone(&state.store);
    match tokio::task::spawn_blocking(move || store.facets()).await {
        Ok(Ok(f)) => Ok(f),
        _ => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "profile store error",
        )),
    }
}

async fn flamegraph_for(
    state: &AppState,
    pairs: &[(String, String)],
) -> Result<(FlamegraphParams, Flamegraph), Result<String, Response>> {
    let params = query::parse_params(pairs, now_secs()).map_err(Ok)?;
    run_query(Arc::clone(&state.store), params)
        .await
        .map_err(Err)
}

/// `GET /ui/flamegraph.svg`: the flamegraph of the filters as `image/svg+xml`.
pub(crate) async fn svg(State(state): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    let facets = match facets(&state).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    let pairs = viewer_pairs(raw.as_deref(), &facets);
    let fg = match flamegraph_for(&state, &pairs).await {
        Ok((_, fg)) => fg,
        Err(Ok(msg)) => return error(StatusCode::BAD_REQUEST, &msg),
        Err(Err(resp)) => return resp,
    };
    let body = render_svg(&fg, "profilink flamegraph").unwrap_or_else(|| {
        "<?xml version=\"1.0\" standalone=\"no\"?><svg xmlns=\"http://www.w3.org/2000/svg\" \
         width=\"600\" height=\"60\"><text x=\"10\" y=\"35\" font-family=\"sans-serif\">\
         No samples match these filters.</text></svg>"
            .to_string()
    });
    (
        [(header::CONTENT_TYPE, "image/svg+xml; charset=utf-8")],
        body,
    )
        .into_response()
}

/// `GET /ui/`: the viewer page.
pub(crate) async fn index(State(state): State<AppState>, RawQuery(raw): RawQuery) -> Response {
    let facets = match facets(&state).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    let form = query_pairs(raw.as_deref());
    let pairs = viewer_pairs(raw.as_deref(), &facets);
    let (status, body) = match flamegraph_for(&state, &pairs).await {
        Ok((_, fg)) => {
            let summary = format!(
                "{} chunks · {} threads · {} samples · {} functions",
                fg.chunks,
                fg.threads,
                fg.samples.iter().map(|s| s.count).sum::<u64>(),
                fg.frames.len()
            );
            let graph = match render_svg(&fg, "profilink flamegraph") {
                Some(svg) => {
                    // Inline the <svg> element itself (drop the XML prolog and doctype).
                    let at = svg.find("<svg").unwrap_or(0);
                    svg[at..].to_string()
                }
                None => "<p class=\"empty\">No samples match these filters.</p>".to_string(),
            };
            (StatusCode::OK, (summary, graph))
        }
        Err(Ok(msg)) => (
            StatusCode::BAD_REQUEST,
            (
                String::new(),
                format!("<p class=\"error\">{}</p>", esc(&msg)),
            ),
        ),
        Err(Err(resp)) => return resp,
    };
    let api_query: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter())
        .finish();
    let html = page(&facets, &form, &body.0, &body.1, &api_query);
    (status, Html(html)).into_response()
}

fn selected(form: &[(String, String)], key: &str, value: &str) -> &'static str {
    if form.iter().any(|(k, v)| k == key && v == value) {
        " selected"
    } else {
        ""
    }
}

fn form_value<'a>(form: &'a [(String, String)], key: &str) -> &'a str {
    form.iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or("")
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;background:#fafafa;color:#222}\
header{background:#2b1d38;color:#fff;padding:10px 16px}h1{font-size:18px;margin:0}\
form{display:flex;flex-wrap:wrap;gap:10px 16px;align-items:end;padding:12px 16px;background:#fff;\
border-bottom:1px solid #ddd}label{display:flex;flex-direction:column;font-size:12px;color:#555;gap:3px}\
select,input,button{font-size:14px;padding:4px 6px}button{cursor:pointer}\
.summary{padding:6px 16px;margin:0;font-size:13px;color:#444}#flamegraph{padding:0 8px 16px}\
#flamegraph svg{width:100%;height:auto}.error{color:#b00020;padding:0 16px}.empty{padding:0 16px}";

const SCRIPT: &str = r#"(function () {
  var form = document.getElementById('filters');
  var period = document.getElementById('period');
  var custom = document.getElementById('custom');
  function sync() { custom.style.display = period.value === 'custom' ? 'flex' : 'none'; }
  period.addEventListener('change', sync);
  sync();
  form.querySelectorAll('select').forEach(function (s) {
    s.addEventListener('change', function () { if (s !== period || period.value !== 'custom') form.requestSubmit(); });
  });
  form.addEventListener('submit', function () {
    form.querySelectorAll('input,select').forEach(function (el) {
      if (!el.value || (el === period && el.value === 'custom')) el.disabled = true;
    });
    if (period.value !== 'custom') custom.querySelectorAll('input').forEach(function (el) { el.disabled = true; });
  });
})();"#;

fn page(
    facets: &Facets,
    form: &[(String, String)],
    summary: &str,
    graph: &str,
    api_query: &str,
) -> String {
    let mut h = String::with_capacity(graph.len() + 8192);
    h.push_str("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">");
    h.push_str("<title>profilink flamegraph</title><style>");
    h.push_str(STYLE);
    h.push_str("</style></head><body><header><h1>profilink · flamegraph</h1></header>");
    h.push_str("<form id=\"filters\" method=\"get\" action=\"/ui/\">");

    h.push_str("<label>Project<select name=\"project\"><option value=\"-1\">All projects</option>");
    for p in &facets.projects {
        let v = p.to_string();
        let _ = write!(
            h,
            "<option value=\"{v}\"{}>{v}</option>",
            selected(form, "project", &v)
        );
    }
    h.push_str("</select></label>");

    h.push_str("<label>Environment<select name=\"environment\"><option value=\"\">All environments</option>");
    for e in &facets.environments {
        let _ = write!(
            h,
            "<option value=\"{0}\"{1}>{0}</option>",
            esc(e),
            selected(form, "environment", e)
        );
    }
    h.push_str("</select></label>");

    let has_custom = !form_value(form, "start").is_empty() || !form_value(form, "end").is_empty();
    h.push_str("<label>Time range<select name=\"statsPeriod\" id=\"period\">");
    for (v, text) in PERIODS {
        let sel = if *v == "custom" {
            if has_custom && form_value(form, "statsPeriod").is_empty() {
                " selected"
            } else {
                ""
            }
        } else {
            selected(form, "statsPeriod", v)
        };
        let _ = write!(h, "<option value=\"{v}\"{sel}>{text}</option>");
    }
    h.push_str("</select></label>");
    let _ = write!(
        h,
        "<span id=\"custom\" style=\"display:none;gap:8px\"><label>Start (UTC)<input type=\"datetime-local\" \
         name=\"start\" value=\"{}\"></label><label>End (UTC)<input type=\"datetime-local\" name=\"end\" \
         value=\"{}\"></label></span>",
        esc(form_value(form, "start")),
        esc(form_value(form, "end"))
    );

    h.push_str("<label>Data source<select name=\"dataSource\">");
    for (v, text) in DATA_SOURCES {
        let _ = write!(
            h,
            "<option value=\"{v}\"{}>{text}</option>",
            selected(form, "dataSource", v)
        );
    }
    h.push_str("</select></label>");
    let _ = write!(
        h,
        "<label>Query<input name=\"query\" size=\"32\" placeholder=\"release:1.* !environment:dev\" \
         value=\"{}\"></label><label>Fingerprint<input name=\"fingerprint\" size=\"11\" \
         inputmode=\"numeric\" value=\"{}\"></label><button type=\"submit\">Show</button></form>",
        esc(form_value(form, "query")),
        esc(form_value(form, "fingerprint"))
    );

    let _ = write!(
        h,
        "<p class=\"summary\">{} · {} chunks stored · <a href=\"/ui/flamegraph.svg?{q}\">SVG</a> · \
         <a href=\"/api/0/organizations/0/profiling/flamegraph/?{q}\">JSON</a></p>",
        esc(summary),
        facets.chunks,
        q = esc(api_query)
    );
    h.push_str("<div id=\"flamegraph\">");
    h.push_str(graph);
    h.push_str("</div><script>");
    h.push_str(SCRIPT);
    h.push_str("</script></body></html>");
    h
}

/// The page shown instead of the viewer when a token is required and missing or wrong.
pub(crate) fn login_page(wrong: bool) -> Response {
    let msg = if wrong {
        "<p class=\"error\">That token was not accepted.</p>"
    } else {
        ""
    };
    let html = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>profilink flamegraph</title>\
         <style>{STYLE}</style></head><body><header><h1>profilink · flamegraph</h1></header>{msg}\
         <form id=\"login\"><label>API token<input type=\"password\" id=\"token\" autocomplete=\"off\">\
         </label><button type=\"submit\">Open viewer</button></form><script>\
         document.getElementById('login').addEventListener('submit', function (e) {{ e.preventDefault();\
         document.cookie = '{TOKEN_COOKIE}=' + encodeURIComponent(document.getElementById('token').value) +\
         '; path=/ui; SameSite=Strict'; location.reload(); }});</script></body></html>"
    );
    (StatusCode::UNAUTHORIZED, Html(html)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_escaping() {
        assert_eq!(label("f", ""), "f");
        assert_eq!(label("", "m"), "<unknown> (m)");
        assert_eq!(label("a;b", "m"), "a,b (m)");
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn viewer_defaults() {
        let facets = Facets {
            first: Some(100.0),
            last: Some(200.0),
            ..Default::default()
        };
        let p = viewer_pairs(Some("environment=&statsPeriod=custom&project=3"), &facets);
        assert!(p.contains(&("project".into(), "3".into())));
        assert!(p.contains(&("dataSource".into(), "profiles".into())));
        assert!(p.iter().any(|(k, _)| k == "start"));
        assert!(
            !p.iter()
                .any(|(k, _)| k == "environment" || k == "statsPeriod")
        );
        let p = viewer_pairs(Some("statsPeriod=1h&fingerprint=5"), &facets);
        assert!(!p.iter().any(|(k, _)| k == "dataSource" || k == "start"));
    }
}
