//! SPEC 6 over every recorded session: each receipt's observation ID reads back from the
//! stored transcript as the original page, stale-bannered, with no live ref.

mod support;

use staleguard::internal::archive::entries;
use staleguard::internal::refs::has_ref_token;
use staleguard::{Request, RequestFormat, ARCHIVE_TAG};
use support::{on, openai_fixtures, project, read};

fn receipt_ids(body: &str) -> Vec<String> {
    body.match_indices("[staleguard receipt] observation=")
        .filter_map(|(i, m)| body.get(i + m.len()..i + m.len() + 8))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_receipt_reads_back_stale_and_read_only() {
    let mut checked = 0;
    for path in openai_fixtures() {
        let body = read(&path);
        let projected = project(&body);
        let request = Request::read(&body, RequestFormat::Auto).expect("a recorded request");
        let (archive, now) = request.archive(&on());
        let newest = entries(&archive).last().map(|e| e.id.clone());
        for id in receipt_ids(&projected.body) {
            let old = archive
                .read_back(&id, now)
                .unwrap_or_else(|| panic!("{}: receipt {id} does not read back", path.display()));
            assert!(old.banner.starts_with(ARCHIVE_TAG), "{}", old.banner);
            if Some(&id) != newest.as_ref() {
                assert!(
                    old.banner.contains("STALE") && old.banner.contains("superseded"),
                    "{}",
                    old.banner
                );
            }
            assert!(
                !has_ref_token(&old.text),
                "{}: {id} keeps a live ref",
                path.display()
            );
            let original = entries(&archive).find(|e| e.id == id).map(|e| e.text.len());
            assert!(original.is_some_and(|n| n > 0));
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} receipts read back");
}
