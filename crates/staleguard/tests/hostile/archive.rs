//! SPEC 6 on every hostile session: the archive lists each page on one line and reads
//! every receipt back.

use staleguard::internal::refs::has_ref_token;
use staleguard::{RequestFormat, Status};

use crate::harness::*;
use crate::support::on;

/// SPEC 6 on every hostile session: each receipt reads back under a one-line banner of ours,
/// every ref neutralised; the list has one line per observation, however its titles and URLs
/// read (quotes, `[staleguard receipt]`, U+2028, bidi and zero-width characters).
#[test]
fn the_archive_lists_each_page_on_one_line_and_reads_every_receipt_back() {
    use staleguard::internal::archive::entries;
    let mut read_back = 0;
    for server in SERVERS {
        for session in SESSIONS {
            let body = chat(server, session);
            let p = project(&body, RequestFormat::OpenAiChat, &on());
            let request = staleguard::Request::read(&body, RequestFormat::Auto).expect("reads");
            let (archive, now) = request.archive(&on());
            let list = archive.list(now);
            let lines: Vec<&str> = list.split('\n').collect();
            assert_eq!(
                lines.len(),
                1 + archive.len(),
                "{server}/{session}: {list:.2000}"
            );
            assert!(lines[0].starts_with(staleguard::ARCHIVE_TAG));
            for (line, entry) in lines[1..].iter().zip(entries(&archive)) {
                assert!(
                    line.starts_with(&format!("- {} | ", entry.id)),
                    "{line:.300}"
                );
                assert!(!has_ref_token(line), "{line:.300}");
            }
            for r in p
                .report()
                .results
                .iter()
                .filter(|r| r.status == Status::Collapsed)
            {
                let back = archive
                    .read_back(&r.observation_id, now)
                    .unwrap_or_else(|| {
                        panic!("{server}/{session}: {} reads back", r.observation_id)
                    });
                assert!(
                    back.banner.starts_with(staleguard::ARCHIVE_TAG),
                    "{}",
                    back.banner
                );
                assert!(
                    !back.banner.contains('\n'),
                    "{server}/{session}: {}",
                    back.banner
                );
                assert!(
                    !has_ref_token(&back.banner) && !has_ref_token(&back.text),
                    "{server}/{session}"
                );
                read_back += 1;
            }
        }
    }
    assert!(read_back > 30, "{read_back} read back");
}
