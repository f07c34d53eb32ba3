//! Upstream routes: one `--upstream`, or several `--route /prefix=URL`.

use axum::http::Uri;

/// Where Gemini's API lives: `--upstream` for a proxy in front of Gemini alone, or
/// `--route /v1beta=https://generativelanguage.googleapis.com/v1beta` beside another
/// provider's upstream (Gemini clients keep their path under the base URL).
pub const GEMINI_UPSTREAM: &str = "https://generativelanguage.googleapis.com";

/// Requests whose path starts with `prefix` go to `upstream`, without the prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub prefix: String,
    pub upstream: String,
}

impl Route {
    /// Parses `/prefix=URL`.
    pub fn parse(text: &str) -> Result<Route, String> {
        let (prefix, upstream) = text
            .split_once('=')
            .ok_or_else(|| format!("route {text:?} is not PREFIX=URL"))?;
        if !prefix.starts_with('/') {
            return Err(format!("route prefix {prefix:?} must start with /"));
        }
        Ok(Route {
            prefix: prefix.trim_end_matches('/').to_string(),
            upstream: upstream_url(upstream)?,
        })
    }

    /// A route for every path.
    pub fn everything(upstream: &str) -> Result<Route, String> {
        Ok(Route {
            prefix: String::new(),
            upstream: upstream_url(upstream)?,
        })
    }
}

fn upstream_url(url: &str) -> Result<String, String> {
    let url = url.trim().trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "upstream {url:?} must be an http:// or https:// URL"
        ));
    }
    Ok(url.to_string())
}

/// All routes; the longest matching prefix wins.
#[derive(Debug, Clone, Default)]
pub struct Routes(pub Vec<Route>);

/// Where a request goes.
pub struct Target {
    url: String,
    path_len: usize,
    path_start: usize,
}

impl Target {
    pub fn as_str(&self) -> &str {
        &self.url
    }

    /// The path part of the target URL.
    pub fn path(&self) -> &str {
        &self.url[self.path_start..self.path_start + self.path_len]
    }
}

impl Routes {
    pub fn target(&self, uri: &Uri) -> Option<Target> {
        let path = uri.path();
        let route = self
            .0
            .iter()
            .filter(|r| {
                r.prefix.is_empty()
                    || path == r.prefix
                    || path
                        .strip_prefix(&r.prefix)
                        .is_some_and(|rest| rest.starts_with('/'))
            })
            .max_by_key(|r| r.prefix.len())?;
        let rest = &path[route.prefix.len()..];
        let rest = if rest.is_empty() { "/" } else { rest };
        let mut url = format!("{}{rest}", route.upstream);
        let path_start = route.upstream.len();
        if let Some(query) = uri.query() {
            url.push('?');
            url.push_str(query);
        }
        Some(Target {
            url,
            path_len: rest.len(),
            path_start,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(routes: &Routes, uri: &str) -> Option<String> {
        routes
            .target(&uri.parse().unwrap())
            .map(|t| t.as_str().to_string())
    }

    #[test]
    fn prefixes_and_queries() {
        let routes = Routes(vec![
            Route::parse("/openai=https://api.openai.com").unwrap(),
            Route::parse("/anthropic=https://api.anthropic.com/").unwrap(),
        ]);
        assert_eq!(
            target(&routes, "/openai/v1/chat/completions").as_deref(),
            Some("https://api.openai.com/v1/chat/completions")
        );
        assert_eq!(
            target(&routes, "/anthropic/v1/messages?beta=true").as_deref(),
            Some("https://api.anthropic.com/v1/messages?beta=true")
        );
        assert_eq!(target(&routes, "/openaix/v1"), None);
        assert_eq!(target(&routes, "/v1/models"), None);
        let one = Routes(vec![Route::everything("http://127.0.0.1:9/base").unwrap()]);
        assert_eq!(
            target(&one, "/v1/models").as_deref(),
            Some("http://127.0.0.1:9/base/v1/models")
        );
        let t = one.target(&"/v1/messages?x=1".parse().unwrap()).unwrap();
        assert_eq!(t.path(), "/v1/messages");
    }

    #[test]
    fn gemini_beside_another_provider() {
        let routes = Routes(vec![
            Route::everything("https://api.openai.com").unwrap(),
            Route::parse(&format!("/v1beta={GEMINI_UPSTREAM}/v1beta")).unwrap(),
        ]);
        assert_eq!(
            target(&routes, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
                .as_deref(),
            Some("https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
        );
        assert_eq!(
            target(&routes, "/v1/chat/completions").as_deref(),
            Some("https://api.openai.com/v1/chat/completions")
        );
    }

    #[test]
    fn bad_routes_are_clear() {
        assert!(Route::parse("openai=https://x")
            .unwrap_err()
            .contains("must start with /"));
        assert!(Route::parse("/openai").unwrap_err().contains("PREFIX=URL"));
        assert!(Route::parse("/o=ftp://x").unwrap_err().contains("http://"));
    }
}
