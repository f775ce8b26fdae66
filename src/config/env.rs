//! `${env:VAR}` expansion in configuration values, as the OpenTelemetry Collector does it.
//!
//! Expansion runs on the parsed YAML tree (string scalars only), so a variable's value can never
//! change the document's structure. `${VAR}` is accepted as shorthand; `$$` is a literal `$`.
//! `${env:VAR:-default}` takes `default` when `VAR` is unset (as the Collector's env provider:
//! a set but empty variable stays empty). An unset variable without a default is an error
//! naming the key that used it.

use serde_yaml_ng::Value;

/// Expands variables in every string of `value`, using `lookup` to read the environment.
pub fn expand(
    value: &mut Value,
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), String> {
    match value {
        Value::String(s) => {
            if s.contains('$') {
                *s = expand_str(s, path, lookup)?;
            }
            Ok(())
        }
        Value::Sequence(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                expand(item, &format!("{path}[{i}]"), lookup)?;
            }
            Ok(())
        }
        Value::Mapping(map) => {
            for (k, v) in map.iter_mut() {
                let key = k.as_str().map_or_else(|| format!("{k:?}"), str::to_owned);
                let child = if path.is_empty() {
                    key
                } else {
                    format!("{path}.{key}")
                };
                expand(v, &child, lookup)?;
            }
            Ok(())
        }
        Value::Tagged(t) => expand(&mut t.value, path, lookup),
        _ => Ok(()),
    }
}

fn expand_str(
    s: &str,
    path: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body
                .find('}')
                .ok_or_else(|| format!("{path}: unterminated ${{ in {s:?}"))?;
            let reference = &body[..end];
            let (reference_name, default) = match reference.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (reference, None),
            };
            let name = reference_name
                .strip_prefix("env:")
                .unwrap_or(reference_name);
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(format!(
                    "{path}: invalid variable reference ${{{reference}}}"
                ));
            }
            let value = lookup(name)
                .or_else(|| default.map(str::to_owned))
                .ok_or_else(|| format!("{path}: environment variable {name} is not set"))?;
            out.push_str(&value);
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "DSN" => Some("https://k@h/1".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_and_names_missing_variables() {
        let mut v: Value =
            serde_yaml_ng::from_str("a: {dsn: '${env:DSN}', b: ['x${EMPTY}y', '$$5', 'a$b']}")
                .unwrap();
        expand(&mut v, "", &env).unwrap();
        assert_eq!(v["a"]["dsn"].as_str(), Some("https://k@h/1"));
        assert_eq!(v["a"]["b"][0].as_str(), Some("xy"));
        assert_eq!(v["a"]["b"][1].as_str(), Some("$5"));
        assert_eq!(v["a"]["b"][2].as_str(), Some("a$b"));
        let mut bad: Value =
            serde_yaml_ng::from_str("exporters: {sentry: {dsn: '${env:NOPE}'}}").unwrap();
        assert_eq!(
            expand(&mut bad, "", &env),
            Err("exporters.sentry.dsn: environment variable NOPE is not set".into())
        );
        let mut v: Value = serde_yaml_ng::from_str(
            "{a: '${env:NOPE:-127.0.0.1:4317}', b: '${env:DSN:-x}', c: '${EMPTY:-d}', d: '${NOPE:-}'}",
        )
        .unwrap();
        expand(&mut v, "", &env).unwrap();
        assert_eq!(
            v["a"].as_str(),
            Some("127.0.0.1:4317"),
            "unset: the default"
        );
        assert_eq!(v["b"].as_str(), Some("https://k@h/1"), "set: the value");
        assert_eq!(v["c"].as_str(), Some(""), "set but empty: empty");
        assert_eq!(v["d"].as_str(), Some(""), "empty default");
        let mut bad: Value = serde_yaml_ng::from_str("k: '${env:X'").unwrap();
        assert!(
            expand(&mut bad, "", &env)
                .unwrap_err()
                .starts_with("k: unterminated")
        );
    }
}
