//! A checkpoint holds no more heap than the memo counts for it: every recorded session is
//! projected turn by turn with one memo, and each checkpoint it kept is dropped alone (the
//! rest of the memo dropped first, so that nothing else holds what it shares) while a
//! counting allocator measures what that frees.
// A counting allocator is an unsafe trait to implement; it only forwards to the system one.
#![allow(unsafe_code)]

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use staleguard::{project, Memo, Options, RequestFormat};
use support::{on, openai_fixtures, read};

struct Counting;

static HELD: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_checkpoint_holds_no_more_than_its_weight() {
    let memo = Memo::new(1 << 30);
    let config = on();
    for path in openai_fixtures() {
        let body: serde_json::Value = serde_json::from_str(&read(&path)).expect("JSON");
        let messages = body["messages"].as_array().expect("messages").clone();
        for n in 1..=messages.len() {
            let mut turn = body.clone();
            turn["messages"] = serde_json::Value::Array(messages[..n].to_vec());
            let options = Options {
                memo: Some(&memo),
                ..Options::default()
            };
            let request = turn.to_string();
            project(&request, RequestFormat::OpenAiChat, &config, options).expect("projects");
        }
    }
    let resumed = memo.resumed();
    let kept = staleguard::internal::memo::checkpoints_of(memo);
    assert!(
        kept.len() > 20 && resumed > 100,
        "{} kept, {resumed} resumed",
        kept.len()
    );
    let (mut held_all, mut weighed_all, mut worst) = (0, 0, 0.0f64);
    let mut over = Vec::new();
    for (checkpoint, weight) in kept {
        let before = HELD.load(Ordering::Relaxed);
        drop(checkpoint);
        let held = (before - HELD.load(Ordering::Relaxed)) as usize;
        if held > weight {
            over.push((held, weight));
        }
        held_all += held;
        weighed_all += weight;
        worst = worst.max(held as f64 / weight as f64);
    }
    eprintln!("checkpoints hold {held_all} bytes, weighed {weighed_all}; the fullest holds {worst:.2} of its weight");
    assert!(
        over.is_empty(),
        "checkpoints held more than weighed (held, weight): {over:?}"
    );
}
