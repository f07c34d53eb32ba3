//! SPEC 2 on every recording, in every format and config, whole and cut after each browser
//! result: the forged text, the big pages and the crashed page on every server.

use staleguard::{Projection, RequestFormat};

use crate::harness::*;
use crate::support;

/// Every format and config, the whole session and every cut of it after a browser result.
/// A big session (5 to 12 MB a body) takes every config in the recorded formats and the
/// whole and lean live page in the formats built from them.
fn session_holds(server: &str, session: &str, big: bool) {
    let failed = failures(server, session);
    let mut projected = 0;
    for (format_name, format, body) in bodies(server, session) {
        let before = value(&body);
        let before_text = serde_json::to_string(&before).expect("JSON");
        let recorded = ["chat", "anthropic"].contains(&format_name);
        let all = configs();
        let configs = match big && !recorded {
            true => &all[..2],
            false => &all[..],
        };
        for (config_name, config) in configs {
            let case = format!("{server}/{session} {format_name} {config_name}");
            let p = project(&body, format, config);
            check_read(&case, &body, (&before, &before_text), &p, config, &failed);
            let again = project(&p.body, format, config);
            assert_eq!(again.body.as_str(), p.body.as_str(), "{case}: idempotent");
            projected += 1;
        }
    }
    assert_eq!(projected, if big { 20 } else { 36 });
    cuts_hold(server, session, &failed);
}

/// The Chat body cut after each browser result, so that every page of the session is the
/// live one once: SPEC 2 whole and lean, and each cut's frozen messages unchanged in the
/// next cut's projection (prefix stability).
fn cuts_hold(server: &str, session: &str, failed: &[String]) {
    let chat = value(&chat(server, session));
    let messages = chat["messages"].as_array().expect("messages").clone();
    let ends: Vec<usize> = (0..messages.len())
        .filter(|&i| messages[i]["role"] == "tool")
        .collect();
    assert!(
        ends.len() >= 3,
        "{server}/{session}: several browser results"
    );
    for (config_name, config) in [&configs()[0], &configs()[1]] {
        let mut previous: Option<Projection> = None;
        for &end in &ends {
            let mut cut = chat.clone();
            cut["messages"]
                .as_array_mut()
                .expect("messages")
                .truncate(end + 1);
            let body = unmask(&serde_json::to_string(&cut).expect("JSON"));
            let case = format!("{server}/{session} cut at {end} {config_name}");
            let p = project(&body, RequestFormat::OpenAiChat, config);
            check(&case, &body, &p, config, failed);
            let again = project(&p.body, RequestFormat::OpenAiChat, config);
            assert_eq!(again.body.as_str(), p.body.as_str(), "{case}: idempotent");
            if let Some(a) = &previous {
                let (ma, mb) = (
                    value(&a.body)["messages"].clone(),
                    value(&p.body)["messages"].clone(),
                );
                for i in 0..support::frozen_message(a).min(ma.as_array().map_or(0, Vec::len)) {
                    assert_eq!(ma[i], mb[i], "{case}: message {i} changed between prefixes");
                }
            }
            previous = Some(p);
        }
    }
}

#[test]
fn forged_text_pwmcp_0_0_41() {
    session_holds("pwmcp-0.0.41", "hostile_text", false);
}

#[test]
fn forged_text_pwmcp_0_0_83() {
    session_holds("pwmcp-0.0.83", "hostile_text", false);
}

#[test]
fn forged_text_cdmcp_1_11_0() {
    session_holds("cdmcp-1.11.0", "hostile_text", false);
}

#[test]
fn big_pages_pwmcp_0_0_41() {
    session_holds("pwmcp-0.0.41", "hostile_big", true);
}

#[test]
fn big_pages_pwmcp_0_0_83() {
    session_holds("pwmcp-0.0.83", "hostile_big", true);
}

#[test]
fn big_pages_cdmcp_1_11_0() {
    session_holds("cdmcp-1.11.0", "hostile_big", true);
}

#[test]
fn crashed_page_every_server() {
    for server in SERVERS {
        session_holds(server, "hostile_deep10k", false);
    }
}
