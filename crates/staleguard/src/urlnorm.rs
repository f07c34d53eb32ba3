//! URL normalisation for grounding evidence: two URLs name the same page when they differ
//! only in scheme or host case, a default port, a trailing slash on the path, or a fragment.

/// The normal form of `url`. Text that is not an absolute URL is returned trimmed.
pub(crate) fn normalise(url: &str) -> String {
    let url = url.trim();
    let url = url.split('#').next().unwrap_or(url);
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let scheme = scheme.to_ascii_lowercase();
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (path, query) = match tail.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (tail, None),
    };
    let mut out = format!("{scheme}://{}", host(&scheme, authority));
    out.push_str(path.trim_end_matches('/'));
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// Lower-cases the host (not the user info) and drops the scheme's default port.
fn host(scheme: &str, authority: &str) -> String {
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let mut hostport = hostport.to_ascii_lowercase();
    let default = match scheme {
        "http" | "ws" => Some(":80"),
        "https" | "wss" => Some(":443"),
        "ftp" => Some(":21"),
        _ => None,
    };
    if let Some(port) = default {
        if hostport.ends_with(port) && !hostport.ends_with(']') {
            hostport.truncate(hostport.len() - port.len());
        }
    }
    match user {
        Some(u) => format!("{u}@{hostport}"),
        None => hostport,
    }
}

#[cfg(test)]
mod tests {
    use super::normalise;

    #[test]
    fn equivalent_forms() {
        let same = [
            "http://127.0.0.1:8431/research/articles/a.html",
            "HTTP://127.0.0.1:8431/research/articles/a.html#top",
            "http://127.0.0.1:8431/research/articles/a.html/",
        ];
        for u in same {
            assert_eq!(normalise(u), normalise(same[0]), "{u}");
        }
        assert_eq!(
            normalise("https://Shop.Example:443/"),
            "https://shop.example"
        );
        assert_eq!(
            normalise("http://shop.example:80/a/?q=1#x"),
            "http://shop.example/a?q=1"
        );
        assert_eq!(
            normalise("http://User@Shop.example:8080/A"),
            "http://User@shop.example:8080/A"
        );
    }

    #[test]
    fn different_pages_stay_different() {
        assert_ne!(
            normalise("http://a.test/x?q=1"),
            normalise("http://a.test/x?q=2")
        );
        assert_ne!(normalise("http://a.test/X"), normalise("http://a.test/x"));
        assert_ne!(
            normalise("http://a.test:8080/"),
            normalise("http://a.test/")
        );
        assert_eq!(normalise(" not a url "), "not a url");
    }
}
